// humming: the compile-time shape of one kernel, a format Q with an activation policy (operand.cuh) and a
// weight policy (dequant.cuh) on a tile Tl, shared by the collectives that make up the kernel: the
// pipeline and main loops, the tile scheduler, the K reductions and the epilogue.
//
// Warps are arranged (K, M, N) = (BK/64, BM/WM, BN/WN); each warp owns a WM x WN tile of C and one
// 64-deep slice of every BK step. Warp tiles of 8 or 16 rows, and every wgmma tile, swap A and B: the
// weights are the mma's A operand (16 channels x 16 k) and the rows of A its B operand (one n8 tile per
// 8 rows), so at M <= 8 one n8 tile replaces an m16 tile that is mostly padding, and each thread's
// accumulators hold only its own channels (group scales can go on the f32 accumulators).
#pragma once
#include "operand.cuh"
#include "rows.cuh"
#include "scheduler.cuh"

// k16 slabs per wgmma commit group (1, 2 or 4): one group runs while the warps dequantize the next.
#ifndef HUMMING_WGMMA_GROUP_SLABS
#define HUMMING_WGMMA_GROUP_SLABS 2
#endif

namespace humming {

// The largest power of two n <= cap with n * each <= budget (1 when not even two fit).
__host__ __device__ constexpr int pow2_fit(int each, int budget, int cap, int n = 1) {
  return n * 2 <= cap && n * 2 * each <= budget ? pow2_fit(each, budget, cap, n * 2) : n;
}

template <class Q_, class Tl_, class Act_, class W_, class R_ = DenseRows>
struct KernelTraits {
  using Q = Q_;
  using Tl = Tl_;
  using Act = Act_;  // the activation operand policy
  using W = W_;      // the weight policy
  using Rows = R_;   // the row policy (rows.cuh)
  using T = typename Q::T;
  using L = StageLayout<Q, Tl>;
  static constexpr int kWarpsN = Tl::BN / Tl::WN;  // warps along N (units along N: L::kWarpsN)
  // wgmma tiles with warp N = 32 / 16: two / four warps share a 64-channel unit, each taking one half
  // (32 channels) / quarter (16 channels).
  static constexpr int kHalves = 64 / Tl::WN;
  static constexpr int kWarpsK = L::kWarpsK;
  static constexpr int kWarpsM = Tl::BM / Tl::WM;
  static constexpr int kThreads = kWarpsM * kWarpsN * kWarpsK * 32;  // compute threads
  using Loader = StageLoader<Q, Tl, kThreads, R_>;
  // Tl::kProducer: a producer warpgroup after the kThreads compute threads; the CTA is launched with
  // kLaunchThreads. It leaves once the last stage is issued, so that after the main loop only the
  // compute threads meet, at named barrier 1 (sync_compute).
  static constexpr bool kProducer = Tl::kProducer;
  static constexpr int kLaunchThreads = kThreads + (kProducer ? kProducerThreads : 0);
  static constexpr bool kWgmma = Tl::kWgmma;
  static constexpr bool kSwapAB = Tl::WM <= 16 || kWgmma;
  static constexpr int kTokTiles = Tl::WM / 8;  // n8 tiles of A rows per warp when swapped
  static constexpr int kMTiles = kSwapAB ? 1 : Tl::WM / 16;
  static constexpr int kMt = Tl::WN / 16;  // swapped: m16 channel tiles per warp (4; 2 / 1 with halves / quarters)
  // Accumulator tiles per m16 row block; swapped: kMt m16 channel tiles per n8 tile of rows.
  static constexpr int kAccN = kSwapAB ? kMt * kTokTiles : 8;
  // Group scales on the f32 accumulators, once per group and stage, instead of on every dequantized
  // weight pair (swap-AB mma.sync tiles with groups of 32 or more: 16 fma per m16 tile and group
  // against one multiply per pair; at 16 the two cost the same).
  static constexpr bool kScaleOnAcc =
      kSwapAB && !kWgmma && Q::kScaleOnB && Q::kGroup >= 32 && Q::kZp != ZeroPointKind::kFloatOffset;
  // kScaleOnAcc: the k16 slabs of a warp's 64-deep slice under one group scale.
  static constexpr int kAccGroupSlabs = Q::kGroup >= 64 ? 4 : Q::kGroup / 16;
  // Offset folding (dequant.cuh, OffsetFold): half of the 4-bit pairs (all 8-bit ones) skip their
  // subtraction; one extra mma per slab and n8 tile of rows supplies the missing term.
  static constexpr bool kFold = kScaleOnAcc && W::kFoldable;
  // wgmma on sm_90a: every copy of a stage, A by TMA, from one thread, and mbarriers for the hand-off.
  static constexpr bool kTma = Loader::kTma;
  // Stages loaded ahead of the one being read: STAGES - 1, or STAGES - 2 for wgmma with cp.async (a
  // stage is refilled two iterations after it was read, once its wgmmas are surely done).
  static constexpr int kAhead = kWgmma && !kTma ? Tl::STAGES - 2 : Tl::STAGES - 1;
  static constexpr int kGroupSlabs = HUMMING_WGMMA_GROUP_SLABS;
  static_assert(kGroupSlabs == 1 || kGroupSlabs == 2 || kGroupSlabs == 4, "1, 2 or 4 slabs per wgmma group");
  static constexpr int kPipelineBytes = Tl::STAGES * L::kStageBytes;
  static constexpr int kReduceBytes = (kWarpsK - 1) * Tl::BM * Tl::BN * 4;
  // wgmma: room to start the stages on a L::kStageAlign boundary.
  static constexpr int kAlignSlack = kWgmma ? L::kStageAlign : 0;
  static constexpr int kSmemBytes = (kPipelineBytes > kReduceBytes ? kPipelineBytes : kReduceBytes) + kAlignSlack;
  // The f32 tile of the staged epilogue: [BM][BN + 4] (+4 floats per row: the fragment stores hit 32
  // distinct banks), where it fits the dynamic shared memory (humming_spec::resources::f32_tile_fits).
  static constexpr int kStageLd = Tl::BN + 4;
  static constexpr bool kTileFits = Tl::BM * kStageLd * 4 <= kSmemBytes;
  // wgmma tiles write C through shared memory (16-byte stores), and can sum their K splits in a cluster.
  static constexpr bool kStaged = kWgmma && kTileFits;
  static_assert(kLaunchThreads <= 1024, "too many threads per CTA");

