// humming: global -> shared loads of one pipeline stage (A tile, packed B units, scale and zero-point
// rows) with 16-byte cp.async, predicated and zero-filled outside the problem.
//
// Each copy loop has a compile-time trip count (chunk i = tid + j * threads covers the same chunks as a
// strided loop), so it unrolls and its per-thread index math is computed once, outside the main loop.
//
// Shared-memory stage layout (bytes, each part 16-byte aligned):
//   A      [BK/64][BM][64] A-dtype, rows of 128 bytes (64 for 8-bit codes) whose 16-byte chunks are
//          XOR-swizzled (a_swizzle) so that ldmatrix reads are free of bank conflicts
//   B      [BK/64][BN/64] packed units of 64*64*bits/8 bytes, copied verbatim
//   scales [rows][BN] (rows = max(1, BK / G) for group scales, 0 otherwise)
//   zeros  [rows][BN] when the kernel has a zero point and group scales
#pragma once
#include "rows.cuh"

namespace humming {

// Byte offset of 16-byte chunk `chunk` of row `row` in a 64-wide A slab, so that ldmatrix reads (8 rows
// at one chunk) are free of bank conflicts: 16-bit A, rows of 128 bytes (chunks 0..7) XOR-swizzled by
// row % 8; 8-bit A, rows of 64 bytes (chunks 0..3) XOR-swizzled by (row / 2) % 4 (two rows share 128
// bytes). The loader writes and the kernel's ldmatrix reads go through this one function.
template <int kABytes = 2>
__device__ __forceinline__ u32 a_swizzle(int row, int chunk) {
  if constexpr (kABytes == 2) {
    return row * 128 + ((chunk ^ (row & 7)) * 16);
  } else {
    return row * 64 + ((chunk ^ ((row >> 1) & 3)) * 16);
  }
}

template <class Q, class Tl>
struct StageLayout {
  static constexpr int kWarpsN = Tl::BN / 64;
  static constexpr int kWarpsK = Tl::BK / 64;
  static constexpr int kABytes = Tl::BM * Tl::BK * Q::kABytes;
  static constexpr int kASlabBytes = Tl::BM * 64 * Q::kABytes;  // the A tile of one 64-deep warp slice
  static constexpr int kUnitBytes = 64 * 64 * Q::kBits / 8;
  static constexpr int kBBytes = kWarpsN * kWarpsK * kUnitBytes;
  static constexpr int kScaleRows = Q::kGroup == 0 ? 0 : (Tl::BK / Q::kGroup > 1 ? Tl::BK / Q::kGroup : 1);
  static constexpr int kSBytes = kScaleRows * Tl::BN * 2;
  static constexpr int kZBytes = Q::kZp != ZeroPointKind::kNone ? kSBytes : 0;
  static constexpr int kAOffset = 0;
  static constexpr int kBOffset = kABytes;
  static constexpr int kSOffset = kBOffset + kBBytes;
  static constexpr int kZOffset = kSOffset + kSBytes;
  // wgmma tiles start every stage (so every A tile) on a humming::kStageAlign (1024-byte) boundary:
  // the hardware's 128-byte swizzle is a function of the address bits 4-9.
  static constexpr int kStageAlign = Tl::kWgmma ? humming::kStageAlign : 16;
  static constexpr int kStageBytes = (kZOffset + kZBytes + kStageAlign - 1) / kStageAlign * kStageAlign;
  static_assert(kABytes % 16 == 0 && kBBytes % 16 == 0 && kSBytes % 16 == 0, "stage parts must stay 16-byte aligned");
};

// Copies one pipeline stage per call, stage after stage along K.
//
// On sm_90 and newer (kBulk) the packed B units and the scale / zero-point rows of a stage are
// contiguous runs in global memory (one run of BN/64 units per 64 of K, one run of BN values per group
// row), so thread 0 moves them with a handful of bulk copies (cp.async.bulk, the TMA unit) that signal
// the stage's mbarrier, instead of every thread issuing 16-byte cp.async copies: the per-thread copy
// code and the B source pointers leave the main loop. Units and rows outside the problem are not
// copied at all (the warps that would read them skip, or their channels are never stored); the A tile
// still goes through cp.async, which zero-fills rows past M and the swizzle of ldmatrix. The per-thread part of every address
// (row, chunk, smem slot) and the M/N bounds are computed once by the constructor; the source pointers
// are carried from stage to stage, so the copy code in the main loop is one 64-bit add and one cp.async
// per 16-byte chunk, plus K bounds checks in the last stage only. Sources of chunks outside the problem
// stay valid addresses (row 0, unit column 0) and are never read (cp.async with 0 source bytes).
template <class Q, class Tl, int kThreads, class R>
struct StageLoader {
  using L = StageLayout<Q, Tl>;
  static constexpr int kAPerChunk = 16 / Q::kABytes;  // elements of A per 16-byte chunk
  static constexpr int kAChunksPerRow = Tl::BK / kAPerChunk;
  static constexpr int kAChunksPerSlab = 64 / kAPerChunk;
  static constexpr int kAChunks = Tl::BM * kAChunksPerRow;
  static constexpr int kAPer = (kAChunks + kThreads - 1) / kThreads;
  static constexpr int kBChunksPerUnit = L::kUnitBytes / 16;
  static constexpr int kBChunks = L::kWarpsN * L::kWarpsK * kBChunksPerUnit;
  static constexpr int kBPer = (kBChunks + kThreads - 1) / kThreads;
  static constexpr int kSChunksPerRow = Tl::BN / 8;
  static constexpr int kSChunks = L::kScaleRows * kSChunksPerRow;
  static constexpr int kSPer = kSChunks > 0 ? (kSChunks + kThreads - 1) / kThreads : 1;
  static_assert(kAPer <= 32 && kBPer <= 32 && kSPer <= 32, "at most 32 chunks of a kind per thread");
  // Scale rows a stage moves on by: BK / G, or one row every G / BK stages for groups longer than BK.
  static constexpr int kGroupOrOne = Q::kGroup > 0 ? Q::kGroup : 1;
  static constexpr int kRowStep = Q::kGroup > 0 && Q::kGroup < Tl::BK ? Tl::BK / kGroupOrOne : 1;
#if HUMMING_HAS_BULK
  static constexpr bool kBulk = true;
#else
  static constexpr bool kBulk = false;
#endif
  static constexpr int kWarps = kThreads / 32;
  // Bulk copies per stage: one per 64-deep row of B units and one per scale (and zero-point) row.
  static constexpr int kCopies = L::kWarpsK + L::kScaleRows * (L::kZBytes > 0 ? 2 : 1);
  // wgmma tiles on sm_90a: the A tile comes by TMA too (GemmParams::a_map, one box of BM rows per 64 of
  // K, written in the 128-byte swizzle that wgmma reads), so one thread issues every copy of a stage
  // (load_weights_one, load_a_tma) and the stage's mbarrier counts kCopies + 1 arrivals.
  // (Not with a MoE row policy: its rows of A are gathered.)
  static constexpr bool kTma = kBulk && Tl::kWgmma && !R::kMoe;
  // Bulk copies: B bytes of one 64-deep row of the tile's units, its source, the bytes between rows.
  u32 bulk_units;        // units of this tile inside N
  const char* bulk_b;    // global address of the next stage's first row of units
  long long bulk_row;    // bytes between rows of units (N / 64 units)
  int bulk_n0;           // first channel of the tile

