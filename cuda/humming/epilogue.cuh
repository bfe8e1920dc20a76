// humming: epilogue math (channel scale, bias, fused activation) in f32, then rounding to C's dtype.
#pragma once
#include "dequant.cuh"

namespace humming {

template <EpilogueKind E>
__device__ __forceinline__ float apply_epilogue(float x) {
  if constexpr (E == EpilogueKind::kRelu) {
    return x > 0.0f ? x : 0.0f;
  } else if constexpr (E == EpilogueKind::kSilu) {
    return x / (1.0f + __expf(-x));
  } else if constexpr (E == EpilogueKind::kGelu) {
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  } else if constexpr (E == EpilogueKind::kGeluTanh) {
    return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
  } else {
    return x;
  }
}

// Finishes two adjacent outputs (columns col, col + 1 of one row) and returns them as a C pair.
template <class Q>
__device__ __forceinline__ u32 finish_pair(float v0, float v1, const GemmParams& p, int col) {
  using H = Half2<typename Q::T>;
  if constexpr (!Q::kScaleOnB) {
    const u32 s = *reinterpret_cast<const u32*>(static_cast<const u16*>(p.scales) + col);
    v0 *= H::to_float(static_cast<u16>(s & 0xFFFFu));
    v1 *= H::to_float(static_cast<u16>(s >> 16));
  }
  if constexpr (Q::kBias) {
    const u32 b = *reinterpret_cast<const u32*>(static_cast<const u16*>(p.bias) + col);
    v0 += H::to_float(static_cast<u16>(b & 0xFFFFu));
    v1 += H::to_float(static_cast<u16>(b >> 16));
  }
  v0 = apply_epilogue<Q::kEpilogue>(v0);
  v1 = apply_epilogue<Q::kEpilogue>(v1);
  return H::from_floats(v0, v1);
}

// Finishes one output (column col) and returns it as C bits.
template <class Q>
__device__ __forceinline__ u16 finish_one(float v, const GemmParams& p, int col) {
  using H = Half2<typename Q::T>;
  if constexpr (!Q::kScaleOnB) v *= H::to_float(static_cast<const u16*>(p.scales)[col]);
  if constexpr (Q::kBias) v += H::to_float(static_cast<const u16*>(p.bias)[col]);
  v = apply_epilogue<Q::kEpilogue>(v);
  return static_cast<u16>(H::from_floats(v, 0.0f) & 0xFFFFu);
}

}  // namespace humming