  // Split-K partials: the kAccThreads threads of K-warp 0 hold the tile's accumulators, kQuads float4s
  // each; a split's partial tile is stored fragment-major (float4 q of thread t at q * kAccThreads + t).
  static constexpr int kAccThreads = kWarpsM * kWarpsN * 32;
  static constexpr int kQuads = kMTiles * kAccN;
  // The bulk tail (wgmma on sm_90a): the last split pulls the partials through shared memory in chunks
  // of kTailQuads float4s per thread (kTailBytes contiguous bytes of the workspace), each one
  // cp.async.bulk into a ring of kTailRing slots with one mbarrier per slot (after the ring); only where
  // the ring holds at least what the register path keeps in flight.
  static constexpr int kTailQuads = kQuads % 8 == 0 ? 8 : kQuads % 4 == 0 ? 4 : kQuads % 2 == 0 ? 2 : 1;
  static constexpr int kTailBytes = kTailQuads * kAccThreads * 16;
  static constexpr int kTailChunks = kQuads / kTailQuads;  // chunks per split
  static constexpr int kTailRing = pow2_fit(kTailBytes + 8, kSmemBytes, 16);  // slot + its mbarrier
  // The register path's batch: up to 8 float4 loads in flight per thread, kRegTailBytes per CTA.
  static constexpr int kRegTailBatch = kQuads < 8 ? kQuads : 8;
  static constexpr int kRegTailBytes = kRegTailBatch * kAccThreads * 16;
  static constexpr bool kBulkTail = kTma && kTailRing >= 2 && kTailRing * kTailBytes >= kRegTailBytes;
  // Atomic split-K (kFlagAtomicC): the staged wgmma tiles and the 8-row mma.sync tile (kAtomic8: its
  // f32 tile, 8 rows x (BN + 4) floats, goes through the staged epilogue too, after the K-warp sum),
  // with f16 C, no bias and no epilogue (C is then linear in each split's partial)
  // (humming_spec::resources::atomic_split_k).
  static constexpr bool kAtomic8 = kSwapAB && !kWgmma && Tl::BM == 8 && kTileFits;
  static constexpr bool kAtomicC = (kStaged || kAtomic8) && !T::kIsBf16 && !Q::kBias &&
                                    Q::kEpilogue == EpilogueKind::kNone && !R_::kMoe;
  // SiLU-GLU: channels 16 j .. 16 j + 7 are gates, the next 8 their up projections (humming_spec::layout::
  // glu_source); C holds N / 2 columns. Each thread holds both halves of its outputs (channels c and c + 8).
  static constexpr bool kGlu = Q::kEpilogue == EpilogueKind::kSiluGlu;
  static_assert(!kGlu || !kWgmma, "the SiLU-GLU epilogue runs on mma.sync tiles");
  // The MoE layouts gather the rows of A with cp.async (no TMA box holds them): a wgmma tile of theirs
  // has no producer warpgroup, and its stages are handed over by CTA barriers (kAhead below).
  static_assert(!R_::kMoe || !kProducer, "MoE wgmma tiles gather A with cp.async: no producer warpgroup");
  static_assert(Q::kABytes == Act::kBytes, "the format's A element size is the activation policy's");
  static_assert(Act::kMma16 || kSwapAB, "8-bit activations on the 8-bit mma: swap-AB tiles");

