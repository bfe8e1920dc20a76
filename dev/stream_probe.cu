// stream_probe: how fast can a kernel that only reads B bytes from DRAM run, launch after launch?
//
// The W4A16 targets compare our GEMM with the "DRAM floor" (bytes / copy bandwidth). At M = 1 our
// kernels take ~3.8 us per launch more than their streaming time (PERFORMANCE.md, K sweep of
// 28672 x K). This probe measures what kernels that do nothing but read pay on the same terms as
// .gpu/bench (graph replay, buffers rotated past the 60 MB L2 cache, programmatic dependent launch
// on or off): the time a real kernel of those bytes can hope for on this machine.
//
// Kernels (each reads `bytes` once, spread evenly over the grid; `bytes` a multiple of 16 KiB for
// `bulk`; they fold what they read into a value stored only if it equals a constant, so that the
// loads stay):
//   ldg   : 16-byte ld.global.nc.L1::no_allocate, 8 loads in flight per thread, 512 threads, a grid
//           of 2 CTAs per SM
//   bulk  : cp.async.bulk global -> shared, a ring of S stages of 16 KiB completed on mbarriers (the
//           loading scheme of our kernels), a grid of one CTA per SM (2-4 fit, so with PDL the next
//           launch's CTAs are resident beside them); with PDL the first S stages are issued before
//           griddepcontrol.wait, as our kernels do with their weights
// PDL modes: off; on (trigger at kernel start; for ldg, griddepcontrol.wait before the first load).
//
// Build and run on the GPU machine:  nvcc -O3 -arch=sm_90a -o /tmp/stream_probe dev/stream_probe.cu
//                                     /tmp/stream_probe
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>
#include "probe_timing.cuh"


__device__ __forceinline__ void pdl_trigger() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

__global__ void __launch_bounds__(512, 2) ldg_kernel(const uint4* __restrict__ src, size_t n16, unsigned* out, int pdl) {
  if (pdl) { pdl_trigger(); pdl_wait(); }
  const size_t per = (n16 + gridDim.x - 1) / gridDim.x;
  const size_t begin = per * blockIdx.x;
  const size_t end = begin + per < n16 ? begin + per : n16;
  unsigned acc = 0;
  size_t i = begin + threadIdx.x;
  for (; i + 7 * 512 < end; i += 8 * 512) {
    uint4 v[8];
#pragma unroll
    for (int j = 0; j < 8; ++j)
      asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                   : "=r"(v[j].x), "=r"(v[j].y), "=r"(v[j].z), "=r"(v[j].w)
                   : "l"(src + i + j * 512));
#pragma unroll
    for (int j = 0; j < 8; ++j) acc ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
  }
  for (; i < end; i += 512) {
    uint4 v = src[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) out[blockIdx.x] = acc;  // keeps the loads; practically never taken
}

constexpr int kChunk = 16384;

__device__ __forceinline__ unsigned smem_u32(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }

template <int S>
__global__ void __launch_bounds__(256, 1) bulk_kernel(const char* __restrict__ src, size_t bytes, unsigned* out, int pdl) {
  extern __shared__ __align__(128) char smem[];
  __shared__ __align__(8) unsigned long long bars[S];
  if (pdl) pdl_trigger();
  const size_t chunks = bytes / kChunk;
  const size_t per = (chunks + gridDim.x - 1) / gridDim.x;
  const size_t c0 = per * blockIdx.x;
  const size_t c1 = c0 + per < chunks ? c0 + per : chunks;
  const int n = c1 > c0 ? static_cast<int>(c1 - c0) : 0;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"(smem_u32(&bars[s])));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  auto issue = [&](int it) {
    const int s = it % S;
    const unsigned bar = smem_u32(&bars[s]);
    asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(bar), "r"(kChunk) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     smem_u32(smem + s * kChunk)),
                 "l"(src + (c0 + it) * kChunk), "r"(kChunk), "r"(bar)
                 : "memory");
  };
  if (threadIdx.x == 0)
    for (int it = 0; it < S && it < n; ++it) issue(it);
  if (pdl) pdl_wait();
  unsigned acc = 0;
  for (int it = 0; it < n; ++it) {
    const int s = it % S;
    const unsigned bar = smem_u32(&bars[s]);
    const unsigned parity = (it / S) & 1;
    asm volatile(
        "{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared.b64 p, [%0], %1;\n @!p bra W;\n}\n" ::"r"(bar),
        "r"(parity)
        : "memory");
    const uint4* v = reinterpret_cast<const uint4*>(smem + s * kChunk);
#pragma unroll
    for (int j = 0; j < kChunk / 16 / 256; ++j) {
      const uint4 w = v[threadIdx.x + j * 256];
      acc ^= w.x ^ w.y ^ w.z ^ w.w;
    }
    __syncthreads();
    if (threadIdx.x == 0 && it + S < n) issue(it + S);
  }
  if (acc == 0x9e3779b9u) out[blockIdx.x] = acc;
}

