// reg_probe: can an M <= 8 W4A16 main loop that loads its weights straight into registers (no shared
// memory stage ring, no CTA barrier, no mbarrier) run closer to the DRAM floor than our 8-row tile?
//
// Timing probe only (results are not checked): the work per weight mimics the 8-row swap-AB tile of
// cuda/humming/gemm.cuh (4-bit codes, magic-number dequantization with 4 lop3 + 1 shift + 2 f16x2
// subtractions per 32-bit word, one mma.sync m16n8k16 per word, one offset-folding mma per k16 slab,
// 16 f32 fma for the group scale per 64-deep step), but the weights come from global memory by
// 16-byte ld.global.nc.L1::no_allocate with an L2 evict-first hint, D steps ahead, into a register
// ring; the first D steps are issued before griddepcontrol.wait (PDL). A (8 rows) is copied once per
// CTA into shared memory in fragment order; group scales come by one 16-byte load per lane and step.
// K splits add their outputs into an f32 buffer with red.global.add (a lower bound for any split-K
// tail). CTA = 2 warps along N (64 channels each) x WK warps along K (64 deep each).
//
// H200 (perf/HISTORY.md; 190 SASS instructions per warp and
// 64 x 64 step against the 8-row tile's 270): 8192 x 8192 11.1 us (4 warps along K, 2 steps ahead,
// 2 CTAs per SM, 4 splits), 28672 x 4096 19.1-19.6, 4096 x 14336 10.4, 4096 x 4096 4.5; our 8-row
// tile with its deterministic tail took 11.7 / 17.7 / 10.7 / 5.9 in the same week, and ~10.65 at
// 8192 x 8192 with a free tail. Fewer instructions and no barrier did not make the stream faster:
// not pursued.
//
// Build and run on the GPU machine (probe_timing.cuh beside it):
//                                     nvcc -O3 -arch=sm_90a -o /tmp/reg_probe dev/reg_probe.cu
//                                     /tmp/reg_probe
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>
#include "probe_timing.cuh"


typedef unsigned u32;