  int k0;  // K index of the next stage's weights
  int ka;  // K index of the next stage's A tile (load_a and load_weights move on separately)
  u32 a_ok, b_ok, s_ok;  // bit j: chunk j lies inside M (A) or N (B, scales)
  const char* a_src[kAPer];
  const char* b_src[kBPer];  // (not used with kBulk)
  long long b_stage_bytes;  // B bytes of one stage along K: BK / 64 rows of N / 64 units
  long long s_off[kSPer];   // (not used with kBulk) element offset of the scale chunk in the next stage's rows

  __device__ __forceinline__ StageLoader(const GemmParams& p, const TileRows& rows, int n0, int k_begin)
      : k0(k_begin), ka(k_begin), a_ok(0), b_ok(0), s_ok(0) {
    const int tid = threadIdx.x;
#pragma unroll
    for (int j = 0; j < kAPer; ++j) {
      const int i = tid + j * kThreads;
      const int row = i / kAChunksPerRow, c = i % kAChunksPerRow;
      // (Chunks past the tile's last row: row >= BM, never copied.)
      int src = 0;
      const bool ok = (kAChunks % kThreads == 0 || i < kAChunks) && R::read_row(p, rows, row, src);
      a_ok |= ok ? 1u << j : 0u;
      a_src[j] = static_cast<const char*>(p.a) +
                 ((ok ? static_cast<long long>(src) * p.lda : 0) + k0 + c * kAPerChunk) * Q::kABytes;
    }
    const int units_n = p.n / 64;
    const long long row_bytes = static_cast<long long>(units_n) * L::kUnitBytes;
    b_stage_bytes = row_bytes * (Tl::BK / 64);
    bulk_units = static_cast<u32>(min(L::kWarpsN, units_n - n0 / 64));
    bulk_b = static_cast<const char*>(p.b) + (k0 / 64) * row_bytes + static_cast<long long>(n0 / 64) * L::kUnitBytes;
    bulk_row = row_bytes;
    bulk_n0 = n0;
    if constexpr (!kBulk) {
#pragma unroll
      for (int j = 0; j < kBPer; ++j) {
        const int i = tid + j * kThreads;
        const int u = i / kBChunksPerUnit, c = i % kBChunksPerUnit;
        const int kw = u / L::kWarpsN, wn = u % L::kWarpsN;
        const int nu = n0 / 64 + wn;
        const bool ok = nu < units_n;
        b_ok |= ok ? 1u << j : 0u;
        b_src[j] = static_cast<const char*>(p.b) + (k0 / 64 + kw) * row_bytes + (ok ? static_cast<long long>(nu) * L::kUnitBytes : 0) + c * 16;
      }
#pragma unroll
      for (int j = 0; j < kSPer; ++j) {
        const int i = tid + j * kThreads;
        const int r = i / kSChunksPerRow, c = i % kSChunksPerRow;
        const bool ok = Q::kGroup > 0 && n0 + c * 8 < p.n;
        s_ok |= ok ? 1u << j : 0u;
        s_off[j] = (static_cast<long long>(k0 / kGroupOrOne) + r) * p.n + (ok ? n0 + c * 8 : 0);
      }
    }
  }

