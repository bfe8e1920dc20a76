// humming: the weight-only quantized GEMM kernel, C[M, N] = A[M, K] * dequant(B)[N, K]^T.
//
// One CTA computes a BM x BN tile of C. Warps are arranged (K, M, N) = (BK/64, BM/WM, BN/64); each warp
// owns a WM x 64 tile of C and one 64-deep slice of every BK step. Per BK step a STAGES-deep cp.async
// pipeline brings the A tile, the packed B units and the scale/zero-point rows into shared memory.
// Per k16 slab a warp loads its B fragments with one shared load per bit-plane, dequantizes them in
// registers (magic-number trick, zero point, group scale), loads A with ldmatrix.x4 and issues
// mma.sync m16n8k16 with f32 accumulation. Warps along K are reduced through shared memory; the
// epilogue applies the channel scale, bias and fused activation in f32 and writes C rows < M only.
//
// wgmma tiles (Hopper, Tl::kWgmma): warps (K, N) = (BK/64, BN/WN), BN/WN = 4 or 8; each group of four
// warps along N is one warpgroup over 4 x WN channels and all BM rows (two warpgroups along N share the
// A tile). Per k16 slab each warp dequantizes its WN channels
// (a whole 64-channel unit, or a half or quarter of it: two or four warps share a unit) into WN/16 A fragments exactly
// as the swap-AB mma.sync path does, and the warpgroup issues WN/16 wgmma.m64nBMk16 (one per 16-channel
// slice mt: rows 16w..16w+15 of wgmma mt come from warp w) with the A tile in shared memory as the B
// operand (128-byte swizzle). The design follows Humming's Hopper path (weights as the register
// operand, "swap AB"). The wgmmas are committed in groups of kGroupSlabs = 2 slabs; one group runs while
// the warps dequantize the next. On sm_90a (kTma) every copy of a stage, the A tile included (a TMA
// box per 64 of K, through GemmParams::a_map), is issued by one thread and completes the stage's
// "full" mbarrier; the main loop has no CTA barrier: every compute thread releases a stage on its
// "empty" mbarrier once its warp's wgmma group that last read it is done, and the stage is refilled
// once every compute thread has released it. Tiles with a producer warpgroup (Tl::kProducer, warp
// specialisation as in Humming's and CUTLASS's Hopper kernels) leave that to the first thread of a
// 128-thread warpgroup after the compute warps, which hands its registers to them (setmaxnreg: e.g.
// 384 threads launched at 168 registers, the compute warps at 240) and leaves once the last stage is
// issued; after the main loop the compute threads meet at named barrier 1 (and, with a cluster, at
// the cluster barrier, which the leaving warpgroup does not hold up: gpu_cluster_split_k). H200,
// W4A16 g128 (eleventh session): 8192 x 8192 M = 32 / 128 / 256 22.2 / 37.5 / 66.7 -> 19.0 / 29.9 /
// 51.8 us. Tiles declared for two or more CTAs per SM, or of more than 8 compute warps (whose
// registers the warpgroup would cut), let thread 0 refill a stage (STAGES - 1 ahead) once it is
// released, in its warp's main loop. Elsewhere (cp.async, a compiled-only fallback: wgmma needs
// sm_90a) the loader refills a stage two iterations after it was read (STAGES - 2 ahead).
// The accumulators land in the swap-AB layout, so the reduction, split-K and epilogue are shared.
//
// Split-K (gridDim.z = splits > 1, for grids too small to fill the GPU): split s walks its own range
// of BK steps and stores its f32 partial tile in the workspace; the last split to finish a tile (an
// atomic ticket per tile) sums the partials in split order 0, 1, ... (deterministic, independent of
// arrival order), runs the epilogue and resets the tile's ticket to zero for the next launch.
// Atomic split-K (kFlagAtomicC, the default unless Gemm::set_deterministic(true); staged wgmma tiles
// and the 8-row mma.sync tile, f16 C, no bias or epilogue): each split adds its outputs into C with
// 16-byte f16 atomics once the tile's C is zeroed (staged_epilogue<true>); not deterministic.
// Stream-K (kFlagStreamK, swap-AB mma.sync tiles, opt-in: Gemm::set_stream_k; Osama et al., "Stream-K:
// Work-centric Parallel Decomposition for Dense Matrix Multiplication", PPoPP 2023): a 1-D grid of G
// CTAs takes equal ranges of the launch's tiles x BK steps, so that every SM streams the same number
// of weights when the tiles do not divide into whole waves; the CTAs meeting in a tile are its K
// splits, reduced by the same ticket tail (the stage ring and its mbarrier phases go on across a
// CTA's segments). Every launch of those tiles runs through the same loop over work segments (one
// segment without stream-K). H200, W4A16 g128 (thirteenth session): stream-K itself lost (28672 x
// 4096, M = 1, 264 CTAs: 20.4 us against 18.0; a CTA's pipeline drains between its pieces), but ptxas
// compiles the main loop inside the segment loop with the per-lane shared-memory offsets kept in
// registers (8-row tile: 308 -> 283 instructions per stage, 104 -> 128 registers; the 16-row two-CTA
// tile loses its 16-byte spill). Same call, before -> after: M = 1, 28672 x 4096 18.71 -> 18.03,
// 8192 x 8192 12.33 -> 11.79, 4096 x 14336 11.61 -> 11.40, 4096 x 4096 5.84 -> 5.97 us; M = 16,
// 28672 x 4096 25.41 -> 23.10 us. (A first version re-initialised the mbarriers between segments
// instead, with 126 registers and M = 1 at 17.50 / 11.59 / 11.02 / 5.29 us, but compute-sanitizer
// racecheck reported write-write hazards between the bulk copies of consecutive stream-K segments.)
#pragma once
#include "common.cuh"
#include "dequant.cuh"
#include "epilogue.cuh"
#include "loader.cuh"
#include "mma.cuh"
#include "wgmma.cuh"

// k16 slabs per wgmma commit group (1, 2 or 4); 2 measured fastest on the H200 (PERFORMANCE.md, v17).
#ifndef HUMMING_WGMMA_GROUP_SLABS
#define HUMMING_WGMMA_GROUP_SLABS 2
#endif

namespace humming {

// The largest power of two n <= cap with n * each <= budget (1 when not even two fit).
__host__ __device__ constexpr int pow2_fit(int each, int budget, int cap, int n = 1) {
  return n * 2 <= cap && n * 2 * each <= budget ? pow2_fit(each, budget, cap, n * 2) : n;
}

template <class Q, class Tl>
struct Gemm {
  using T = typename Q::T;
  using L = StageLayout<Q, Tl>;
  static constexpr int kWarpsN = Tl::BN / Tl::WN;  // warps along N (units along N: L::kWarpsN)
  // wgmma tiles with warp N = 32 / 16: two / four warps share a 64-channel unit, each taking one half
  // (32 channels) / quarter (16 channels).
  static constexpr int kHalves = 64 / Tl::WN;
  static constexpr int kWarpsK = L::kWarpsK;
  static constexpr int kWarpsM = Tl::BM / Tl::WM;
  static constexpr int kThreads = kWarpsM * kWarpsN * kWarpsK * 32;  // compute threads
  // Tl::kProducer: a producer warpgroup after the kThreads compute threads (threads kThreads.. +127);
  // the CTA is launched with kLaunchThreads. It leaves once the last stage is issued, so that after
  // the main loop only the compute threads meet, at named barrier 1 (sync_compute).
  static constexpr bool kProducer = Tl::kProducer;
  static constexpr int kLaunchThreads = kThreads + (kProducer ? 128 : 0);
  // Warp tiles of 8 or 16 rows use the weights as the mma's A operand (16 channels x 16 k) and the rows
  // of A as its B operand (one n8 tile per 8 rows), "swap AB": at M <= 8 this halves the mma count (one
  // n8 tile instead of an m16 tile that is mostly padding), and each thread's accumulators hold only its
  // own 8 channels, so group scales go on the f32 accumulators once per group and stage (16 fma per n8
  // tile and thread) instead of on every dequantized weight pair (64 f16x2 multiplies per thread and
  // stage).
  static constexpr bool kWgmma = Tl::kWgmma;
  static constexpr bool kSwapAB = Tl::WM <= 16 || kWgmma;
  static constexpr int kTokTiles = Tl::WM / 8;  // n8 tiles of A rows per warp when swapped
  static constexpr int kMTiles = kSwapAB ? 1 : Tl::WM / 16;
  static constexpr int kMt = Tl::WN / 16;  // swapped: m16 channel tiles per warp (4; 2 / 1 with halves / quarters)
  // Accumulator tiles per m16 row block; swapped: kMt m16 channel tiles per n8 tile of rows.
  static constexpr int kAccN = kSwapAB ? kMt * kTokTiles : 8;
  static constexpr bool kScaleOnAcc =
      kSwapAB && !kWgmma && Q::kScaleOnB && Q::kGroup >= 64 && Q::kZp != ZeroPointKind::kFloatOffset;
  // Offset folding (dequant.cuh, OffsetFold): half of the 4-bit pairs (all 8-bit ones) skip their
  // subtraction; one extra mma per slab and n8 tile of rows supplies the missing term.
  static constexpr bool kFold = kScaleOnAcc && OffsetFold<Q>::kOk;