__device__ __forceinline__ u32 lop_or(u32 w, u32 mask, u32 magic) {
  u32 r;
  asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(r) : "r"(w), "r"(mask), "r"(magic));
  return r;
}
__device__ __forceinline__ u32 hsub2(u32 a, u32 b) {
  u32 r;
  asm("sub.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
__device__ __forceinline__ void mma(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint4 ldg_stream(const uint4* p, unsigned long long pol) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p), "l"(pol));
  return v;
}
__device__ __forceinline__ uint4 ldg_keep(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

struct Slot {
  uint4 b[4];
  uint4 s;
};

// B: units of 64 channels x 64 k (2 KiB), [N/64][K/64], lane l's j-th 16 bytes at j * 32 + l.
// S: per 64 channels and group of 128 k, 8 x 16 bytes (lane l reads (l / 4)); [N/64][K/128][8].
// A: per 64 k, per lane 2 x 16 bytes of n8 B fragments (4 slabs x 2 registers); [K/64][2][32].
template <int WK, int D, int CTAS>
__global__ void __launch_bounds__(64 * WK, CTAS)
    reg_kernel(const uint4* __restrict__ B, const uint4* __restrict__ S, const uint4* __restrict__ A,
               float* __restrict__ out, int N, int K, int splits, int m, int pdl) {
  extern __shared__ uint4 a_s[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wn = warp & 1, wk = warp >> 1;
  const int n_unit = blockIdx.x * 2 + wn;
  const int k_split = K / splits;
  const int k0 = blockIdx.y * k_split;
  const int steps = k_split / (64 * WK);  // per warp
  const int kunits = K / 64;
  unsigned long long pol;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  const uint4* bp = B + (size_t(n_unit) * kunits + k0 / 64 + wk) * 128 + lane;
  const uint4* sp = S + (size_t(n_unit) * (K / 128)) * 8 + (lane >> 2);
  auto load = [&](Slot& sl, int s) {
    const uint4* p = bp + size_t(s) * WK * 128;
#pragma unroll
    for (int j = 0; j < 4; ++j) sl.b[j] = ldg_stream(p + j * 32, pol);
    sl.s = ldg_keep(sp + ((k0 + (s * WK + wk) * 64) / 128) * 8);
  };
  if (pdl) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  Slot ring[D];
#pragma unroll
  for (int d = 0; d < D; ++d)
    if (d < steps) load(ring[d], d);
  if (pdl) asm volatile("griddepcontrol.wait;" ::: "memory");
  // A of the split into shared memory, fragment order.
  const uint4* ap = A + size_t(k0 / 64) * 64;
  for (int i = threadIdx.x; i < k_split; i += 64 * WK) a_s[i] = ldg_keep(ap + i);
  __syncthreads();
  float acc[4][4] = {};
  const u32 fold[4] = {0x3c003c00u, 0x3c003c00u, 0x3c003c00u, 0x3c003c00u};
  for (int s0 = 0; s0 < steps; s0 += D) {
#pragma unroll
    for (int d = 0; d < D; ++d) {
      const int s = s0 + d;
      if (s < steps) {
        const int u = s * WK + wk;  // k unit within the split
        const uint4 a0 = a_s[(u * 2 + 0) * 32 + lane], a1 = a_s[(u * 2 + 1) * 32 + lane];
        const u32 af[4][2] = {{a0.x, a0.y}, {a0.z, a0.w}, {a1.x, a1.y}, {a1.z, a1.w}};
        float t[4][4] = {};
        const u32* w = reinterpret_cast<const u32*>(ring[d].b);
#pragma unroll
        for (int slab = 0; slab < 4; ++slab) {
#pragma unroll
          for (int mt = 0; mt < 4; ++mt) {
            const u32 x = w[slab * 4 + mt], x8 = x >> 8;
            u32 fr[4];
            fr[0] = hsub2(lop_or(x, 0x000f000fu, 0x64006400u), 0x64086408u);
            fr[1] = lop_or(x, 0x00f000f0u, 0x64006400u);
            fr[2] = hsub2(lop_or(x8, 0x000f000fu, 0x64006400u), 0x64086408u);
            fr[3] = lop_or(x8, 0x00f000f0u, 0x64006400u);
            mma(t[mt], fr, af[slab][0], af[slab][1]);
          }
          mma(t[slab], fold, af[slab][0], af[slab][1]);
        }
        const u32* sc = reinterpret_cast<const u32*>(&ring[d].s);
#pragma unroll
        for (int mt = 0; mt < 4; ++mt) {
          const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&sc[mt]));
          acc[mt][0] += f.x * t[mt][0];
          acc[mt][1] += f.x * t[mt][1];
          acc[mt][2] += f.y * t[mt][2];
          acc[mt][3] += f.y * t[mt][3];
        }
        if (s + D < steps) load(ring[d], s + D);
      }
    }
  }
  // Sum the WK warps along K in shared memory (reusing a_s), then add row 0..m-1 into out.
  __syncthreads();
  float* red = reinterpret_cast<float*>(a_s);
#pragma unroll
  for (int mt = 0; mt < 4; ++mt)
#pragma unroll
    for (int j = 0; j < 4; ++j) red[((warp * 4 + mt) * 4 + j) * 32 + lane] = acc[mt][j];
  __syncthreads();
  if (wk == 0) {
#pragma unroll
    for (int mt = 0; mt < 4; ++mt)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float v = 0;
        for (int q = 0; q < WK; ++q) v += red[(((q * 2 + wn) * 4 + mt) * 4 + j) * 32 + lane];
        const int row = 2 * (lane & 3) + (j & 1);
        const int col = n_unit * 64 + (2 * mt + (j >> 1)) * 8 + (lane >> 2);
        if (row < m) {
          if (splits == 1)
            out[size_t(row) * N + col] = v;
          else
            atomicAdd(&out[size_t(row) * N + col], v);
        }
      }
  }
}

