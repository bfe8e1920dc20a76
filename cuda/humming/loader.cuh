// humming: global -> shared loads of one pipeline stage (A tile, packed B units, scale and zero-point
// rows) with 16-byte cp.async, predicated and zero-filled outside the problem.
//
// Each copy loop has a compile-time trip count (chunk i = tid + j * threads covers the same chunks as a
// strided loop), so it unrolls and its per-thread index math is computed once, outside the main loop.
//
// Shared-memory stage layout (bytes, each part 16-byte aligned):
//   A      [BK/64][BM][64] A-dtype, rows of 128 bytes whose 16-byte chunks are XOR-swizzled by row % 8
//          so that ldmatrix reads are free of bank conflicts
//   B      [BK/64][BN/64] packed units of 64*64*bits/8 bytes, copied verbatim
//   scales [rows][BN] (rows = max(1, BK / G) for group scales, 0 otherwise)
//   zeros  [rows][BN] when the kernel has a zero point and group scales
#pragma once
#include "common.cuh"

namespace humming {

template <class Q, class Tl>
struct StageLayout {
  static constexpr int kWarpsN = Tl::BN / 64;
  static constexpr int kWarpsK = Tl::BK / 64;
  static constexpr int kABytes = Tl::BM * Tl::BK * 2;
  static constexpr int kUnitBytes = 64 * 64 * Q::kBits / 8;
  static constexpr int kBBytes = kWarpsN * kWarpsK * kUnitBytes;
  static constexpr int kScaleRows = Q::kGroup == 0 ? 0 : (Tl::BK / Q::kGroup > 1 ? Tl::BK / Q::kGroup : 1);
  static constexpr int kSBytes = kScaleRows * Tl::BN * 2;
  static constexpr int kZBytes = Q::kZp != ZeroPointKind::kNone ? kSBytes : 0;
  static constexpr int kAOffset = 0;
  static constexpr int kBOffset = kABytes;
  static constexpr int kSOffset = kBOffset + kBBytes;
  static constexpr int kZOffset = kSOffset + kSBytes;
  static constexpr int kStageBytes = kZOffset + kZBytes;
  static_assert(kABytes % 16 == 0 && kBBytes % 16 == 0 && kSBytes % 16 == 0, "stage parts must stay 16-byte aligned");
};

template <class Q, class Tl, int kThreads>
__device__ __forceinline__ void load_stage(char* stage, const GemmParams& p, int k0, int m0, int n0) {
  using L = StageLayout<Q, Tl>;
  const int tid = threadIdx.x;
  // A: BM rows x BK columns, 8 halves per chunk.
  {
    constexpr int kChunksPerRow = Tl::BK / 8;
    constexpr int kChunks = Tl::BM * kChunksPerRow;
    const u16* a = static_cast<const u16*>(p.a);
#pragma unroll
    for (int j = 0; j < (kChunks + kThreads - 1) / kThreads; ++j) {
      const int i = tid + j * kThreads;
      if (kChunks % kThreads != 0 && i >= kChunks) break;
      const int row = i / kChunksPerRow, c = i % kChunksPerRow;
      const int kw = c / 8, ch = c % 8;
      const int grow = m0 + row, gk = k0 + c * 8;
      const bool pred = grow < p.m && gk < p.k;
      const u16* src = pred ? a + static_cast<long long>(grow) * p.lda + gk : a;
      char* dst = stage + L::kAOffset + kw * (Tl::BM * 128) + row * 128 + ((ch ^ (row & 7)) * 16);
      cp_async16(dst, src, pred);
    }
  }
  // B: whole units.
  {
    constexpr int kChunksPerUnit = L::kUnitBytes / 16;
    constexpr int kChunks = L::kWarpsN * L::kWarpsK * kChunksPerUnit;
    const char* b = static_cast<const char*>(p.b);
    const int units_n = p.n / 64, units_k = p.k / 64;
#pragma unroll
    for (int j = 0; j < (kChunks + kThreads - 1) / kThreads; ++j) {
      const int i = tid + j * kThreads;
      if (kChunks % kThreads != 0 && i >= kChunks) break;
      const int u = i / kChunksPerUnit, c = i % kChunksPerUnit;
      const int kw = u / L::kWarpsN, wn = u % L::kWarpsN;
      const int ku = k0 / 64 + kw, nu = n0 / 64 + wn;
      const bool pred = ku < units_k && nu < units_n;
      const char* src = pred ? b + (static_cast<long long>(ku) * units_n + nu) * L::kUnitBytes + c * 16 : b;
      cp_async16(stage + L::kBOffset + u * L::kUnitBytes + c * 16, src, pred);
    }
  }
  // Scale and zero-point rows (group scales only).
  if constexpr (L::kScaleRows > 0) {
    constexpr int kChunksPerRow = Tl::BN / 8;
    constexpr int kChunks = L::kScaleRows * kChunksPerRow;
    const int groups = (p.k + Q::kGroup - 1) / Q::kGroup;
    const int g0 = k0 / Q::kGroup;
#pragma unroll
    for (int j = 0; j < (kChunks + kThreads - 1) / kThreads; ++j) {
      const int i = tid + j * kThreads;
      if (kChunks % kThreads != 0 && i >= kChunks) break;
      const int r = i / kChunksPerRow, c = i % kChunksPerRow;
      const int g = g0 + r, n = n0 + c * 8;
      const bool pred = g < groups && n < p.n;
      const long long off = pred ? (static_cast<long long>(g) * p.n + n) : 0;
      cp_async16(stage + L::kSOffset + (r * Tl::BN + c * 8) * 2, static_cast<const u16*>(p.scales) + off, pred);
      if constexpr (L::kZBytes > 0) {
        cp_async16(stage + L::kZOffset + (r * Tl::BN + c * 8) * 2, static_cast<const u16*>(p.zeros) + off, pred);
      }
    }
  }
}

}  // namespace humming