  // Swapped accumulators acc[0][i][j] (i = tt * kMt + mt): row (of A and C) 8 tt + 2 (lane % 4) + j % 2
  // of the warp tile, channel (2 mt + j / 2) * 8 + lane / 4 of the warp's WN.
  __device__ __forceinline__ static int swapped_row(int i, int j, int lane) { return (i / kMt) * 8 + 2 * (lane & 3) + (j & 1); }
  __device__ __forceinline__ static int swapped_col(int i, int j, int lane) { return (2 * (i % kMt) + (j >> 1)) * 8 + (lane >> 2); }
  // Plain (not swapped) accumulators acc[mt][nt][2 h + 0..1]: row mt * 16 + lane / 4 + 8 h of the warp
  // tile, channels nt * 8 + 2 (lane % 4) + 0..1 of the warp's 64.
  __device__ __forceinline__ static int plain_row(int mt, int h, int lane) { return mt * 16 + (lane >> 2) + h * 8; }
  __device__ __forceinline__ static int plain_col(int nt, int lane) { return nt * 8 + 2 * (lane & 3); }
  // Stages loaded ahead of the one being read: STAGES - 1, or STAGES - 2 for wgmma (see above).
  // kTma (wgmma on sm_90a): STAGES - 1, a stage is refilled once every thread has released it (below);
  // with a producer warpgroup all STAGES (produce).
  static constexpr bool kTma = StageLoader<Q, Tl, kThreads>::kTma;
  static constexpr int kAhead = kWgmma && !kTma ? Tl::STAGES - 2 : Tl::STAGES - 1;
  // k16 slabs per wgmma commit group (1, 2 or 4): one group runs while the warps dequantize the next.
  static constexpr int kGroupSlabs = HUMMING_WGMMA_GROUP_SLABS;
  static_assert(kGroupSlabs == 1 || kGroupSlabs == 2 || kGroupSlabs == 4, "1, 2 or 4 slabs per wgmma group");
  static constexpr int kPipelineBytes = Tl::STAGES * L::kStageBytes;
  static constexpr int kReduceBytes = (kWarpsK - 1) * Tl::BM * Tl::BN * 4;
  // wgmma: room to start the stages on a L::kStageAlign (1024-byte) boundary.
  static constexpr int kAlignSlack = kWgmma ? L::kStageAlign : 0;
  static constexpr int kSmemBytes = (kPipelineBytes > kReduceBytes ? kPipelineBytes : kReduceBytes) + kAlignSlack;
  // Staged epilogue (wgmma tiles whose f32 tile fits the dynamic shared memory): the accumulators go
  // to shared memory as a [BM][BN + 4] f32 tile (+4 floats per row: the fragment stores hit 32 distinct
  // banks), then every thread writes 8 channels of a row of C at once (one 16-byte store when C allows).
  // With kFlagClusterSplitK the K splits of a tile are one cluster and each CTA sums 1 / splits of the
  // rows over the splits' shared tiles (distributed shared memory), in split order.
  static constexpr int kStageLd = Tl::BN + 4;
  static constexpr int kMaxClusterSplits = 8;  // portable cluster size
  static constexpr bool kTileFits = Tl::BM * kStageLd * 4 <= kSmemBytes;  // the f32 tile (codegen::f32_tile_fits)
  static constexpr bool kStaged = kWgmma && kTileFits;
  static_assert(kLaunchThreads <= 1024, "too many threads per CTA");

  // Split-K partials: the kAccThreads threads of K-warp 0 hold the tile's accumulators, kQuads float4s
  // each; a split's partial tile is stored fragment-major (float4 q of thread t at q * kAccThreads + t).
  static constexpr int kAccThreads = kWarpsM * kWarpsN * 32;
  static constexpr int kQuads = kMTiles * kAccN;
  // Bulk split-K tail (wgmma tiles on sm_90a, kTma): the last split's CTA pulls the partials through
  // shared memory, in chunks of kTailQuads float4s per thread (contiguous kTailBytes of the workspace),
  // each one cp.async.bulk (the TMA unit) into a ring of kTailRing slots with one mbarrier per slot (the
  // barriers after the ring). Up to 64 KiB (128 KiB for the largest rings) are in flight at once, where
  // the threads' own 16-byte loads keep up to 8 per thread (16 KiB per 128 threads) in flight: 16
  // batches for 4 splits of a 64 KiB tile. H200, same-session sweep: 0.3-2.4 us faster on launches with
  // split-K at M = 32-256 (8192 x 8192, M = 64: 29.3 -> 27.5 us). Only where the ring holds at least
  // what the register path keeps in flight (tiles with an odd number of 8-row blocks get small
  // chunks). The small partials of mma.sync tiles (4-8 KiB) keep the register path: with the bulk
  // tail, M = 1 was 0.3-0.7 us slower.
  static constexpr int kTailQuads = kQuads % 8 == 0 ? 8 : kQuads % 4 == 0 ? 4 : kQuads % 2 == 0 ? 2 : 1;
  static constexpr int kTailBytes = kTailQuads * kAccThreads * 16;
  static constexpr int kTailChunks = kQuads / kTailQuads;  // chunks per split
  static constexpr int kTailRing = pow2_fit(kTailBytes + 8, kSmemBytes, 16);  // slot + its mbarrier
  // The register path's batch: up to 8 float4 loads in flight per thread (32 registers beside the
  // accumulators), kRegTailBytes per CTA.
  static constexpr int kRegTailBatch = kQuads < 8 ? kQuads : 8;
  static constexpr int kRegTailBytes = kRegTailBatch * kAccThreads * 16;
  static constexpr bool kBulkTail = kTma && kTailRing >= 2 && kTailRing * kTailBytes >= kRegTailBytes;
  // kFlagAtomicC (common.cuh) is honoured, with f16 C, no bias and no epilogue (C is then linear in
  // each split's partial), by the staged wgmma tiles and the 8-row mma.sync tile (kAtomic8: its f32
  // tile, 8 rows x (BN + 4) floats, goes through the staged epilogue too, after the K-warp sum): the
  // staged epilogue adds the tile with 16-byte vector atomics. The runtime sets the flag for the
  // 8-row tile only where its launch has more CTAs than SMs (codegen::atomic_split_k). Not the 16-row
  // tiles: atomics from their registers made ptxas spill in the main loop.
  static constexpr bool kAtomic8 = kSwapAB && !kWgmma && Tl::BM == 8 && kTileFits;
  static constexpr bool kAtomicC =
      (kStaged || kAtomic8) && !T::kIsBf16 && !Q::kBias && Q::kEpilogue == EpilogueKind::kNone;

