// probe_timing.cuh: what the standalone timing probes (dev/stream_probe.cu, dev/reg_probe.cu)
// share: the CUDA error check and the time per launch of a CUDA graph of `launches` back-to-back
// launches, as .gpu/bench and examples/tune time our kernels (graph replay; the caller rotates its
// buffers past the 60 MB L2 cache between launches).
#pragma once
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                     \
  do {                                                                                            \
    cudaError_t e_ = (x);                                                                         \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));      \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

// Microseconds per launch over `trials` replays of one graph of launch(0) .. launch(launches - 1)
// (captured on `st`, replayed once to warm up): median, min and max.
struct GraphTime {
  float median, min, max;
};

template <class Launch>
GraphTime time_graph(cudaStream_t st, int launches, int trials, Launch&& launch) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  for (int l = 0; l < launches; ++l) launch(l);
  CK(cudaStreamEndCapture(st, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  CK(cudaGraphLaunch(ge, st));
  CK(cudaStreamSynchronize(st));
  std::vector<float> t;
  for (int r = 0; r < trials; ++r) {
    CK(cudaEventRecord(e0, st));
    CK(cudaGraphLaunch(ge, st));
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms * 1e3f / launches);
  }
  std::sort(t.begin(), t.end());
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return {t[t.size() / 2], t.front(), t.back()};
}