using BulkKernel = void (*)(const char*, size_t, unsigned*, int);

// The bulk kernel of `stages` stages (3, 6 or 12, the ones the cases use).
BulkKernel bulk_for(int stages) {
  return stages == 3 ? bulk_kernel<3> : stages == 6 ? bulk_kernel<6> : bulk_kernel<12>;
}

struct Case {
  const char* kernel;
  int stages;  // bulk only
  int pdl;
};

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, %d SMs\n", prop.name, sms);
  const size_t pool = size_t(512) << 20;  // 512 MiB rotated through
  char* buf = nullptr;
  CK(cudaMalloc(&buf, pool));
  CK(cudaMemset(buf, 0x5a, pool));
  unsigned* out = nullptr;
  CK(cudaMalloc(&out, 4096 * sizeof(unsigned)));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));

  // Copy bandwidth (the bench's definition: read + write bytes of a device-to-device copy / time).
  {
    const size_t half = pool / 2;
    for (int w = 0; w < 3; ++w) CK(cudaMemcpyAsync(buf + half, buf, half, cudaMemcpyDeviceToDevice, st));
    CK(cudaEventRecord(e0, st));
    for (int r = 0; r < 10; ++r) CK(cudaMemcpyAsync(buf + half, buf, half, cudaMemcpyDeviceToDevice, st));
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    std::printf("copy bandwidth %.2f TB/s\n", 2.0 * half * 10 / (ms * 1e-3) / 1e12);
  }
  for (const int stages : {3, 6, 12})
    CK(cudaFuncSetAttribute(bulk_for(stages), cudaFuncAttributeMaxDynamicSharedMemorySize, stages * kChunk));

  const size_t sizes[] = {0, 1 << 20, 8388608, 29360128, 33554432, 58720256};
  const Case cases[] = {{"ldg", 0, 0}, {"ldg", 0, 1}, {"bulk", 3, 0}, {"bulk", 3, 1},
                        {"bulk", 6, 0}, {"bulk", 6, 1}, {"bulk", 12, 1}};
  std::printf("%-6s %6s %4s %10s %10s\n", "kernel", "stages", "pdl", "MB", "us/launch");
  for (const size_t bytes : sizes) {
    const size_t copies = bytes == 0 ? 1 : std::max<size_t>(1, std::min<size_t>(pool / bytes, 64));
    for (const Case& c : cases) {
      const int launches = 64;
      cudaLaunchAttribute attr[1];
      attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr[0].val.programmaticStreamSerializationAllowed = 1;
      auto launch = [&](int l) {
        const char* src = buf + (l % copies) * bytes;
        cudaLaunchConfig_t cfg = {};
        cfg.stream = st;
        cfg.attrs = c.pdl ? attr : nullptr;
        cfg.numAttrs = c.pdl ? 1 : 0;
        if (c.kernel[0] == 'l') {
          cfg.gridDim = dim3(2 * sms);
          cfg.blockDim = dim3(512);
          CK(cudaLaunchKernelEx(&cfg, ldg_kernel, reinterpret_cast<const uint4*>(src), bytes / 16, out, c.pdl));
        } else {
          cfg.gridDim = dim3(sms);
          cfg.blockDim = dim3(256);
          cfg.dynamicSmemBytes = c.stages * kChunk;
          CK(cudaLaunchKernelEx(&cfg, bulk_for(c.stages), src, bytes, out, c.pdl));
        }
        CK(cudaGetLastError());
      };
      const GraphTime t = time_graph(st, launches, 7, launch);
      std::printf("%-6s %6d %4d %10.2f %10.2f   (min %.2f max %.2f)\n", c.kernel, c.stages, c.pdl, bytes / 1e6,
                  t.median, t.min, t.max);
    }
  }
  CK(cudaDeviceSynchronize());
  std::printf("done\n");
  return 0;
}