  using Acc = float[kMTiles][kAccN][4];
  // Activation scales per group (Q::kActGroup, swap-AB tiles): this lane's rows of each n8 tile of rows,
  // 8 tt + 2 (lane % 4) + 0, 1 of the warp tile (load_row_scales).
  using RowScales = float[Q::kActGroup > 0 ? kTokTiles : 1][2];

  // Swapped accumulators acc[0][i][j] (i = tt * kMt + mt): row (of A and C) 8 tt + 2 (lane % 4) + j % 2
  // of the warp tile, channel (2 mt + j / 2) * 8 + lane / 4 of the warp's WN.
  __device__ __forceinline__ static int swapped_row(int i, int j, int lane) { return (i / kMt) * 8 + 2 * (lane & 3) + (j & 1); }
  __device__ __forceinline__ static int swapped_col(int i, int j, int lane) { return (2 * (i % kMt) + (j >> 1)) * 8 + (lane >> 2); }
  // Plain (not swapped) accumulators acc[mt][nt][2 h + 0..1]: row mt * 16 + lane / 4 + 8 h of the warp
  // tile, channels nt * 8 + 2 (lane % 4) + 0..1 of the warp's 64.
  __device__ __forceinline__ static int plain_row(int mt, int h, int lane) { return mt * 16 + (lane >> 2) + h * 8; }
  __device__ __forceinline__ static int plain_col(int nt, int lane) { return nt * 8 + 2 * (lane & 3); }

  // Index (in elements) of this lane's 8 channels in scale (or zero-point) row r of a stage.
  __device__ __forceinline__ static int scale_index(int r, int unit_n, int lane) {
    return r * Tl::BN + unit_n * 64 + (lane >> 2) * 8;
  }

  // A barrier of the kThreads compute threads (all threads when there is no producer warpgroup).
  __device__ __forceinline__ static void sync_compute() {
    if constexpr (kProducer) {
      asm volatile("bar.sync 1, %0;\n" ::"n"(kThreads) : "memory");
    } else {
      __syncthreads();
    }
  }

  __device__ __forceinline__ static void zero_acc(Acc& acc) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < kAccN; ++nt)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[mt][nt][j] = 0.0f;
  }
};

// Where one warp of the CTA works in an output tile.
struct WarpPlace {
  int lane, warp, wn, wm, kw;
  bool producer;  // a thread of the producer warpgroup
  int n0, m0;     // the output tile's first channel and row (or slot: rows.m0)
  TileRows rows;  // the tile's rows (rows.cuh)
  int unit_n;     // this warp's 64-channel unit in the tile
  int unit_part;  // and its half (warp N = 32) or quarter (16) of it
  bool n_valid;   // its channels start below N
};

// K::RowScales of this lane from row_scale(tile row); nothing without activation groups.
template <class K, class RowScale>
__device__ __forceinline__ void load_row_scales(typename K::RowScales& rs, const WarpPlace& w, RowScale&& row_scale) {
  if constexpr (K::Q::kActGroup > 0) {
#pragma unroll
    for (int tt = 0; tt < K::kTokTiles; ++tt) {
      rs[tt][0] = row_scale(w.wm * K::Tl::WM + 8 * tt + 2 * (w.lane & 3));
      rs[tt][1] = row_scale(w.wm * K::Tl::WM + 8 * tt + 2 * (w.lane & 3) + 1);
    }
  }
}

}  // namespace humming