using Kern = void (*)(const uint4*, const uint4*, const uint4*, float*, int, int, int, int, int);

struct Variant {
  const char* name;
  Kern k;
  int wk, ctas;
};

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const Variant vars[] = {
      {"wk4 d2 c2", reg_kernel<4, 2, 2>, 4, 2}, {"wk4 d3 c2", reg_kernel<4, 3, 2>, 4, 2},
      {"wk8 d2 c1", reg_kernel<8, 2, 1>, 8, 1},
      {"wk8 d3 c1", reg_kernel<8, 3, 1>, 8, 1}, {"wk2 d3 c4", reg_kernel<2, 3, 4>, 2, 4},
  };
  for (const Variant& v : vars) {
    CK(cudaFuncSetAttribute(v.k, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
    cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, v.k));
    std::printf("%s: %d registers, %zu bytes local\n", v.name, fa.numRegs, fa.localSizeBytes);
  }
  const size_t pool = size_t(640) << 20;
  char* buf = nullptr;
  CK(cudaMalloc(&buf, pool));
  CK(cudaMemset(buf, 0x35, pool));
  float* out = nullptr;
  CK(cudaMalloc(&out, 16 * 32768 * sizeof(float)));
  uint4* a = nullptr;
  CK(cudaMalloc(&a, 16384 * 16));
  CK(cudaMemset(a, 0x11, 16384 * 16));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  struct Shape {
    int n, k;
  } shapes[] = {{4096, 4096}, {8192, 8192}, {28672, 4096}, {4096, 14336}};
  std::printf("%-10s %12s %6s %4s %10s\n", "variant", "N x K", "splits", "m", "us/launch");
  for (const Shape sh : shapes) {
    const size_t bbytes = size_t(sh.n) * sh.k / 2, sbytes = size_t(sh.n) / 64 * (sh.k / 128) * 128;
    const size_t each = (bbytes + sbytes + 4095) / 4096 * 4096;
    const size_t copies = std::max<size_t>(1, std::min<size_t>(pool / each, 64));
    for (const Variant& v : vars) {
      const int tiles = sh.n / 128;
      for (const int splits : {1, 2, 4, 8}) {
        if (sh.k % (splits * 64 * v.wk) != 0) continue;
        const int ctas = tiles * splits;
        if (ctas > sms * v.ctas || (splits > 1 && ctas * 2 <= sms * v.ctas)) continue;  // one full-ish wave
        const int k_split = sh.k / splits;
        const size_t smem = std::max<size_t>(size_t(k_split) * 16, size_t(2 * v.wk) * 4 * 4 * 32 * 4);
        if (smem * v.ctas > 220 * 1024) continue;
        const int launches = 40;
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[0].val.programmaticStreamSerializationAllowed = 1;
        auto launch = [&](int l) {
          const char* base = buf + (l % copies) * each;
          cudaLaunchConfig_t cfg = {};
          cfg.stream = st;
          cfg.attrs = attr;
          cfg.numAttrs = 1;
          cfg.gridDim = dim3(tiles, splits);
          cfg.blockDim = dim3(64 * v.wk);
          cfg.dynamicSmemBytes = smem;
          CK(cudaLaunchKernelEx(&cfg, v.k, reinterpret_cast<const uint4*>(base),
                                reinterpret_cast<const uint4*>(base + bbytes), const_cast<const uint4*>(a), out,
                                sh.n, sh.k, splits, 1, 1));
          CK(cudaGetLastError());
        };
        const GraphTime t = time_graph(st, launches, 9, launch);
        std::printf("%-10s %5dx%-6d %6d %4d %10.2f   (min %.2f max %.2f)\n", v.name, sh.n, sh.k, splits, 1,
                    t.median, t.min, t.max);
      }
    }
  }
  CK(cudaDeviceSynchronize());
  std::printf("done\n");
  return 0;
}