  // The shared-memory inputs of one k16 slab for one warp: its packed words, and the scales and zero
  // points of its lane's 8 channels (group rows of the stage, or the per-channel values). `same_row`:
  // the slab lies in the group row already in `in` (groups of 64 or more, not the warp's first slab),
  // whose scales and zero points are kept instead of loaded again.
  // Index (in elements) of this lane's 8 channels in scale (or zero-point) row r of a stage.
  __device__ __forceinline__ static int scale_index(int r, int unit_n, int lane) {
    return r * Tl::BN + unit_n * 64 + (lane >> 2) * 8;
  }
  // Swap AB (mma.sync): the B operands of slab kk, a[2 t] / a[2 t + 1] = k 0..7 / 8..15 of rows
  // 8t..8t+7 of the warp tile (lanes 8i..8i+7 address matrix i), so each mma's B operand is a pair.
  __device__ __forceinline__ static void load_a_swapped(u32 (&a)[2 * kTokTiles], u32 a_tile, int kk, int wm, int lane) {
    const int row = wm * Tl::WM + ((lane >> 4) << 3) * (kTokTiles - 1) + (lane & 7);
    const int chunk = kk * 2 + ((lane >> 3) & 1);
    if constexpr (kTokTiles == 1) {
      ldmatrix_x2(*reinterpret_cast<u32(*)[2]>(a), a_tile + a_swizzle(row, chunk));
    } else {
      ldmatrix_x4(*reinterpret_cast<u32(*)[4]>(a), a_tile + a_swizzle(row, chunk));
    }
  }
  struct SlabIn {
    u32 w[Q::kBits];
    u32 sw[4];
    u32 zw[4];
  };
  __device__ __forceinline__ static void load_slab(SlabIn& in, u32 st, u32 unit, int kk, int kw, int unit_n, int lane,
                                                   const u32 (&ch_s)[4], const u32 (&ch_z)[4], bool same_row) {
    load_slab_words<Q::kBits>(unit, kk, lane, in.w);
    if (Q::kGroup >= 64 && same_row) return;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      in.sw[i] = 0;
      in.zw[i] = 0;
    }
    if constexpr (Q::kGroup > 0) {
      const int idx = scale_index(Q::kGroup < Tl::BK ? (kw * 64 + kk * 16) / Q::kGroup : 0, unit_n, lane);
      if constexpr (!kScaleOnAcc) {
        const uint4 v = lds128(st + L::kSOffset + 2 * idx);
        in.sw[0] = v.x; in.sw[1] = v.y; in.sw[2] = v.z; in.sw[3] = v.w;
      }
      if constexpr (Q::kZp != ZeroPointKind::kNone) {
        const uint4 z = lds128(st + L::kZOffset + 2 * idx);
        in.zw[0] = z.x; in.zw[1] = z.y; in.zw[2] = z.z; in.zw[3] = z.w;
      }
    } else {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        in.sw[i] = ch_s[i];
        in.zw[i] = ch_z[i];
      }
    }
  }

  // A barrier of the kThreads compute threads (all threads when there is no producer warpgroup).
  __device__ __forceinline__ static void sync_compute() {
    if constexpr (kProducer) {
      asm volatile("bar.sync 1, %0;\n" ::"n"(kThreads) : "memory");
    } else {
      __syncthreads();
    }
  }

  // kTma, by the one thread that issues the copies: the first kStages stages' weights before
  // griddepcontrol.wait (programmatic dependent launch, common.cuh), their A tiles after it.
  template <int kStages, class Loader>
  __device__ __forceinline__ static void fill_ring(Loader& loader, const GemmParams& p, u32 sbase, u32 bars, int iters,
                                                   int m0) {
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      if (s < iters) loader.load_weights_one(sbase + s * L::kStageBytes, bars + 8 * s, p);
    }
    grid_dependency_wait();
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      if (s < iters) loader.load_a_tma(sbase + s * L::kStageBytes, bars + 8 * s, p, m0);
    }
  }

  // Tl::kProducer (sm_90a): the producer warpgroup's first thread fills the whole ring, then refills
  // stage s with step it as soon as every compute thread has released the stage's previous use, step
  // it - STAGES (its release completes phase it / STAGES - 1 of the stage's "empty" mbarrier). The
  // compute warps never issue a copy or wait for a release.
  template <class Loader>
  __device__ __forceinline__ static void produce(Loader& loader, const GemmParams& p, u32 sbase, u32 bars, u32 empties,
                                                 int iters, int m0) {
    fill_ring<Tl::STAGES>(loader, p, sbase, bars, iters, m0);
    int stage = 0;
    u32 parity = 0;
    for (int it = Tl::STAGES; it < iters; ++it) {
      mbar_wait(empties + 8 * stage, parity);
      loader.load_weights_one(sbase + stage * L::kStageBytes, bars + 8 * stage, p);
      loader.load_a_tma(sbase + stage * L::kStageBytes, bars + 8 * stage, p, m0);
      if (++stage == Tl::STAGES) {
        stage = 0;
        parity ^= 1u;
      }
    }
  }

  __device__ __forceinline__ static void zero_acc(float (&acc)[kMTiles][kAccN][4]) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < kAccN; ++nt)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[mt][nt][j] = 0.0f;
  }

  // kBulkTail: the last split's CTA sums every split's partial tile (split 0 at `ws0`, the next
  // `split_stride` floats further) into `acc` in split order, 0 + p_0 + p_1 + ..., the sums of the
  // register path bit for bit. Chunk j (split j / kTailChunks, part j % kTailChunks) goes to ring slot
  // j % kTailRing; thread 0 issues the first kTailRing chunks, then refills a slot once every thread has
  // read it. Every thread of the CTA takes part (CTA barriers); `holds`: this thread's accumulators are
  // part of the tile (K-warp 0, channels below N).
  __device__ __forceinline__ static void bulk_tail(float (&acc)[kMTiles][kAccN][4], const float* ws0, long long split_stride,
                                                   int splits, bool holds) {
    extern __shared__ __align__(128) char smem[];
    const u32 ring = smem_addr(smem);
    const u32 bars = ring + kTailRing * kTailBytes;
    const int total = splits * kTailChunks;
    const auto issue = [&](int j) {
      const u32 bar = bars + 8 * (j % kTailRing);
      const float* src = ws0 + (j / kTailChunks) * split_stride + (j % kTailChunks) * (kTailBytes / 4);
      mbar_arrive_expect_tx(bar, kTailBytes);
      bulk_copy_g2s(ring + (j % kTailRing) * kTailBytes, src, kTailBytes, bar);
    };
    // The bulk copies (async proxy) overwrite shared memory this CTA last accessed through the generic
    // proxy (the stages' shared loads, the K-warp reduction's stores): each thread orders its own
    // accesses first.
    fence_proxy_async_shared();
    sync_compute();  // the pipeline's shared memory is free (the K-warp reduction's reads included)
    if (threadIdx.x == 0) {
#pragma unroll
      for (int r = 0; r < kTailRing; ++r) mbar_init(bars + 8 * r, 1);
      mbar_fence_init();
      fence_proxy_async_global();  // the partials the ticket acquired, before the bulk copies read them
      for (int j = 0; j < kTailRing && j < total; ++j) issue(j);
    }
    zero_acc(acc);
    sync_compute();  // the barriers are initialised before anyone waits on them
    const u32 mine = ring + threadIdx.x * 16;
    for (int s = 0; s < splits; ++s) {
#pragma unroll
      for (int c = 0; c < kTailChunks; ++c) {
        const int j = s * kTailChunks + c;
        const u32 slot = static_cast<u32>(j % kTailRing);
        mbar_wait(bars + 8 * slot, static_cast<u32>(j / kTailRing) & 1u);
        if (holds) {
#pragma unroll
          for (int q = 0; q < kTailQuads; ++q) {
            const uint4 v = lds128(mine + slot * kTailBytes + q * (kAccThreads * 16));
            float(&a)[4] = acc[(c * kTailQuads + q) / kAccN][(c * kTailQuads + q) % kAccN];
            a[0] += __uint_as_float(v.x); a[1] += __uint_as_float(v.y);
            a[2] += __uint_as_float(v.z); a[3] += __uint_as_float(v.w);
          }
        }
        sync_compute();  // slot read by every thread: it may be refilled
        if (threadIdx.x == 0 && j + kTailRing < total) issue(j + kTailRing);
      }
    }
    // Every phase is complete: the barriers' memory may be reused (the staged epilogue, after its
    // own CTA barrier) once they are invalidated.
    if (threadIdx.x == 0) {
#pragma unroll
      for (int r = 0; r < kTailRing; ++r) mbar_inval(bars + 8 * r);
    }
  }

  // kFlagAtomicC: each output tile's lock word goes 0 (before the launch) -> 1 (a CTA claimed the
  // zeroing of the tile's C) -> 2 (zeroed, released); then every split, once it has added its outputs,
  // adds its share of -2 without waiting for a result (split 0 -(splits + 1), the others 1, modulo 2^32:
  // the word reads 2 or more, as an unsigned number, until the last share brings it back to 0 for the
  // next launch). So no CTA waits at its end for an atomic's answer (a red, not an atom; on the H200
  // that and the early read of the word below took 0.5-1.0 us off the launches with atomics, 0.89-0.99x
  // their time; 4096 x 4096 at M = 32, the (32, 128, 128) tile, 1.02x). Split 0 claims the
  // zeroing at its start (its compute threads, zero_c_tile_cta; long before any split ends); a split
  // that ends and finds the word still 0 claims it itself, so that no CTA waits for a CTA that may not
  // be resident yet (a CTA waits only while a resident one zeroes).

  // The rows < M and channels < N of this launch's tile in C, zeroed by the compute threads in chunks of
  // 8 channels as the staged epilogue writes them (16-byte stores where C allows, else 4-byte ones: N
  // is a multiple of 64, C 4-byte aligned with an even ldc).
  __device__ __forceinline__ static void zero_c_tile_cta(const GemmParams& p, int m0, int n0) {
    constexpr int kChunks = Tl::BN / 8;
    const int rows = min(Tl::BM, p.m - m0);
    const bool vec16 = (p.ldc % 8) == 0 && (reinterpret_cast<unsigned long long>(p.c) & 15) == 0;
    u32* c = static_cast<u32*>(p.c);
    for (int it = threadIdx.x; it < rows * kChunks; it += kThreads) {
      const int r = it / kChunks, col = (it % kChunks) * 8;
      if (n0 + col >= p.n) continue;
      const long long at = (static_cast<long long>(m0 + r) * p.ldc + n0 + col) >> 1;
      if (vec16) {
        *reinterpret_cast<uint4*>(c + at) = make_uint4(0u, 0u, 0u, 0u);
      } else {
#pragma unroll
        for (int q = 0; q < 4; ++q) c[at + q] = 0u;
      }
    }
  }

  // A CTA that claimed the zeroing of its tile's C (lock word 1): the compute threads zero it, then
  // thread `leader` releases it (word 2).
  __device__ __forceinline__ static void zero_c_tile_and_release_cta(const GemmParams& p, int tile, int m0, int n0,
                                                                     int leader = 0) {
    zero_c_tile_cta(p, m0, n0);
    sync_compute();
    if (threadIdx.x == leader) st_release_gpu(p.locks + tile, 2);
  }

  // Split 0's claim at its start: the compute threads zero the tile if nobody has, then the first
  // lane of the last compute warp releases it. (Two barriers of the compute threads while the first
  // stages load.) Records whether this CTA zeroed it (its tail then need not wait).
  // The answer stays in shared memory (s_zeroed_here) rather than in a register across the main loop.
  // The claim is a relaxed CAS: nothing before it needs ordering (the previous kernel's accesses to C
  // are complete and visible after griddepcontrol.wait, and no split reads or adds to C before it
  // acquires word 2, which the release publishes with the zeroing), so it skips the acquire-release
  // CAS's MEMBAR.GPU, which waited for the loads this thread had just issued. It and the release
  // come from a warp that issues no bulk copy of the stage ring (the loader's issuing lanes are those
  // of the first warps). H200, twenty-first session: per-CTA %globaltimer stamps of the 8-row tile at
  // M = 1 showed split 0's CTAs ending their main loops ~2 us after split 1's, the claim's CAS and
  // first barrier taking 1.47 us (median) and the zeroing and release 1.25; with this claim 0.38 and
  // 0.42 (perf/2026-12-01u_h200_timeline-v34.txt). Same-call A/B (three rounds): 8192 x 8192 M = 1
  // 11.29 -> 10.82 us, 4096 x 14336 10.16 -> 9.77, 4096 x 4096 M = 32 (wgmma, 4 atomic splits)
  // 8.86 -> 6.56; M = 128 0.96-0.98x.
  __device__ __forceinline__ static int& s_zeroed_here() {
    __shared__ int s;
    return s;
  }
  __device__ __forceinline__ static void claim_zero_c_cta(const GemmParams& p, int tile, int m0, int n0) {
    constexpr int kLeader = kThreads - 32;
    if (threadIdx.x == kLeader) s_zeroed_here() = atomic_cas_relaxed_gpu(p.locks + tile, 0, 1) == 0;
    sync_compute();
    if (s_zeroed_here() != 0) zero_c_tile_and_release_cta(p, tile, m0, n0, kLeader);
  }

  // The wait, at a tail, until the tile's C is zeroed (claiming the zeroing if nobody has: the compute
  // threads zero it and thread 0 releases it). `seen`: thread 0's read of the lock word, issued right
  // after the main loop (segment) with ld_split_acquire_gpu; completed here where it shows C zeroed (the
  // loads of the wait loop are acquires themselves, and a CTA that claims the zeroing needs none).
  __device__ __forceinline__ static void await_zeroed_c_cta(const GemmParams& p, int tile, int m0, int n0, int seen) {
    __shared__ int s_zero;  // 1: this CTA zeroes the tile; 2: it is zeroed
    if (threadIdx.x == 0) {
      u32 v = static_cast<u32>(seen);  // (0 free, 1 claimed, 2 or more zeroed: unsigned)
      if (v >= 2) split_acquire_complete_gpu();  // (`seen`: ld_split_acquire_gpu)
      while (v < 2) {
        if (v == 0 && atomic_cas_acq_rel_gpu(p.locks + tile, 0, 1) == 0) break;
        if (v == 1) __nanosleep(64);
        v = static_cast<u32>(ld_acquire_gpu(p.locks + tile));
      }
      s_zero = v < 2 ? 1 : 2;
    }
    sync_compute();
    if (s_zero == 1) zero_c_tile_and_release_cta(p, tile, m0, n0);
  }

  // The split-K tail of the swap-AB mma.sync tiles, in the last split's CTA: every thread (not only the
  // kAccThreads that hold accumulators) takes positions pos = threadIdx.x, + kThreads, ... of the
  // partial tiles (float4 q of accumulating thread t at pos = q * kAccThreads + t), loads that float4
  // of up to kWideBatch splits at once (one L2 round trip per batch; the accumulating threads alone
  // keep one split's kQuads float4s in flight), sums them in split order (0 + p_0 + p_1 + ..., the sums
  // of the register path bit for bit) and writes the position's four values of C.
  static constexpr int kWideBatch = 8;
  __device__ __forceinline__ static void wide_tail(const GemmParams& p, const float* ws_tile, long long split_stride,
                                                   int splits, int m0, int n0) {
    constexpr int kPositions = kQuads * kAccThreads;
    constexpr int kPer = (kPositions + kThreads - 1) / kThreads;
    u16* c16 = static_cast<u16*>(p.c);
    const long long stride4 = split_stride / 4;
#pragma unroll 1
    for (int r = 0; r < kPer; ++r) {
      const int pos = static_cast<int>(threadIdx.x) + r * kThreads;
      const int t = pos % kAccThreads, q = pos / kAccThreads;
      const int lane = t & 31, w = t >> 5;
      const int wn = w % kWarpsN, wm = w / kWarpsN;
      if ((kPositions % kThreads != 0 && pos >= kPositions) || n0 + wn * Tl::WN >= p.n) continue;
      const float4* src = reinterpret_cast<const float4*>(ws_tile) + pos;
      float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      for (int b = 0; b < splits; b += kWideBatch) {
        float4 v[kWideBatch];
#pragma unroll
        for (int i = 0; i < kWideBatch; ++i) {
          // Unconditional (past the last split: the last split's float4 again), so that every load of
          // the batch is issued before the first sum waits.
          v[i] = __ldcg(src + min(b + i, splits - 1) * stride4);
        }
#pragma unroll
        for (int i = 0; i < kWideBatch; ++i) {
          if (b + i < splits) {
            sum[0] += v[i].x; sum[1] += v[i].y; sum[2] += v[i].z; sum[3] += v[i].w;
          }
        }
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int row = m0 + wm * Tl::WM + swapped_row(q, j, lane);
        const int col = n0 + wn * Tl::WN + swapped_col(q, j, lane);
        if (row < p.m) c16[static_cast<long long>(row) * p.ldc + col] = finish_one<Q>(sum[j], p, col);
      }
    }
  }

  // The staged epilogue (kStaged): `holds` = this thread's accumulators are part of the tile (kw == 0,
  // channels below N); `rank` of `ranks` CTAs (a cluster when ranks > 1, rank = its split) writes rows
  // rank, rank + ranks, ... of the tile, each summed over the ranks' shared tiles in rank (split) order.
  // kRed (kFlagAtomicC, split `split` of the `splits` of output tile `tile`): the outputs are added to C
  // with f16 atomics once the tile's C is zeroed: by this CTA (`zeroed_here`), else awaited
  // (await_zeroed_c_cta, from thread 0's early read `seen` of the lock word); then the split adds its
  // share to the lock word.
  template <bool kRed = false>
  __device__ __forceinline__ static void staged_epilogue(const GemmParams& p, const float (&acc)[kMTiles][kAccN][4],
                                                         bool holds, int wm, int wn, int lane, int m0, int n0, int rank,
                                                         int ranks, int tile = 0, int split = 0, int splits = 1,
                                                         bool zeroed_here = false, int seen = 0) {
    extern __shared__ __align__(128) char smem[];
    sync_compute();  // the pipeline buffers (and the K-warp reduction's) are free
    if (holds) {
#pragma unroll
      for (int i = 0; i < kAccN; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          reinterpret_cast<float*>(smem)[(wm * Tl::WM + swapped_row(i, j, lane)) * kStageLd + wn * Tl::WN + swapped_col(i, j, lane)] = acc[0][i][j];
    }
    if (kRed && !zeroed_here) {
      await_zeroed_c_cta(p, tile, m0, n0, seen);  // (its barriers also order the shared tile's stores)
    } else if (ranks > 1) {
      cluster_sync();
    } else {
      sync_compute();
    }
    const int rows = min(Tl::BM, p.m - m0);
    constexpr int kChunks = Tl::BN / 8;  // 8 channels each
    const bool vec16 = (p.ldc % 8) == 0 && (reinterpret_cast<unsigned long long>(p.c) & 15) == 0;
    const u32 base = smem_addr(smem);
    u32* c = static_cast<u32*>(p.c);
    const int my_rows = rows > rank ? (rows - rank + ranks - 1) / ranks : 0;
    for (int it = threadIdx.x; it < my_rows * kChunks; it += kThreads) {
      const int r = rank + (it / kChunks) * ranks;
      const int col = (it % kChunks) * 8;
      if (n0 + col >= p.n) continue;  // N is a multiple of 64: a chunk is all in or all out
      const u32 at = base + 4 * (r * kStageLd + col);
      float v[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
      if (ranks == 1) {
        const uint4 lo = lds128(at), hi = lds128(at + 16);
        v[0] = __uint_as_float(lo.x); v[1] = __uint_as_float(lo.y); v[2] = __uint_as_float(lo.z); v[3] = __uint_as_float(lo.w);
        v[4] = __uint_as_float(hi.x); v[5] = __uint_as_float(hi.y); v[6] = __uint_as_float(hi.z); v[7] = __uint_as_float(hi.w);
      } else {
        // 0 + p_0 + p_1 + ... in split order (the sums of the global-workspace path, bit for bit).
        float4 part[2 * kMaxClusterSplits];
#pragma unroll
        for (int s = 0; s < kMaxClusterSplits; ++s) {
          if (s < ranks) {
            const u32 remote = map_rank(at, s);
            part[2 * s] = ld_cluster_f4(remote);
            part[2 * s + 1] = ld_cluster_f4(remote + 16);
          }
        }
#pragma unroll
        for (int s = 0; s < kMaxClusterSplits; ++s) {
          if (s < ranks) {
            const float4 lo = part[2 * s], hi = part[2 * s + 1];
            v[0] += lo.x; v[1] += lo.y; v[2] += lo.z; v[3] += lo.w;
            v[4] += hi.x; v[5] += hi.y; v[6] += hi.z; v[7] += hi.w;
          }
        }
      }
      u32 out[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) out[q] = finish_pair<Q>(v[2 * q], v[2 * q + 1], p, n0 + col + 2 * q);
      const long long at_c = (static_cast<long long>(m0 + r) * p.ldc + n0 + col) >> 1;
      if constexpr (kRed) {
        if (vec16) {
          red_add_f16x8(c + at_c, out[0], out[1], out[2], out[3]);
        } else {
#pragma unroll
          for (int q = 0; q < 4; ++q) red_add_f16x2(c + at_c + q, out[q]);
        }
      } else if (vec16) {
        *reinterpret_cast<uint4*>(c + at_c) = make_uint4(out[0], out[1], out[2], out[3]);
      } else {
#pragma unroll
        for (int q = 0; q < 4; ++q) c[at_c + q] = out[q];
      }
    }
    if constexpr (kRed) {
      // Done (nobody waits for it): this split's share of the -2 that brings the word back to 0.
      if (threadIdx.x == 0) red_add_u32(p.locks + tile, split == 0 ? 0u - static_cast<u32>(splits + 1) : 1u);
    } else if (ranks > 1) {
      cluster_sync();  // no CTA leaves while another may still read its shared tile
    }
  }

  // One piece of work of a CTA: BK steps [it_begin, it_end) of output tile `tile` (column tile tile_n,
  // row tile tile_m, of `tiles`), K split `split` of the `splits` that cover that tile. `ring`: the
  // BK steps the CTA walked in segments before this one (stream-K), so that its stage ring and the
  // stages' mbarrier phases go on where they stopped: step i of the segment uses stage
  // (ring + i) % STAGES, phase ((ring + i) / STAGES) % 2.
  struct Segment {
    int tile_n, tile_m, tile, tiles, it_begin, it_end, split, splits, ring;
  };

  __device__ __forceinline__ static void run(const GemmParams& p) {
    if (p.flags & kFlagEarlyTrigger) grid_launch_dependents();
    const int steps = (p.k + Tl::BK - 1) / Tl::BK;
    // wgmma tiles, and mma.sync tiles of warps over more than 16 rows (whose registers the segment
    // loop would spill: (32, 128, 128) 60 bytes), run their one segment straight.
    if constexpr (kWgmma || Tl::WM > 16) {
      const int split = blockIdx.z;
      segment(p, Segment{static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y),
                         static_cast<int>(blockIdx.y * gridDim.x + blockIdx.x), static_cast<int>(gridDim.x * gridDim.y),
                         static_cast<int>(static_cast<long long>(steps) * split / p.splits),
                         static_cast<int>(static_cast<long long>(steps) * (split + 1) / p.splits), split, p.splits, 0});
      return;
    }
    // Stream-K (swap-AB mma.sync tiles): the tiles x steps BK steps of the launch, tile-major, are cut into
    // gridDim.x = G equal ranges, one per CTA (CTA i: [i * total / G, (i + 1) * total / G)); a CTA walks
    // the pieces of tiles its range covers in order. The CTAs that share a tile are its K splits in K
    // order (split j = the j-th CTA whose range meets it), so the split-K tail sums them exactly as it
    // sums uniform splits. Step x lies in the range of CTA ((x + 1) * G - 1) / total. Needs G <= total
    // (every CTA at least one step; Gemm::stream_k_for clamps it): the loop runs its body once before
    // the test (an early exit for empty ranges changed ptxas's allocation of the main loop, 283 -> 290
    // instructions per stage of the 8-row tile). (The schedule is replayed on the host by the test
    // stream_k_schedule_covers_every_step_once.)
    const bool stream_k = (p.flags & kFlagStreamK) != 0;
    const int tiles_n = (p.n + Tl::BN - 1) / Tl::BN;
    const int tiles = stream_k ? tiles_n * ((p.m + Tl::BM - 1) / Tl::BM) : static_cast<int>(gridDim.x * gridDim.y);
    const long long total = static_cast<long long>(tiles) * steps;
    const long long g = gridDim.x;
    long long b = stream_k ? total * blockIdx.x / g : 0;
    const long long e = stream_k ? total * (blockIdx.x + 1) / g : 1;
    int ring = 0;
    do {
      Segment s;
      if (stream_k) {
        const int tile = static_cast<int>(b / steps);
        const long long t0 = static_cast<long long>(tile) * steps;
        const long long end = e < t0 + steps ? e : t0 + steps;
        const int first = static_cast<int>(((t0 + 1) * g - 1) / total);
        const int last = static_cast<int>(((t0 + steps) * g - 1) / total);
        s = Segment{tile % tiles_n, tile / tiles_n, tile, tiles, static_cast<int>(b - t0), static_cast<int>(end - t0),
                    static_cast<int>(blockIdx.x) - first, last - first + 1, ring};
        b = end;
      } else {
        const int split = blockIdx.z;
        s = Segment{static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y),
                    static_cast<int>(blockIdx.y * gridDim.x + blockIdx.x), tiles,
                    static_cast<int>(static_cast<long long>(steps) * split / p.splits),
                    static_cast<int>(static_cast<long long>(steps) * (split + 1) / p.splits), split, p.splits, 0};
        b = e;
      }
      segment(p, s);
      ring += s.it_end - s.it_begin;
    } while (b < e);
  }

  __device__ __forceinline__ static void segment(const GemmParams& p, const Segment& seg) {
    extern __shared__ __align__(128) char smem[];
    if (!kWgmma && seg.ring > 0) {
      // The previous segment's shared reads and writes (the K-warp sum's generic stores included)
      // before this one's copies into the same buffers. Its mbarriers go on with their phases.
      fence_proxy_async_shared();
      __syncthreads();
    }
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int wn = warp % kWarpsN;
    const int wm = (warp / kWarpsN) % kWarpsM;
    const int kw = warp / (kWarpsN * kWarpsM);
    const bool producer = kProducer && threadIdx.x >= kThreads;
    const int n0 = seg.tile_n * Tl::BN;
    const int m0 = seg.tile_m * Tl::BM;
    const int unit_n = wn / kHalves;     // this warp's 64-channel unit in the tile
    const int unit_part = wn % kHalves;  // and its half (warp N = 32) or quarter (16) of it
    const bool n_valid = n0 + wn * Tl::WN < p.n;

    float acc[kMTiles][kAccN][4];
    zero_acc(acc);

    // Per-channel values used on B (zero points, float offsets, and the scale with a float offset) are
    // loaded once, in the permuted order of dequant.cuh: this lane's 8 channels n = nt*8 + lane/4.
    u32 ch_s[4] = {0, 0, 0, 0}, ch_z[4] = {0, 0, 0, 0};
    if constexpr (Q::kGroup == 0) {
      if (n_valid) {
        const int off = n0 + unit_n * 64 + (lane >> 2) * 8;
        if constexpr (Q::kScaleOnB) {
          const uint4 v = *reinterpret_cast<const uint4*>(static_cast<const u16*>(p.scales) + off);
          ch_s[0] = v.x; ch_s[1] = v.y; ch_s[2] = v.z; ch_s[3] = v.w;
        }
        if constexpr (Q::kZp != ZeroPointKind::kNone) {
          const uint4 v = *reinterpret_cast<const uint4*>(static_cast<const u16*>(p.zeros) + off);
          ch_z[0] = v.x; ch_z[1] = v.y; ch_z[2] = v.z; ch_z[3] = v.w;
        }
      }
    }

    const int split = seg.split;
    const int it_begin = seg.it_begin;
    const int iters = seg.it_end - seg.it_begin;
    using Loader = StageLoader<Q, Tl, kThreads>;
    Loader loader(p, m0, n0, it_begin * Tl::BK);
    const u32 sbase = kWgmma ? (smem_addr(smem) + kAlignSlack - 1) & ~static_cast<u32>(kAlignSlack - 1) : smem_addr(smem);
    // Loader::kBulk (sm_90+): one mbarrier per stage, completed by the stage's kCopies bulk copies (and, with
    // kTma, the A tile's TMA boxes: kCopies + 1 arrivals); the n-th use of a stage completes its barrier's
    // phase n, waited on with parity n % 2 (`phase`).
    // kTma: a second ring, `empty_bars`: the n-th use of a stage is released when every thread has
    // arrived (its shared loads and its warp's wgmma reads of the stage are done), completing phase n.
    __shared__ __align__(8) u64 stage_bars[Loader::kBulk ? Tl::STAGES : 1];
    __shared__ __align__(8) u64 empty_bars[kTma ? Tl::STAGES : 1];
    // (+ s_last, and s_zero, s_zeroed_here of the atomic split-K.)
    static_assert(Tl::STAGES * 16 + 16 <= 128, "static shared memory beyond codegen::STATIC_SMEM_BYTES");
    const u32 bars = smem_addr(stage_bars);
    const u32 empties = smem_addr(empty_bars);
    if (Loader::kBulk && seg.ring == 0) {
      if (threadIdx.x == 0) {
#pragma unroll
        for (int s = 0; s < Tl::STAGES; ++s) {
          mbar_init(bars + 8 * s, Loader::kCopies + (kTma ? 1 : 0));
          if constexpr (kTma) mbar_init(empties + 8 * s, kThreads);
        }
        mbar_fence_init();
      }
      __syncthreads();
    }
    if constexpr (kProducer) {
      // The producer warpgroup gives its registers to the compute warps, its first thread walks the
      // stage ring (produce), then the warpgroup leaves. Without TMA (wgmma compiled for an arch
      // below sm_90, where it cannot run) the kernel traps.
      if constexpr (!kTma) __trap();
      if (producer) {
        setmaxnreg_dec<Tl::kProducerRegs>();
        if (threadIdx.x == kThreads) produce(loader, p, sbase, bars, empties, iters, m0);
        return;
      }
      setmaxnreg_inc<Tl::kConsumerRegs>();
      grid_dependency_wait();
    } else if constexpr (kTma) {
      // Thread 0 is the producer: the first kAhead stages (refilled in the main loop, below).
      if (threadIdx.x == 0) {
        fill_ring<kAhead>(loader, p, sbase, bars, iters, m0);
      } else {
        grid_dependency_wait();
      }
    } else if constexpr (Loader::kBulk) {
      // The first stages' weights are on their way before this kernel waits for the previous one
      // (programmatic dependent launch, common.cuh); A, C and the split-K workspace only after.
#pragma unroll
      for (int s = 0; s < kAhead; ++s) {
        const int r = (seg.ring + s) % Tl::STAGES;
        if (s < iters) loader.load_weights(sbase + r * L::kStageBytes, bars + 8 * r, p);
      }
      grid_dependency_wait();
#pragma unroll
      for (int s = 0; s < kAhead; ++s) {
        if (s < iters) loader.load_a(sbase + (seg.ring + s) % Tl::STAGES * L::kStageBytes, p);
        cp_async_commit();
      }
    } else {
#pragma unroll
      for (int s = 0; s < kAhead; ++s) {
        const int r = (seg.ring + s) % Tl::STAGES;
        if (s < iters) loader.load(sbase + r * L::kStageBytes, bars + 8 * r, p);
        cp_async_commit();
      }
    }

    // kFlagAtomicC: this launch adds its K splits into C (not with stream-K or a cluster).
    // (Recomputed after the main loop, and whether this CTA zeroed C kept in shared memory: nothing of
    // it stays in registers across the loop, whose allocation it changed: 8-row tile 270 -> 283
    // instructions per stage.)
    auto atomic_launch = [&]() {
      return kAtomicC && seg.splits > 1 &&
             (p.flags & (kFlagAtomicC | kFlagStreamK | kFlagClusterSplitK)) == kFlagAtomicC;
    };
    // Split 0 claims the zeroing at its start (unless kFlagAtomicNoStartClaim).
    auto start_claim = [&]() { return atomic_launch() && (p.flags & kFlagAtomicNoStartClaim) == 0 && seg.split == 0; };
    if constexpr (kAtomicC) {
      // (After griddepcontrol.wait: the previous kernel may still read this C.)
      if (start_claim()) claim_zero_c_cta(p, seg.tile, m0, n0);  // (the producer warpgroup has left)
    }

    // Stage buffers read and written this iteration ((ring + it) % STAGES and (ring + it + kAhead) %
    // STAGES; ring = 0 but for a stream-K CTA's later segments).
    int read_stage = seg.ring % Tl::STAGES, write_stage = (seg.ring + kAhead) % Tl::STAGES;
    u32 phase = static_cast<u32>(seg.ring / Tl::STAGES) & 1u;
    for (int it = 0; it < iters; ++it) {
      const int next = it + kAhead;
      const int prev_stage = read_stage == 0 ? Tl::STAGES - 1 : read_stage - 1;  // the stage of step it - 1
      if constexpr (kTma) {
        mbar_wait(bars + 8 * read_stage, phase);
      } else {
        cp_async_wait<kAhead - 1>();
        if constexpr (Loader::kBulk) mbar_wait(bars + 8 * read_stage, phase);
        if constexpr (kWgmma) fence_proxy_async_shared();  // this thread's copies, visible to wgmma
        __syncthreads();
        if (next < iters) {
          loader.load(sbase + write_stage * L::kStageBytes, bars + 8 * write_stage, p);
        }
        cp_async_commit();
      }

      const u32 st = sbase + read_stage * L::kStageBytes;
      if (read_stage == Tl::STAGES - 1) phase ^= 1u;
      read_stage = read_stage == Tl::STAGES - 1 ? 0 : read_stage + 1;
      write_stage = write_stage == Tl::STAGES - 1 ? 0 : write_stage + 1;
      const int k0 = (it_begin + it) * Tl::BK;
      // wgmma: every warp of the warpgroup takes part (channels past N are zero-filled and never stored).
      // A warp skips only in the last BK step of K (K is a multiple of 64), where nothing is refilled:
      // kTma's stage hand-off relies on it (a skipping warp does not release a stage).
      if ((!kWgmma && !n_valid) || k0 + kw * 64 >= p.k) continue;
      const u32 unit = st + L::kBOffset + (kw * L::kWarpsN + unit_n) * L::kUnitBytes;
      const u32 a_tile = st + L::kAOffset + kw * (Tl::BM * 128);
      float part[kScaleOnAcc ? kAccN : 1][4];  // this stage's sums, before the group scale (kScaleOnAcc)
      // kFold: the A operands of the stage's four slabs up front, and the folded offsets' term of each
      // n8 tile of rows (equal for every channel), which starts each channel tile's sum.
      u32 a_stage[kFold ? 4 : 1][2 * kTokTiles];
      float fold_sum[kFold ? kTokTiles : 1][4];
      if constexpr (kFold) {
        constexpr u32 nf[4] = {OffsetFold<Q>::frag(0), OffsetFold<Q>::frag(1), OffsetFold<Q>::frag(2), OffsetFold<Q>::frag(3)};
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
          load_a_swapped(a_stage[kk], a_tile, kk, wm, lane);
          if constexpr (OffsetFold<Q>::kHiRes > 0) {
#pragma unroll
            for (int tt = 0; tt < kTokTiles; ++tt) {
              a_stage[kk][2 * tt + 1] = Half2<T>::mul(a_stage[kk][2 * tt + 1], OffsetFold<Q>::kHiScale);
            }
          }
        }
#pragma unroll
        for (int tt = 0; tt < kTokTiles; ++tt) {
          mma_16816_zero<T>(fold_sum[tt], nf, a_stage[0][2 * tt], a_stage[0][2 * tt + 1]);
#pragma unroll
          for (int kk = 1; kk < 4; ++kk) mma_16816<T>(fold_sum[tt], nf, a_stage[kk][2 * tt], a_stage[kk][2 * tt + 1]);
        }
      }
      // wgmma: the shared loads of slab kk + 1 are issued before slab kk is dequantized, so that their
      // latency hides behind that work (the loads are volatile asm: the compiler keeps their order).
      SlabIn ahead;
      if constexpr (kWgmma) load_slab(ahead, st, unit, 0, kw, unit_n, lane, ch_s, ch_z, false);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        SlabIn in;
        if constexpr (kWgmma) {
          in = ahead;
          if (kk + 1 < 4) load_slab(ahead, st, unit, kk + 1, kw, unit_n, lane, ch_s, ch_z, true);
        } else {
          load_slab(in, st, unit, kk, kw, unit_n, lane, ch_s, ch_z, false);
        }
        u32(&w)[Q::kBits] = in.w;
        u32(&sw)[4] = in.sw;
        u32(&zw)[4] = in.zw;
        if constexpr (kHalves == 2) half_slab<Q::kBits>(w, sw, zw, unit_part != 0);
        if constexpr (kHalves == 4) quarter_slab<Q::kBits>(w, sw, zw, unit_part);
        u32 frag[16];
        dequant_slab<Q, !kScaleOnAcc, kSwapAB, 16 / kHalves, kFold>(w, sw, zw, frag);
        if constexpr (kWgmma) {
          // Rows 16w..16w+15 of wgmma mt are channels w * WN + mt * 16 + 0..15 (w = wn). B: the k16 slab
          // kk of this warpgroup's A tile, 32 bytes further per slab inside the swizzled 128-byte rows.
          const u64 desc = wgmma_desc_sw128(a_tile + kk * 32);
          wgmma_fence();
#pragma unroll
          for (int mt = 0; mt < kMt; ++mt) {
            WgmmaRS<T, Tl::BM>::template run<kMt>(acc[0], mt, *reinterpret_cast<const u32(*)[4]>(&frag[4 * mt]), desc);
          }
          if ((kk + 1) % kGroupSlabs == 0) {
            wgmma_commit();
            wgmma_wait<1>();  // the previous group is done: its registers may be reused
          }
          if constexpr (kTma) {
            // Step it - 1's last wgmma group is done once this step's first group is committed: release
            // its stage. Thread 0 then refills that stage with step it + STAGES - 1, once every thread
            // has released it (n-th release = phase n). Every thread arrives (kThreads arrivals per
            // phase), each releasing its own shared loads of the stage. (The former release by lane 0
            // after __syncwarp was flagged by compute-sanitizer racecheck: 92 errors on 512 x 2048,
            // M = 32, (32, 256, 128) u4 g128 int zp, none with every thread arriving; H200: no case
            // more than 1% slower, up to 2% faster.)
            if (kk == kGroupSlabs - 1 && it > 0) {
              mbar_arrive(empties + 8 * prev_stage);
            }
            if (!kProducer && kk == (kGroupSlabs < 2 ? 1 : 3) && threadIdx.x == 0 && next < iters) {
              if (it > 0) mbar_wait(empties + 8 * prev_stage, static_cast<u32>((it - 1) / Tl::STAGES) & 1u);
              loader.load_weights_one(sbase + prev_stage * L::kStageBytes, bars + 8 * prev_stage, p);
              loader.load_a_tma(sbase + prev_stage * L::kStageBytes, bars + 8 * prev_stage, p, m0);
            }
          }
        } else if constexpr (kSwapAB) {
          u32 a[2 * kTokTiles];
          if constexpr (kFold) {
#pragma unroll
            for (int i = 0; i < 2 * kTokTiles; ++i) a[i] = a_stage[kk][i];
          } else {
            load_a_swapped(a, a_tile, kk, wm, lane);
          }
#pragma unroll
          for (int mt = 0; mt < 4; ++mt) {
            // Channels mt*16 + lane/4 (+ 8) are the weight pairs nt = 2 mt (+ 1) of the B layout.
            const u32(&wf)[4] = *reinterpret_cast<const u32(*)[4]>(&frag[4 * mt]);
#pragma unroll
            for (int tt = 0; tt < kTokTiles; ++tt) {
              if constexpr (kScaleOnAcc) {
                if (kFold && kk == 0) {
                  mma_16816_c<T>(part[tt * 4 + mt], wf, a[2 * tt], a[2 * tt + 1], fold_sum[kFold ? tt : 0]);
                } else if (kk == 0) {
                  mma_16816_zero<T>(part[tt * 4 + mt], wf, a[2 * tt], a[2 * tt + 1]);
                } else {
                  mma_16816<T>(part[tt * 4 + mt], wf, a[2 * tt], a[2 * tt + 1]);
                }
              } else {
                mma_16816<T>(acc[0][tt * 4 + mt], wf, a[2 * tt], a[2 * tt + 1]);
              }
            }
          }
        } else {
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {
            const int row = wm * Tl::WM + mt * 16 + (lane & 15);
            const int chunk = kk * 2 + (lane >> 4);
            u32 a[4];
            ldmatrix_x4(a, a_tile + a_swizzle(row, chunk));
#pragma unroll
            for (int nt = 0; nt < 8; ++nt) mma_16816<T>(acc[mt][nt], a, frag[2 * nt], frag[2 * nt + 1]);
          }
        }
      }
      if constexpr (kScaleOnAcc) {
        // This warp's 64-deep slice lies in one group (G >= 64): acc += scale(channel) * part.
        const int idx = scale_index(Q::kGroup < Tl::BK ? (kw * 64) / Q::kGroup : 0, unit_n, lane);
        const uint4 v = lds128(st + L::kSOffset + 2 * idx);
        const u32 sv[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int mt = 0; mt < 4; ++mt) {
          const float s0 = Half2<T>::to_float(static_cast<u16>(sv[mt] & 0xFFFFu));  // channel mt*16 + lane/4
          const float s1 = Half2<T>::to_float(static_cast<u16>(sv[mt] >> 16));      // channel mt*16 + lane/4 + 8
#pragma unroll
          for (int tt = 0; tt < kTokTiles; ++tt) {
            float(&d)[4] = acc[0][tt * 4 + mt];
            const float(&q)[4] = part[tt * 4 + mt];
            d[0] = fmaf(s0, q[0], d[0]);
            d[1] = fmaf(s0, q[1], d[1]);
            d[2] = fmaf(s1, q[2], d[2]);
            d[3] = fmaf(s1, q[3], d[3]);
          }
        }
      }
    }
    // kFlagAtomicC: thread 0 reads the tile's lock word now (ld_split_acquire_gpu: on sm_90 a relaxed
    // load whose acquire await_zeroed_c_cta completes where it uses the value, so that the L2 round
    // trip overlaps the K-warp sum and the f32 tile's shared stores; an acquire load here made warp 0,
    // and the CTA at its next barrier, wait it out at once: PERFORMANCE.md, v33).
    int lock_seen = 0;
    const bool atomic_c = atomic_launch();
    // (Read only where the claim ran: thread 0 wrote it before the claim's barriers.)
    const bool zeroed_here = kAtomicC && start_claim() && s_zeroed_here() != 0;
    if constexpr (kAtomicC) {
      if (atomic_c && !zeroed_here && threadIdx.x == 0) lock_seen = ld_split_acquire_gpu(p.locks + seg.tile);
    }
    if constexpr (!kTma) cp_async_wait<0>();
    if constexpr (kWgmma) wgmma_wait<0>();
    // The next kernel may start (and stream its first weights) once every CTA here is past its main
    // loop (a stream-K CTA: past its first segment's; the next kernel still waits for this whole grid
    // before it reads A), unless kFlagEarlyTrigger already let it at the start (the runtime sets it for tiles of at
    // most 16 rows with two CTAs per SM whose launch has more CTAs than SMs; for the one-CTA 16-row
    // tile an early trigger took free slots and DRAM bandwidth from this kernel's CTAs: 19.1 -> 21.3 us
    // at 8192 x 8192, M = 16, on the H200).
    grid_launch_dependents();

    // Reduce the warps along K through shared memory (the pipeline buffers are free now).
    if constexpr (kWarpsK > 1) {
      sync_compute();
      float* red = reinterpret_cast<float*>(smem);
      const int slot_base = (wm * kWarpsN + wn) * kMTiles * kAccN;
      constexpr int kSlots = kWarpsM * kWarpsN * kMTiles * kAccN;
      if (kw > 0) {
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
          for (int nt = 0; nt < kAccN; ++nt)
#pragma unroll
            for (int j = 0; j < 4; ++j)
              red[(((kw - 1) * kSlots + slot_base + mt * kAccN + nt) * 4 + j) * 32 + lane] = acc[mt][nt][j];
      }
      sync_compute();
      if (kw == 0) {
#pragma unroll
        for (int k2 = 1; k2 < kWarpsK; ++k2)
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
            for (int nt = 0; nt < kAccN; ++nt)
#pragma unroll
              for (int j = 0; j < 4; ++j)
                acc[mt][nt][j] += red[(((k2 - 1) * kSlots + slot_base + mt * kAccN + nt) * 4 + j) * 32 + lane];
      }
    }

    if constexpr (kStaged) {
      // The runtime sets the flag only with a cluster launch of 2 to kMaxClusterSplits splits.
      const bool cluster = seg.splits > 1 && seg.splits <= kMaxClusterSplits && (p.flags & kFlagClusterSplitK) != 0;
      if (seg.splits == 1 || cluster) {
        staged_epilogue(p, acc, kw == 0 && n_valid, wm, wn, lane, m0, n0, cluster ? split : 0, cluster ? seg.splits : 1);
        return;
      }
    }

    // Split-K: every accumulating thread publishes its accumulators as they lie in its registers
    // (fragment-major: float4 q of thread t at (q * kAccThreads + t) * 4, coalesced 16-byte stores);
    // the last split to finish the tile loads every split's partial back into the same registers,
    // adding them in split order (0 + p0 + p1 + ..., bit-identical whichever split is last): with
    // kBulkTail through shared memory by bulk copies (bulk_tail), else by its own 16-byte loads in
    // batches of up to 8 per thread (a batch costs about one L2 round trip). Then it writes C: through
    // the staged epilogue where the tile has one (kStaged), else through the ordinary one below.
    if constexpr (kAtomicC) {
      if (atomic_c) {
        staged_epilogue<true>(p, acc, kw == 0 && n_valid, wm, wn, lane, m0, n0, 0, 1, seg.tile, split, seg.splits,
                              zeroed_here, lock_seen);
        return;
      }
    }
    if (seg.splits > 1) {
      __shared__ int s_last;
      constexpr int kTileFloats = Tl::BM * Tl::BN;
      static_assert(kAccThreads * kQuads * 4 == kTileFloats, "a partial tile is exactly the accumulators");
      const int tile = seg.tile;
      const int tiles = seg.tiles;
      const long long split_stride = static_cast<long long>(tiles) * kTileFloats;
      const int t = threadIdx.x;  // < kAccThreads when kw == 0
      float* ws_tile = p.workspace + static_cast<long long>(tile) * kTileFloats;  // split 0's partial
      if (kw == 0 && n_valid) {
        float4* ws = reinterpret_cast<float4*>(ws_tile + split * split_stride) + t;
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
          for (int nt = 0; nt < kAccN; ++nt) {
            const float(&a)[4] = acc[mt][nt];
            __stcg(ws + (mt * kAccN + nt) * kAccThreads, make_float4(a[0], a[1], a[2], a[3]));
          }
        if constexpr (kBulkTail) fence_proxy_async_global();  // the last CTA reads them by bulk copy
      }
      // The CTA barrier orders every thread's partial before thread 0's ticket, whose release (GPU
      // scope, cumulative over the writes the barrier ordered) publishes them; its acquire, then the
      // barrier, order the other splits' partials before this CTA's reads of them when it is the
      // last. (Instead of a sequentially consistent __threadfence by every thread before and after
      // the ticket, MEMBAR.SC.GPU twice on the critical path of every launch's tail.)
      sync_compute();
      if (threadIdx.x == 0) s_last = atomic_add_acq_rel_gpu(p.locks + tile, 1) == seg.splits - 1;
      sync_compute();
      if (!s_last) return;
      if (threadIdx.x == 0) p.locks[tile] = 0;
      if constexpr (kBulkTail) {
        bulk_tail(acc, ws_tile, split_stride, seg.splits, kw == 0 && n_valid);
        if constexpr (kStaged) {
          staged_epilogue(p, acc, kw == 0 && n_valid, wm, wn, lane, m0, n0, 0, 1);
          return;
        }
      } else if constexpr (kSwapAB && !kWgmma && kTokTiles == 1) {
        wide_tail(p, ws_tile, split_stride, seg.splits, m0, n0);
        return;
      } else {
        if (kw != 0 || !n_valid) return;
        zero_acc(acc);
        constexpr int kBatch = kRegTailBatch;
        const float4* ws_t = reinterpret_cast<const float4*>(ws_tile) + t;
        for (int s = 0; s < seg.splits; ++s) {
          const float4* src = ws_t + s * (split_stride / 4);
#pragma unroll
          for (int q0 = 0; q0 < kQuads; q0 += kBatch) {
            float4 v[kBatch];
#pragma unroll
            for (int b = 0; b < kBatch; ++b) {
              if (q0 + b < kQuads) v[b] = __ldcg(src + (q0 + b) * kAccThreads);
            }
#pragma unroll
            for (int b = 0; b < kBatch; ++b) {
              if (q0 + b < kQuads) {
                float(&a)[4] = acc[(q0 + b) / kAccN][(q0 + b) % kAccN];
                a[0] += v[b].x; a[1] += v[b].y; a[2] += v[b].z; a[3] += v[b].w;
              }
            }
          }
        }
      }
    }
    if (kw != 0 || !n_valid) return;

    if constexpr (kSwapAB) {
      u16* c16 = static_cast<u16*>(p.c);
#pragma unroll
      for (int i = 0; i < kAccN; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int row = m0 + wm * Tl::WM + swapped_row(i, j, lane);
          const int col = n0 + wn * Tl::WN + swapped_col(i, j, lane);
          if (row < p.m) c16[static_cast<long long>(row) * p.ldc + col] = finish_one<Q>(acc[0][i][j], p, col);
        }
      return;
    }
    u32* c = static_cast<u32*>(p.c);
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      const int row0 = m0 + wm * Tl::WM + plain_row(mt, 0, lane);
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const int col = n0 + wn * 64 + plain_col(nt, lane);
        if (row0 < p.m) {
          c[(static_cast<long long>(row0) * p.ldc + col) >> 1] = finish_pair<Q>(acc[mt][nt][0], acc[mt][nt][1], p, col);
        }
        if (row0 + 8 < p.m) {
          c[(static_cast<long long>(row0 + 8) * p.ldc + col) >> 1] = finish_pair<Q>(acc[mt][nt][2], acc[mt][nt][3], p, col);
        }
      }
    }
  }
};

}  // namespace humming