  // Issues the copies of the next stage into `stage` and moves on to the stage after it.
  // `stage` is the shared-space address of the stage buffer; `bar` that of its mbarrier (kBulk: thread
  // 0 arms it with the stage's byte count, the bulk copies complete it).
  __device__ __forceinline__ void load(u32 stage, u32 bar, const GemmParams& p) {
    load_a(stage, p);
    load_weights(stage, bar, p);
  }

  // The A tile of the next stage (cp.async, zero-filled past M and K).
  __device__ __forceinline__ void load_a(u32 stage, const GemmParams& p) {
    const int tid = threadIdx.x;
    const bool full = ka + Tl::BK <= p.k;  // uniform: no K bounds checks but in the last stage
#pragma unroll
    for (int j = 0; j < kAPer; ++j) {
      const int i = tid + j * kThreads;
      if (kAChunks % kThreads != 0 && i >= kAChunks) break;
      const int row = i / kAChunksPerRow, c = i % kAChunksPerRow;
      const int kw = c / kAChunksPerSlab, ch = c % kAChunksPerSlab;
      const bool pred = (a_ok >> j & 1u) && (full || ka + c * kAPerChunk < p.k);
      cp_async16(stage + L::kAOffset + kw * L::kASlabBytes + a_swizzle<Q::kABytes>(row, ch), a_src[j], pred);
      a_src[j] += Tl::BK * Q::kABytes;
    }
    ka += Tl::BK;
  }

