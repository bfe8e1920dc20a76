// humming: the input quantization of 8-bit-activation kernels: 16-bit A to codes and f32 scales, bit for
// bit the rules of humming_runtime::act_quant (its CPU reference). Per cell (a row, or a group of a row
// along K): amax = max |x|, s = amax / max(code) (or the static scale), inv = 1 / s (0 where s is 0), and
// each code is x * inv rounded to nearest even and saturated (a -0 is written as +0, as the reference
// does). One CTA per row (per group scales: per row and up to kActQuantThreads / 32 groups): 16-byte
// loads of A, 8-byte stores of codes. Gathered (the persistent moe_indexed tiles): row i of the codes
// quantizes the row of A of slot rows[i], so that each expert's rows are one box of the GEMM's tiles.
// GLU (a MoE layer's down projection): the row quantized is silu(gate) * up of A's row halves.
#pragma once
#include "dequant.cuh"
#include "ptx.cuh"

namespace humming {

template <class Code>
struct CodeEncode;

// Two f32 values to two float codes (lo in byte 0), round to nearest even, saturating.
template <>
struct CodeEncode<CodeE4M3> {
  static constexpr float kMax = 448.0f;
  __device__ __forceinline__ static u32 pair(float lo, float hi) {
    u16 d;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(d) : "f"(hi), "f"(lo));
    return d;
  }
};
template <>
struct CodeEncode<CodeE5M2> {
  static constexpr float kMax = 57344.0f;
  __device__ __forceinline__ static u32 pair(float lo, float hi) {
    u16 d;
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(d) : "f"(hi), "f"(lo));
    return d;
  }
};
template <>
struct CodeEncode<CodeS8> {
  static constexpr float kMax = 127.0f;
  __device__ __forceinline__ static u32 one(float x) {
    int v;
    asm("cvt.rni.sat.s32.f32 %0, %1;" : "=r"(v) : "f"(x));
    v = v > 127 ? 127 : v < -128 ? -128 : v;
    return static_cast<u32>(v) & 0xFFu;
  }
  __device__ __forceinline__ static u32 pair(float lo, float hi) { return one(lo) | one(hi) << 8; }
};

// Four codes (bytes) with every negative zero (sign bit alone) made +0.
template <class Code>
__device__ __forceinline__ u32 positive_zeros(u32 c) {
  if constexpr (Code::kInt) {
    return c;
  } else {
    const u32 nonzero = ((c & 0x7F7F7F7Fu) + 0x7F7F7F7Fu) & 0x80808080u;  // bit 7: the magnitude is not 0
    return c & (0x7F7F7F7Fu | nonzero);
  }
}

template <class T, class Code>
struct ActQuant {
  using H = Half2<T>;
  using E = CodeEncode<Code>;
  static constexpr int kWarps = kActQuantThreads / 32;