  // The B units and scale / zero-point rows of the next stage.
  __device__ __forceinline__ void load_weights(u32 stage, u32 bar, const GemmParams& p) {
    const int tid = threadIdx.x;
    const bool full = k0 + Tl::BK <= p.k;
    if constexpr (kBulk) {
      // Copy j is issued by lane 0 of warp j % warps (a few copies per warp, spread over the schedulers).
      if ((tid & 31) == 0) {
#pragma unroll
        for (int j0 = 0; j0 < kCopies; j0 += kWarps) {
          if (j0 + (tid >> 5) < kCopies) load_bulk(stage, bar, p, j0 + (tid >> 5));
        }
      }
      bulk_b += b_stage_bytes;
    } else {
#pragma unroll
      for (int j = 0; j < kBPer; ++j) {
        const int i = tid + j * kThreads;
        if (kBChunks % kThreads != 0 && i >= kBChunks) break;
        const int kw = (i / kBChunksPerUnit) / L::kWarpsN;
        const bool pred = (b_ok >> j & 1u) && (full || k0 + kw * 64 < p.k);
        cp_async16(stage + L::kBOffset + i * 16, b_src[j], pred);
        b_src[j] += b_stage_bytes;
      }
      if constexpr (L::kScaleRows > 0) {
        const int groups = (p.k + kGroupOrOne - 1) / kGroupOrOne;
        const bool next_row = Q::kGroup <= Tl::BK || (k0 + Tl::BK) % kGroupOrOne == 0;
#pragma unroll
        for (int j = 0; j < kSPer; ++j) {
          const int i = tid + j * kThreads;
          if (kSChunks % kThreads != 0 && i >= kSChunks) break;
          const int r = i / kSChunksPerRow;
          const bool pred = (s_ok >> j & 1u) && (full || k0 / kGroupOrOne + r < groups);
          cp_async16(stage + L::kSOffset + i * 16, static_cast<const u16*>(p.scales) + s_off[j], pred);
          if constexpr (L::kZBytes > 0) {
            cp_async16(stage + L::kZOffset + i * 16, static_cast<const u16*>(p.zeros) + s_off[j], pred);
          }
          if (next_row) s_off[j] += static_cast<long long>(kRowStep) * p.n;
        }
      }
    }
    k0 += Tl::BK;
  }

  // kTma: the A tile of the next stage as BK / 64 TMA boxes of BM rows of 64 elements (128 or 64 bytes;
  // the tensor map's swizzle is a_swizzle's) (rows past M and K zero-filled;
  // boxes wholly past K are not copied: no warp reads them), one arrival expecting their bytes.
  __device__ __forceinline__ void load_a_tma(u32 stage, u32 bar, const GemmParams& p, int m0) {
    const int slabs = min(L::kWarpsK, (p.k - ka + 63) / 64);
    mbar_arrive_expect_tx(bar, static_cast<u32>(slabs) * L::kASlabBytes);
#pragma unroll
    for (int j = 0; j < L::kWarpsK; ++j) {
      if (j < slabs) tma_load_2d(stage + L::kAOffset + j * L::kASlabBytes, &p.a_map, ka + j * 64, m0, bar);
    }
    ka += Tl::BK;
  }
  // kTma: every bulk copy of the next stage's weights, issued by the calling thread.
  __device__ __forceinline__ void load_weights_one(u32 stage, u32 bar, const GemmParams& p) {
#pragma unroll
    for (int j = 0; j < kCopies; ++j) load_bulk(stage, bar, p, j);
    bulk_b += b_stage_bytes;
    k0 += Tl::BK;
  }

  // kBulk: copy j of the stage at k0: row j of B units (j < BK / 64), else a scale row (or, with zero
  // points, alternately a scale and a zero-point row). Each copy arrives on `bar` once, expecting its
  // bytes (none for a row outside K), so the barrier counts kCopies arrivals per phase.
  __device__ __forceinline__ void load_bulk(u32 stage, u32 bar, const GemmParams& p, int j) const {
    if (j < L::kWarpsK) {
      const u32 bytes = k0 + j * 64 < p.k ? bulk_units * L::kUnitBytes : 0u;
      mbar_arrive_expect_tx(bar, bytes);
      if (bytes != 0) bulk_copy_g2s(stage + L::kBOffset + j * L::kWarpsN * L::kUnitBytes, bulk_b + j * bulk_row, bytes, bar);
    } else if constexpr (L::kScaleRows > 0) {
      constexpr int kPer = L::kZBytes > 0 ? 2 : 1;  // copies per group row
      const int q = j - L::kWarpsK;
      const int r = q / kPer;
      const bool zp = kPer == 2 && (q & 1) != 0;
      const int row = k0 / kGroupOrOne + r;
      const u32 bytes = row < (p.k + kGroupOrOne - 1) / kGroupOrOne ? bulk_units * 128 : 0u;
      mbar_arrive_expect_tx(bar, bytes);
      if (bytes != 0) {
        const u16* src = static_cast<const u16*>(zp ? p.zeros : p.scales) + static_cast<long long>(row) * p.n + bulk_n0;
        bulk_copy_g2s(stage + (zp ? L::kZOffset : L::kSOffset) + r * Tl::BN * 2, src, bytes, bar);
      }
    }
  }
};

}  // namespace humming