  // Eight 16-bit values (a 16-byte chunk) in f32.
  __device__ __forceinline__ static void unpack(const uint4& x, float (&v)[8]) {
    const u32 w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      v[2 * i] = H::to_float(static_cast<u16>(w[i] & 0xFFFFu));
      v[2 * i + 1] = H::to_float(static_cast<u16>(w[i] >> 16));
    }
  }

  // Values c .. c + 8 of the row being quantized, in f32: row `a`'s (a null row, a padding slot: zeros),
  // or with p.glu silu(gate) * up of its halves [0, k) and [k, 2 k).
  __device__ __forceinline__ static void chunk(const ActQuantParams& p, const u16* a, int c, float (&v)[8]) {
    if (a == nullptr) {
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = 0.0f;
      return;
    }
    unpack(*reinterpret_cast<const uint4*>(a + c), v);
    if (p.glu != 0) {
      float u[8];
      unpack(*reinterpret_cast<const uint4*>(a + p.k + c), u);
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = v[i] / (1.0f + __expf(-v[i])) * u[i];
    }
  }

  // The largest |x| of eight values.
  __device__ __forceinline__ static float chunk_amax(const float (&v)[8]) {
    float m = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) m = fmaxf(m, fabsf(v[i]));
    return m;
  }

  // The eight codes of a chunk: x * inv in f32, then rounded.
  __device__ __forceinline__ static uint2 chunk_codes(const float (&v)[8], float inv) {
    u32 c[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) c[i] = E::pair(v[2 * i] * inv, v[2 * i + 1] * inv);
    return make_uint2(positive_zeros<Code>(c[0] | c[1] << 16), positive_zeros<Code>(c[2] | c[3] << 16));
  }

  __device__ __forceinline__ static float warp_max(float m) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
    return m;
  }

  // Codes of columns [c0, c1) of a row (chunks of 8) from `threads` threads, this one `t`.
  __device__ __forceinline__ static void encode(const ActQuantParams& p, const u16* a, unsigned char* q, int c0, int c1,
                                                int t, int threads, float inv) {
    for (int c = c0 + 8 * t; c < c1; c += 8 * threads) {
      float v[8];
      chunk(p, a, c, v);
      *reinterpret_cast<uint2*>(q + c) = chunk_codes(v, inv);
    }
  }

  // The largest |x| of columns [c0, c1) from `threads` threads, this one `t`.
  __device__ __forceinline__ static float amax(const ActQuantParams& p, const u16* a, int c0, int c1, int t, int threads) {
    float m = 0.0f;
    for (int c = c0 + 8 * t; c < c1; c += 8 * threads) {
      float v[8];
      chunk(p, a, c, v);
      m = fmaxf(m, chunk_amax(v));
    }
    return m;
  }

  // The row of A behind row `row` of the codes: itself, or gathered by slot (null: padding); false
  // where the row is past those in use and is left alone.
  __device__ __forceinline__ static bool source(const ActQuantParams& p, int row, const u16*& a) {
    long long src = row;
    if (p.rows_used != nullptr) {
      grid_dependency_wait();  // the routing may come from the previous kernel
      if (row >= *p.rows_used) return false;
    }
    if (p.rows != nullptr) {
      const int id = __ldg(p.rows + row);
      const long long slots = static_cast<long long>(p.m) * p.top_k;
      src = id >= 0 && id < slots ? id / p.top_k : -1;
    }
    a = src >= 0 ? static_cast<const u16*>(p.a) + src * p.lda : nullptr;
    return true;
  }

  __device__ __forceinline__ static void run(const ActQuantParams& p) {
    // The GEMM that reads the codes may launch now and stream its first weights (its
    // griddepcontrol.wait still waits for this whole grid before it reads A).
    grid_launch_dependents();
    const int row = blockIdx.x;
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    const u16* a;
    if (!source(p, row, a)) return;
    unsigned char* q = static_cast<unsigned char*>(p.codes) + static_cast<long long>(row) * p.ldq;
    if (p.group == 0) {
      float s = p.static_scale;
      if (!(s > 0.0f)) {
        float m = amax(p, a, 0, p.k, t, kActQuantThreads);
        __shared__ float s_max[kWarps];
        m = warp_max(m);
        if (lane == 0) s_max[warp] = m;
        __syncthreads();
        m = 0.0f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) m = fmaxf(m, s_max[w]);
        s = m / E::kMax;
      }
      encode(p, a, q, 0, p.k, t, kActQuantThreads, s > 0.0f ? 1.0f / s : 0.0f);
      if (t == 0) p.scales[row] = s;
    } else {
      // One warp per group; the row's groups spread over gridDim.y CTAs.
      const int groups = (p.k + p.group - 1) / p.group;
      for (int g = blockIdx.y * kWarps + warp; g < groups; g += kWarps * gridDim.y) {
        const int c0 = g * p.group, c1 = min(p.k, c0 + p.group);
        const float s = warp_max(amax(p, a, c0, c1, lane, 32)) / E::kMax;
        encode(p, a, q, c0, c1, lane, 32, s > 0.0f ? 1.0f / s : 0.0f);
        if (lane == 0) p.scales[static_cast<long long>(row) * groups + g] = s;
      }
    }
  }
};

}  // namespace humming
