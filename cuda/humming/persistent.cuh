// humming: the persistent, warp-specialized Hopper kernel (sm_90a) for 8-bit activation codes (W8A8 with
// channel, tensor or block scales; W4A8 with group or channel scales). A grid of about one CTA per SM walks the launch's
// output tiles (PersistentTiles, scheduler.cuh); each CTA is three warpgroups:
//
// - the producer (warpgroup 0, its registers handed to the others with setmaxnreg): one thread issues
//   the TMA boxes of every stage (the weight tile and the row tile, both K-major with the 128-byte
//   swizzle; 4-bit weights as 64-byte rows in their own K order) into a ring of STAGES buffers, each with a
//   "full" and an "empty" mbarrier, and with group scales on 4-bit weights the step's f32 scales of the
//   tile's channels by a bulk copy; with block scales a second warp stages each step's activation group
//   scales and weight block scales into the same buffer;
// - two consumer warpgroups, "cooperative" (WN = BN / 2: both on one tile, each on WN of its BN
//   channels) or "ping-pong" (WN = BN: each on every other tile of the CTA, their main loops taking
//   turns in the stage ring, so that one's epilogue overlaps the other's main loop): per BK step of 128
//   codes, four k32 steps of SS wgmma, the weights as the m64 operand (swap AB: C^T tiles) and the
//   tile's rows as the N operand; a stage is released once the wgmmas that read it are done.
//   4-bit weights are widened into 8-bit codes in registers (the A operand of RS wgmma).
//   Channel and tensor scales: every K step into the accumulators, the scales in the epilogue.
//   Block scales, and group scales of 4-bit weights: each step's sums go to a second set and are promoted
//   into f32 accumulators times the step's weight scale (and, for block scales, each row's group scale).
//
// The epilogue (PersistentEpilogue) writes each warpgroup's C^T tile transposed into shared memory
// (stmatrix) in 64 x 64 boxes and stores them by TMA, two boxes in flight per warpgroup, so that the
// stores overlap the next tile's main loop.
//
// MoE (moe_indexed, R = IndexedRows): A's codes are gathered by slot before the launch (act_quant.cuh), so
// each block of BM rows is one expert's (the routing's blocks) and stays one TMA box; a unit's expert
// picks its weights (the B map spans the E experts' rows), scales, channel factors and bias, and the
// epilogue writes each row to its slot's row of C. Cooperative tiles without K splits.
#pragma once
#include "epilogue.cuh"
#include "rows.cuh"
#include "wgmma_ss.cuh"

namespace humming {

// One tile configuration of the persistent kernel: BM rows of C (tokens; the wgmma N), BN channels, WN
// of them per consumer warpgroup (BN / 2: cooperative; BN: ping-pong), STAGES buffers of BK = 128 codes.
template <int BM_, int BN_, int WN_, int STAGES_>
struct PersistentTile {
  static constexpr int BM = BM_, BN = BN_, WN = WN_, STAGES = STAGES_;
  static constexpr int BK = 128;  // one 128-byte swizzle row of codes
  static constexpr int kConsumers = 2;        // consumer warpgroups
  static constexpr int kSlices = BN / WN;     // warpgroups on one tile: 2 cooperative, 1 ping-pong
  static constexpr bool kPingPong = kSlices == 1;
  // Registers per thread after setmaxnreg: the producer warpgroup keeps kProducerRegs, the consumers
  // take the rest of the 65536 (1 CTA of 384 threads per SM; humming_spec::resources::consumer_registers).
  static constexpr int kProducerRegs = kPersistentProducerRegs;
  static constexpr int kConsumerRegs = (65536 / 128 - kProducerRegs) / kConsumers / 8 * 8;
  static_assert((WN == BN || 2 * WN == BN) && WN % 64 == 0 && WN <= 128, "consumer warpgroups of 64 or 128 channels");
  static_assert(BM == 8 || BM == 16 || BM == 32 || BM == 64 || BM == 128 || BM == 192 || BM == 256,
                "block M is a wgmma N of wgmma_ss.cuh (humming_spec::tiles::PERSISTENT_BLOCK_M)");
  static_assert(STAGES >= 2 && STAGES <= 16, "2 to 16 stages");
};

template <class Q, class Tl, class Code, class R = DenseRows>
struct Persistent {
  using T = typename Q::T;
  using H = Half2<T>;
  static constexpr int BM = Tl::BM, BN = Tl::BN, WN = Tl::WN, BK = Tl::BK, STAGES = Tl::STAGES;
  static constexpr int kMi = WN / 64;  // m64 weight blocks per consumer warpgroup
  static constexpr int kNc = BM / 8;   // n8 chunks of rows
  // 4-bit weights: widened into A's 8-bit code in registers (RS wgmma); else both operands in shared memory.
  static constexpr bool kWiden = Q::kBits == 4;
  static_assert(Q::kBits == 8 || (kWiden && Q::kZp == ZeroPointKind::kNone), "8-bit codes, or 4-bit ones without zero points");
  // Block scales: each BK step's sums are promoted times the weight block's scale and the rows' group
  // scales (the activation groups are one BK step: humming_spec::layout::act_scale_group).
  static constexpr bool kRowPromote = Q::kActGroup > 0;
  static_assert(!kRowPromote || (Q::kActGroup == BK && !Code::kInt), "promotion per 128-code step of float codes");
  // Group scales of 4-bit weights: promoted per BK step times each channel's scale (groups of BK codes).
  static constexpr bool kGroupPromote = kWiden && Q::kGroup > 0;
  static_assert(!kGroupPromote || Q::kGroup == BK, "a group scale per 128-code step");
  static constexpr bool kPromote = kRowPromote || kGroupPromote;
  // Sums of one step (s32 for s8 codes), and the accumulators (f32 where steps are promoted).
  using Part = typename Pick<Code::kInt, int, float>::type;
  using Acc = typename Pick<kPromote, float, Part>::type;
  // Widened float codes are the weights times 2^-kUnitExp ("normalized integers", common.cuh).
  static constexpr float kUnit = kWiden && !Code::kInt ? static_cast<float>(1 << Code::kUnitExp) : 1.0f;
  static constexpr int kThreads = 128 * (1 + Tl::kConsumers);
  static constexpr int kConsumerThreads = 128 * Tl::kConsumers;
  static constexpr bool kPingPong = Tl::kPingPong;
  static constexpr bool kMoe = R::kMoe;
  static_assert(!kMoe || (R::kIndexed && !kPingPong), "MoE: moe_indexed on cooperative tiles");
  // Threads that read one stage and share one tile's sums: one warpgroup ping-pong, both cooperative.
  static constexpr int kTileThreads = 128 * Tl::kSlices;

  // Shared memory: STAGES x [weights BN x 128 codes | rows BM x 128] (1024-byte aligned: the swizzle), the
  // C boxes, STAGES x the scales of a step, the mbarriers.
  static constexpr int kBRowBytes = BK * Q::kBits / 8;
  static constexpr int kBBytes = BN * kBRowBytes;
  static constexpr int kABytes = BM * BK;
  static constexpr int kStageBytes = kBBytes + kABytes;
  // Block scales: the rows' scales, then a block scale per WN channels; group scales: one per channel.
  static constexpr int kScaleFloats = kRowPromote ? BM + Tl::kSlices : kGroupPromote ? BN : 0;
  static constexpr int kScaleBytes = (4 * kScaleFloats + 15) / 16 * 16;
  static constexpr int kCRows = BM < 64 ? BM : 64;  // rows of one C box (64 channels = 128 bytes each)
  static constexpr int kCBoxBytes = kCRows * 128;
  static constexpr int kCBoxes = 2;  // per consumer warpgroup, in flight
  static constexpr int kCBytes = Tl::kConsumers * kCBoxes * kCBoxBytes;
  static constexpr int kSmemBytes = 1024 + STAGES * (kStageBytes + kScaleBytes) + kCBytes + 16 * STAGES + 16;
  static constexpr int kLaunchThreads = kThreads;
  static_assert(kStageBytes % 1024 == 0 && kCBoxBytes % 1024 == 0, "tiles keep the 128-byte swizzle's 1024-byte alignment");
  static_assert(kSmemBytes <= 232448, "beyond the 227 KiB of shared memory a CTA may use");

  struct Smem {
    u32 stages, cbox, scale_ring, full, empty, flag;  // flag: the split-K reduction's "last split" (per warpgroup)
    __device__ __forceinline__ Smem() {
      extern __shared__ __align__(128) char smem[];
      stages = (smem_addr(smem) + 1023u) & ~1023u;
      cbox = stages + STAGES * kStageBytes;
      scale_ring = cbox + kCBytes;
      full = scale_ring + STAGES * kScaleBytes;
      empty = full + 8 * STAGES;
      flag = empty + 8 * STAGES;
    }
    __device__ __forceinline__ u32 b(int s) const { return stages + s * kStageBytes; }
    __device__ __forceinline__ u32 a(int s) const { return b(s) + kBBytes; }
    __device__ __forceinline__ u32 scales(int s) const { return scale_ring + s * kScaleBytes; }
  };

  // The position in the stage ring, walked the same way by the producer and the consumers.
  struct Ring {
    int stage = 0;
    u32 phase = 0;
    __device__ __forceinline__ void next() {
      if (++stage == STAGES) {
        stage = 0;
        phase ^= 1u;
      }
    }
    // Past `steps` stages that another warpgroup consumes (ping-pong).
    __device__ __forceinline__ void skip(int steps) {
      const int s = stage + steps, wraps = s / STAGES;
      stage = s - wraps * STAGES;
      phase ^= static_cast<u32>(wraps & 1);
    }
  };

  __device__ __forceinline__ static void run(const GemmParams& p) {
    const Smem sm;
    if (threadIdx.x == 0) {
      for (int s = 0; s < STAGES; ++s) {
        mbar_init(sm.full + 8 * s, 1 + (kRowPromote ? 32 : 0));
        mbar_init(sm.empty + 8 * s, kTileThreads / 32);
      }
      mbar_fence_init();
      prefetch_tensormap(&p.a_map);
      prefetch_tensormap(&p.b_map);
    }
    __syncthreads();
    const int wg = threadIdx.x / 128;
    if (wg == 0) {
      setmaxnreg_dec<Tl::kProducerRegs>();
      const int warp = threadIdx.x / 32;
      if (threadIdx.x == 0) produce(p, sm);
      if constexpr (kRowPromote) {
        if (warp == 1) stage_scales(p, sm, threadIdx.x & 31);
      }
      return;
    }
    setmaxnreg_inc<Tl::kConsumerRegs>();
    consume(p, sm, wg - 1);
  }

  using Tiles = PersistentTiles<BM, BN, BK>;
  using Unit = typename Tiles::Unit;

  // The launch's work: dense, p.m rows; MoE, the gathered rows in use (after the routing's kernel).
  __device__ __forceinline__ static Tiles tiles_of(const GemmParams& p) {
    if constexpr (kMoe) {
      grid_dependency_wait();
      return Tiles(p, min(max(*p.route_slots, 0), p.a_rows));
    } else {
      return Tiles(p, p.m);
    }
  }

  // The expert of unit w's rows (0 dense), or -1 where the routing skips its block.
  __device__ __forceinline__ static int expert_of(const GemmParams& p, const Unit& w) {
    if constexpr (kMoe) {
      const int e = __ldg(p.expert_ids + w.tile_m);
      return e >= 0 && e < p.experts ? e : -1;
    } else {
      return 0;
    }
  }

  // Calls f(u, unit, expert) for this CTA's units in order (but those the routing skips), while f returns
  // true; each unit's expert is read one unit ahead, so that its load is in flight during the unit before.
  template <class F>
  __device__ __forceinline__ static void for_each_unit(const GemmParams& p, const Tiles& tiles, F&& f) {
    const int step = static_cast<int>(gridDim.x);
    int u = blockIdx.x;
    int e = u < tiles.units ? expert_of(p, tiles.unit(u)) : -1;
    for (; u < tiles.units; u += step) {
      const int here = e;
      if (u + step < tiles.units) e = expert_of(p, tiles.unit(u + step));
      if (here >= 0 && !f(u, tiles.unit(u), here)) return;
    }
  }

  // Calls f(unit, expert, kb) for every BK step of this CTA's units in order, while f returns true.
  template <class F>
  __device__ __forceinline__ static void for_each_step(const GemmParams& p, const Tiles& tiles, F&& f) {
    for_each_unit(p, tiles, [&](int, const Unit& w, int e) {
      for (int kb = w.kb0; kb < w.kb1; ++kb)
        if (!f(w, e, kb)) return false;
      return true;
    });
  }

  // The producer thread: every stage's two TMA boxes (and a 4-bit weight tile's group scales). The first
  // ring's weights go out before griddepcontrol.wait (no kernel writes them), their rows after it.
  __device__ __forceinline__ static void produce(const GemmParams& p, const Smem& sm) {
    const Tiles tiles = tiles_of(p);
    Ring r;
    int early = 0;  // steps of the first ring whose weights went out before the wait
    bool waited = kMoe;  // (a MoE launch's experts come from the routing: it has waited)
    auto rows = [&](int stage, const Unit& w, int kb) {
      tma_load_2d(sm.a(stage), &p.a_map, kb * BK, w.tile_m * BM, sm.full + 8 * stage);
    };
    auto wait_previous = [&]() {
      grid_dependency_wait();
      waited = true;
      int s = 0;
      for_each_step(p, tiles, [&](const Unit& w, int, int kb) {
        if (s == early) return false;
        rows(s++, w, kb);
        return true;
      });
    };
    for_each_step(p, tiles, [&](const Unit& w, int e, int kb) {
      mbar_wait(sm.empty + 8 * r.stage, r.phase ^ 1u);
      const u32 full = sm.full + 8 * r.stage;
      const int col0 = w.tile_n * BN;
      // Group scales: the tile's columns below N (N % 64 == 0: whole 16-byte chunks); the rest of the
      // buffer keeps older scales, which only reach the sums of channels past N, which C never receives.
      const int scale_bytes = kGroupPromote ? 4 * min(BN, p.n - col0) : 0;
      mbar_arrive_expect_tx(full, kBBytes + kABytes + scale_bytes);
      // (The B map's rows are the E experts' N channels, one after the other.)
      tma_load_2d(sm.b(r.stage), &p.b_map, kb * kBRowBytes, e * p.n + col0, full);
      if constexpr (kGroupPromote) {
        const float* gs = static_cast<const float*>(p.scales) + e * p.s_expert;
        bulk_copy_g2s(sm.scales(r.stage), gs + static_cast<long long>(kb) * p.n + col0, scale_bytes, full);
      }
      if (!waited && early < STAGES - 1) {
        ++early;  // its row box once the previous kernel is done
      } else {
        if (!waited) wait_previous();
        rows(r.stage, w, kb);
      }
      r.next();
      return true;
    });
    if (!waited) wait_previous();
  }

  // Block scales, one warp of the producer warpgroup: per stage the BM rows' scales of the step's
  // activation group (0 past M) and the weight block scale of each WN channels, by cp.async; every
  // lane arrives on the stage's "full" mbarrier once its copies have landed, so the warp runs ahead of
  // the consumers by up to STAGES steps without waiting for its loads.
  __device__ __forceinline__ static void stage_scales(const GemmParams& p, const Smem& sm, int lane) {
    const Tiles tiles = tiles_of(p);
    const int block_cols = (p.n + Q::kBlockN - 1) / Q::kBlockN;  // weight blocks along N
    grid_dependency_wait();  // the row scales come from the previous kernel (the input quantization)
    Ring r;
    for_each_step(p, tiles, [&](const Unit& w, int e, int kb) {
      const float* bs = static_cast<const float*>(p.scales) + e * p.s_expert;
      const int m0 = w.tile_m * BM;
      const float* rows = p.a_scales + static_cast<long long>(m0) * p.a_scale_stride + kb;
      mbar_wait(sm.empty + 8 * r.stage, r.phase ^ 1u);
      const u32 at = sm.scales(r.stage);
#pragma unroll
      for (int i = lane; i < BM; i += 32) {
        const bool in = m0 + i < tiles.rows;
        cp_async4(at + 4 * i, in ? rows + static_cast<long long>(i) * p.a_scale_stride : p.a_scales, in);
      }
      if (lane < Tl::kSlices) {
        const int col = w.tile_n * BN + lane * WN;
        cp_async4(at + 4 * (BM + lane), col < p.n ? bs + static_cast<long long>(kb) * block_cols + col / Q::kBlockN : bs,
                  col < p.n);
      }
      cp_async_mbar_arrive(sm.full + 8 * r.stage);
      r.next();
      return true;
    });
    cp_async_wait<0>();
  }

  // A consumer warpgroup (`cw` = 0, 1). Cooperative: channels cw * WN .. + WN of every unit of this
  // CTA. Ping-pong: every channel of the CTA's units j with j % 2 == cw; its main loop starts once the
  // other warpgroup's main loop of unit j - 1 has waited for all its stages (named barrier 4 + cw), which
  // keeps the stage ring's mbarrier phases within one of what this warpgroup waits for and gives the
  // tensor cores to one main loop at a time. A unit that is one of several K splits of its tile hands
  // its sums to the split-K reduction, and only the last split to finish writes C.
  __device__ __forceinline__ static void consume(const GemmParams& p, const Smem& sm, int cw) {
    const Tiles tiles = tiles_of(p);
    const int warp = (threadIdx.x / 32) & 3, lane = threadIdx.x & 31;
    const int slice = kPingPong ? 0 : cw;  // this warpgroup's WN channels of a tile
    grid_dependency_wait();  // C may still be read by the previous kernel
    Ring r;
    int boxes = 0;  // C boxes this warpgroup has stored (their buffers alternate)
    Acc acc[kMi][kNc][4];
    int j = 0;  // units of this CTA so far
    for_each_unit(p, tiles, [&](int u, const Unit& w, int e) {
      if (kPingPong && (j++ & 1) != cw) {
        r.skip(w.kb1 - w.kb0);
        return true;
      }
      if (kPingPong && j > 1) named_barrier_sync(4 + cw, 256);
      if constexpr (kMoe) prefetch_rows(p, w.tile_m * BM, lane);
      if constexpr (kPromote) {
        promoted_loop(sm, slice, lane, w.kb0, w.kb1, r, acc);
      } else {
        plain_loop(sm, slice, w.kb0, w.kb1, r, acc);
      }
      const bool last = u + static_cast<int>(gridDim.x) >= tiles.units;
      if (kPingPong && !last) named_barrier_arrive(5 - cw, 256);
      if (last) grid_launch_dependents();
      if (tiles.splits == 1 || reduce_splits(p, sm, tiles, w, cw, acc))
        epilogue(p, sm, cw, warp, lane, e, w.tile_m * BM, w.tile_n * BN + slice * WN, acc, boxes);
      return true;
    });
    if ((threadIdx.x & 127) == 0) bulk_wait<0>();
  }

  // Split-K: every split stores its sums to the workspace (float4 q of the tile's thread i of split j of
  // tile t at ((t * splits + j) * kQuads + q) * kTileThreads + i) and takes the tile's ticket; the last
  // to arrive sums the splits' partials in split order (the same bits whichever CTA is last), leaves the
  // ticket at 0 for the next launch and returns true. (Barrier 1 cooperative, 6 + cw ping-pong.)
  static constexpr int kQuads = kMi * kNc;
  __device__ __forceinline__ static bool reduce_splits(const GemmParams& p, const Smem& sm, const Tiles& tiles,
                                                       const Unit& w, int cw, Acc (&acc)[kMi][kNc][4]) {
    const int i = kPingPong ? threadIdx.x & 127 : threadIdx.x - 128;
    const int bar = kPingPong ? 6 + cw : 1;
    const u32 flag = sm.flag + (kPingPong ? 4 * cw : 0);
    float4* ws = reinterpret_cast<float4*>(p.workspace) + static_cast<long long>(w.tile) * tiles.splits * kQuads * kTileThreads;
#pragma unroll
    for (int mi = 0; mi < kMi; ++mi)
#pragma unroll
      for (int c = 0; c < kNc; ++c) {
        const Acc(&a)[4] = acc[mi][c];
        __stcg(ws + (static_cast<long long>(w.split) * kQuads + mi * kNc + c) * kTileThreads + i,
               make_float4(to_f32(a[0]), to_f32(a[1]), to_f32(a[2]), to_f32(a[3])));
      }
    named_barrier_sync(bar, kTileThreads);
    if (i == 0) {
      const int last = atomic_add_acq_rel_gpu(p.locks + w.tile, 1) == tiles.splits - 1;
      if (last) p.locks[w.tile] = 0;
      sts32(flag, static_cast<u32>(last));
    }
    named_barrier_sync(bar, kTileThreads);
    if (lds32(flag) == 0) return false;
#pragma unroll
    for (int mi = 0; mi < kMi; ++mi)
#pragma unroll
      for (int c = 0; c < kNc; ++c) {
        float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int j = 0; j < tiles.splits; ++j) {
          const float4 q = __ldcg(ws + (static_cast<long long>(j) * kQuads + mi * kNc + c) * kTileThreads + i);
          v[0] += q.x, v[1] += q.y, v[2] += q.z, v[3] += q.w;
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mi][c][e] = static_cast<Acc>(v[e]);
      }
    return true;
  }

  template <class D>
  __device__ __forceinline__ static void zero(D (&acc)[kMi][kNc][4]) {
#pragma unroll
    for (int mi = 0; mi < kMi; ++mi)
#pragma unroll
      for (int c = 0; c < kNc; ++c)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[mi][c][j] = 0;
  }

  // Stage `s` is free once this warp's wgmmas that read it are done: one arrival per consumer warp.
  __device__ __forceinline__ static void release(const Smem& sm, int s) {
    __syncwarp();
    if ((threadIdx.x & 31) == 0) mbar_arrive(sm.empty + 8 * s);
  }

  // Eight 4-bit codes (one per nibble) into the 8-bit codes of A's type: the low nibbles into `lo`'s
  // bytes, the high ones into `hi`'s. Unsigned codes are their values (under e4m3 the normalized integers
  // v * 2^-9, exact below 16). Signed codes, s8: stored offset-binary (v + 8), so v + 128 is the byte
  // plus 120 (no carry), then the top bit flipped; e4m3: packed as v, or 8 + (-v - 1) for v < 0
  // (humming_spec::layout::k_major_4bit_code), so the magnitude is the low 3 bits plus the sign.
  __device__ __forceinline__ static void widen(u32 w, u32& lo, u32& hi) {
    if constexpr (!Q::kSigned) {
      lo = w & 0x0F0F0F0Fu;
      hi = (w >> 4) & 0x0F0F0F0Fu;
    } else if constexpr (Code::kInt) {
      lo = ((w & 0x0F0F0F0Fu) + 0x78787878u) ^ 0x80808080u;
      hi = (((w >> 4) & 0x0F0F0F0Fu) + 0x78787878u) ^ 0x80808080u;
    } else {
      lo = (w & 0x07070707u) + ((w >> 3) & 0x01010101u) * 0x81u;
      hi = ((w >> 4) & 0x07070707u) + ((w >> 7) & 0x01010101u) * 0x81u;
    }
  }

  // The wgmmas of one BK step: for each k32 step, each of the warpgroup's m64 weight blocks times the
  // stage's rows; `first`: D = A * B for the step's first k32 (a tile's first step, or a promoted set).
  // 4-bit weights: a step's register operand (A fragments of the warpgroup's kMi weight blocks, 4 k32
  // steps each).
  struct Frag {
    u32 a[kMi][4][4];
  };

  // Row lane / 4 (+ 8) of warp w's 16 weight rows: the lane's 16 bytes at 16 (lane % 4) hold its 4 k32
  // steps' codes (humming_spec::layout::k_major_4bit_order), word j: step j.
  __device__ __forceinline__ static void load_frag(const Smem& sm, int stage, int slice, Frag& f) {
    const int warp = (threadIdx.x / 32) & 3, lane = threadIdx.x & 31;
    const u32 w0 = sm.b(stage) + (slice * WN + warp * 16 + (lane >> 2)) * kBRowBytes + 16 * (lane & 3);
#pragma unroll
    for (int mi = 0; mi < kMi; ++mi) {
      const uint4 lo = lds128(w0 + mi * 64 * kBRowBytes), hi = lds128(w0 + (mi * 64 + 8) * kBRowBytes);
      const u32 l[4] = {lo.x, lo.y, lo.z, lo.w}, h[4] = {hi.x, hi.y, hi.z, hi.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        widen(l[j], f.a[mi][j][0], f.a[mi][j][2]);
        widen(h[j], f.a[mi][j][1], f.a[mi][j][3]);
      }
    }
  }

  // The RS wgmmas of one BK step on fragments `f` (which stay untouched until they are done).
  template <class D>
  __device__ __forceinline__ static void step_rs(const Smem& sm, int stage, const Frag& f, D (&d)[kMi][kNc][4], bool first) {
    const u64 rows0 = wgmma_desc_sw128(sm.a(stage));
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < BK / 32; ++k) {
#pragma unroll
      for (int mi = 0; mi < kMi; ++mi) {
        WgmmaRS8P<Code, BM>::run(d[mi], f.a[mi][k], rows0 + 32 * k / 16, first && k == 0 ? 0 : 1);
      }
    }
    wgmma_commit();
  }

  // The SS wgmmas of one BK step.
  template <class D>
  __device__ __forceinline__ static void step_mma(const Smem& sm, int stage, int slice, D (&d)[kMi][kNc][4], bool first) {
    // (A descriptor's address field is bits 0-13 of address >> 4: offsets inside the stage add to it.)
    const u64 rows0 = wgmma_desc_sw128(sm.a(stage));
    const u64 weights0 = wgmma_desc_sw128(sm.b(stage) + slice * WN * 128);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < BK / 32; ++k) {
#pragma unroll
      for (int mi = 0; mi < kMi; ++mi) {
        WgmmaSS8<Code, BM>::run(d[mi], weights0 + (mi * 64 * 128 + 32 * k) / 16, rows0 + 32 * k / 16, first && k == 0 ? 0 : 1);
      }
    }
    wgmma_commit();
  }

  // The steps kb0 .. kb1 of 4-bit weights, each: its wgmmas (`issue(stage, frag, kb)`); `settle(stage,
  // previous stage)`; the next step's fragments widened into the other buffer while the wgmmas run (the
  // loop unrolled by two keeps the buffers apart in registers; `settle` has waited for the wgmmas that
  // read that buffer); `finish(stage)`. Returns the last step's stage.
  template <class Issue, class Settle, class Finish>
  __device__ __forceinline__ static int widened_loop(const Smem& sm, int slice, int kb0, int kb1, Ring& r, Issue&& issue,
                                                     Settle&& settle, Finish&& finish) {
    Frag f0, f1;
    int prev = -1;
    auto step = [&](Frag& cur, Frag& next, int kb) {
      const int stage = r.stage;
      issue(stage, cur, kb);
      settle(stage, prev);
      r.next();
      if (kb + 1 < kb1) {
        mbar_wait(sm.full + 8 * r.stage, r.phase);
        load_frag(sm, r.stage, slice, next);
      }
      finish(stage);
      prev = stage;
    };
    if (kb0 < kb1) {
      mbar_wait(sm.full + 8 * r.stage, r.phase);
      load_frag(sm, r.stage, slice, f0);
    }
    for (int kb = kb0; kb < kb1; kb += 2) {
      step(f0, f1, kb);
      if (kb + 1 < kb1) step(f1, f0, kb + 1);
    }
    return prev;
  }

  // Channel and tensor scales: steps kb0 .. kb1 into the accumulators; stage s is released once step
  // s + 1 is committed and step s is done.
  __device__ __forceinline__ static void plain_loop(const Smem& sm, int slice, int kb0, int kb1, Ring& r,
                                                    Acc (&acc)[kMi][kNc][4]) {
    if (kb0 == kb1) zero(acc);  // (no K steps: the plan never makes such a unit)
    if constexpr (kWiden) {
      const int last = widened_loop(
          sm, slice, kb0, kb1, r, [&](int stage, const Frag& f, int kb) { step_rs(sm, stage, f, acc, kb == kb0); },
          [&](int, int prev) {
            if (prev >= 0) {
              wgmma_wait<1>();
              release(sm, prev);
            }
          },
          [](int) {});
      wgmma_wait<0>();
      if (last >= 0) release(sm, last);
    } else {
      int prev = -1;
      for (int kb = kb0; kb < kb1; ++kb) {
        mbar_wait(sm.full + 8 * r.stage, r.phase);
        step_mma(sm, r.stage, slice, acc, kb == kb0);
        if (prev >= 0) {
          wgmma_wait<1>();
          release(sm, prev);
        }
        prev = r.stage;
        r.next();
      }
      wgmma_wait<0>();
      if (prev >= 0) release(sm, prev);
    }
  }

  // Promoted steps: each step's sums into `part`, then acc += part * the step's scales: block scale times
  // row scale (block scales), or the channel's group scale (4-bit weights).
  __device__ __forceinline__ static void promoted_loop(const Smem& sm, int slice, int lane, int kb0, int kb1, Ring& r,
                                                       Acc (&acc)[kMi][kNc][4]) {
    Part part[kMi][kNc][4];
    zero(acc);
    // After a step's wgmmas were issued: its scales, the wait, the release and the promotion.
    auto promote = [&](int stage) {
      const StepScales sc = step_scales(sm, stage, slice, lane);
      wgmma_wait<0>();
      release(sm, stage);
      apply(sc, part, acc);
    };
    if constexpr (kWiden) {
      widened_loop(
          sm, slice, kb0, kb1, r, [&](int stage, const Frag& f, int) { step_rs(sm, stage, f, part, true); }, [](int, int) {},
          promote);
    } else {
      for (int kb = kb0; kb < kb1; ++kb) {
        mbar_wait(sm.full + 8 * r.stage, r.phase);
        step_mma(sm, r.stage, slice, part, true);
        promote(r.stage);
        r.next();
      }
    }
  }

  // One step's scales: rs[c] the block scale times rows 8 c + 2 (lane % 4) + {0, 1}'s scales (block
  // scales), ws[mi] channels warp * 16 + lane / 4 + {0, 8} of block mi (group scales, times the unit of
  // widened float codes).
  struct StepScales {
    float2 rs[kRowPromote ? kNc : 1], ws[kMi];
  };
  __device__ __forceinline__ static StepScales step_scales(const Smem& sm, int stage, int slice, int lane) {
    const int warp = (threadIdx.x / 32) & 3;
    const u32 sc = sm.scales(stage);
    StepScales s;
    if constexpr (kRowPromote) {
      const float b = __uint_as_float(lds32(sc + 4 * (BM + slice)));
#pragma unroll
      for (int c = 0; c < kNc; ++c) {
        s.rs[c] = lds_f2(sc + 4 * (8 * c + 2 * (lane & 3)));
        s.rs[c].x *= b;
        s.rs[c].y *= b;
      }
    } else {
#pragma unroll
      for (int mi = 0; mi < kMi; ++mi) {
        const u32 at = sc + 4 * (slice * WN + mi * 64 + warp * 16 + (lane >> 2));
        s.ws[mi] = make_float2(__uint_as_float(lds32(at)) * kUnit, __uint_as_float(lds32(at + 32)) * kUnit);
      }
    }
    return s;
  }

  // acc += part times the step's scales `s`.
  __device__ __forceinline__ static void apply(const StepScales& s, const Part (&part)[kMi][kNc][4], Acc (&acc)[kMi][kNc][4]) {
#pragma unroll
    for (int c = 0; c < kNc; ++c) {
#pragma unroll
      for (int mi = 0; mi < kMi; ++mi) {
        // Element e of a quad: channel half e / 2, row e % 2.
        const float f[4] = {kRowPromote ? s.rs[c].x : s.ws[mi].x, kRowPromote ? s.rs[c].y : s.ws[mi].x,
                            kRowPromote ? s.rs[c].x : s.ws[mi].y, kRowPromote ? s.rs[c].y : s.ws[mi].y};
#pragma unroll
        for (int e = 0; e < 4; ++e)
          acc[mi][c][e] = fmaf(static_cast<float>(part[mi][c][e]), f[e], acc[mi][c][e]);
      }
    }
  }

  // The f32 value of one accumulator (split-K sums of s8 codes stay exact integers).
  __device__ __forceinline__ static float to_f32(Acc v) { return static_cast<float>(v); }

  // The slot of row `row` of the launch (MoE: a gathered row of a valid slot id), or -1; dense: the
  // row itself below M.
  __device__ __forceinline__ static int slot_of(const GemmParams& p, int row) {
    if constexpr (kMoe) {
      if (row >= p.a_rows) return -1;
      const int id = __ldg(p.route + row);
      return id >= 0 && id < p.m * p.top_k ? id : -1;
    } else {
      return row < p.m ? row : -1;
    }
  }

  // The row of C that row `row` writes, or -1: its slot's, or with kFlagGatheredC its own.
  __device__ __forceinline__ static int c_row(const GemmParams& p, int row) {
    if (kMoe && (p.flags & kFlagGatheredC) != 0) return row < p.a_rows ? row : -1;
    return slot_of(p, row);
  }

  // MoE: the slot ids and scales of this thread's rows of C (rows m0 + 8 c + 2 (lane % 4) + {0, 1})
  // into L1 while the main loop runs, for the epilogue's dependent loads.
  __device__ __forceinline__ static void prefetch_rows(const GemmParams& p, int m0, int lane) {
#pragma unroll
    for (int c = 0; c < kNc; ++c) {
      const int row = m0 + 8 * c + 2 * (lane & 3);
      if (row < p.a_rows) {
        prefetch_l1(p.route + row);
        if constexpr (!kRowPromote) prefetch_l1(p.a_scales + row * static_cast<long long>(p.a_scale_stride));
      }
    }
  }

  // The f32 factor of row `row`: its activation scale (none where block scales promoted it) and, MoE,
  // the router's weight of its slot; 0 for a row of no slot.
  __device__ __forceinline__ static float row_factor(const GemmParams& p, int row) {
    const int slot = slot_of(p, row);
    if (slot < 0) return 0.0f;
    float f = kRowPromote ? 1.0f : __ldg(p.a_scales + row * static_cast<long long>(p.a_scale_stride));
    if constexpr (kMoe) {
      if (p.row_weights != nullptr) f *= __ldg(p.row_weights + slot);
    }
    return f;
  }

  // C of one tile's WN channels from n0 (rows m0.., expert e's): each 64 x kCRows box finished in f32
  // (row factor, channel factor, bias, activation), rounded, written transposed into a C buffer and
  // stored by TMA (MoE: by the warpgroup's 16-byte stores, each row to its slot's row); without
  // kFlagTmaStoreC by plain stores of the rows written and the channels below N.
  __device__ __forceinline__ static void epilogue(const GemmParams& p, const Smem& sm, int cw, int warp, int lane, int e,
                                                  int m0, int n0, const Acc (&acc)[kMi][kNc][4], int& boxes) {
    const bool tma = (p.flags & kFlagTmaStoreC) != 0;
    // Row factors of chunk c: rows 8 c + 2 (lane % 4) + {0, 1}.
    auto row_scales = [&](int c) {
      if constexpr (kRowPromote && !kMoe) return make_float2(1.0f, 1.0f);
      const int row = m0 + 8 * c + 2 * (lane & 3);
      return make_float2(row_factor(p, row), row_factor(p, row + 1));
    };
#pragma unroll
    for (int mi = 0; mi < kMi; ++mi) {
      // This lane's channels: warp * 16 + lane / 4 (+ 8) of the m64 block.
      const int ch0 = n0 + mi * 64 + warp * 16 + (lane >> 2);
      // (Unpromoted widened float codes: their unit here.)
      constexpr float kCUnit = kGroupPromote ? 1.0f : kUnit;
      float cf[2] = {kCUnit, kCUnit}, bias[2] = {0.0f, 0.0f};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int ch = ch0 + 8 * h;
        if (ch < p.n) {
          const long long at = static_cast<long long>(e) * p.n + ch;  // (expert e's channel)
          if constexpr (Q::kChannelScale) cf[h] = __ldg(p.channel + at) * kCUnit;
          if constexpr (Q::kBias) bias[h] = H::to_float(__ldg(static_cast<const u16*>(p.bias) + at));
        }
      }
      // The C pair of chunk c, channel half h (rows 8 c + 2 (lane % 4) + {0, 1}).
      auto pair = [&](int c, int h, float2 rs) {
        const float v0 = to_f32(acc[mi][c][2 * h]) * rs.x, v1 = to_f32(acc[mi][c][2 * h + 1]) * rs.y;
        return H::from_floats(apply_epilogue<Q::kEpilogue>(v0 * cf[h] + bias[h]),
                              apply_epilogue<Q::kEpilogue>(v1 * cf[h] + bias[h]));
      };
      if (!tma) {
        u16* c16 = static_cast<u16*>(p.c);
#pragma unroll
        for (int c = 0; c < kNc; ++c) {
          const float2 rs = row_scales(c);
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const u32 v = pair(c, h, rs);
            const int row = m0 + 8 * c + 2 * (lane & 3), ch = ch0 + 8 * h;
            const int r0 = c_row(p, row), r1 = c_row(p, row + 1);
            if (ch < p.n && r0 >= 0) c16[static_cast<long long>(r0) * p.ldc + ch] = static_cast<u16>(v & 0xFFFFu);
            if (ch < p.n && r1 >= 0) c16[static_cast<long long>(r1) * p.ldc + ch] = static_cast<u16>(v >> 16);
          }
        }
        continue;
      }
#pragma unroll
      for (int box = 0; box < BM / kCRows; ++box) {
        const u32 buf = sm.cbox + (cw * kCBoxes + (boxes & 1)) * kCBoxBytes;
        if ((threadIdx.x & 127) == 0) bulk_wait_read<kCBoxes - 1>();  // this buffer's last store has read it
        named_barrier_sync(2 + cw, 128);
        // Box rows 0..kCRows: chunks box * kCRows / 8 + q. stmatrix: matrix j = (channel half j & 1, chunk
        // q + (j >> 1)); lane 8 j + i addresses row 8 (q + (j >> 1)) + i of the box, its 16 bytes at
        // channel chunk 2 warp + (j & 1), swizzled by the row (the 128-byte swizzle of the C map).
        const int mj = lane >> 3, ri = lane & 7;
        if constexpr (kCRows >= 16) {
#pragma unroll
          for (int q = 0; q < kCRows / 8; q += 2) {
            const int c = box * (kCRows / 8) + q;
            const int row = 8 * (q + (mj >> 1)) + ri;
            const u32 at = buf + row * 128 + (((2 * warp + (mj & 1)) ^ (row & 7)) << 4);
            const float2 r0 = row_scales(c), r1 = row_scales(c + 1);
            stmatrix_x4_trans(at, pair(c, 0, r0), pair(c, 1, r0), pair(c + 1, 0, r1), pair(c + 1, 1, r1));
          }
        } else {
          const int row = ri;
          const u32 at = buf + row * 128 + (((2 * warp + (mj & 1)) ^ (row & 7)) << 4);
          const float2 r0 = row_scales(0);
          stmatrix_x2_trans(at, pair(0, 0, r0), pair(0, 1, r0));
        }
        if constexpr (kMoe) {
          // Each thread 16-byte chunks of the box's rows, to their slots' rows of C (the buffer is next
          // written after two more barriers of this warpgroup, which every thread reaches after its loads).
          named_barrier_sync(2 + cw, 128);
          for (int q = threadIdx.x & 127; q < kCRows * 8; q += 128) {
            const int row = q >> 3, chunk = q & 7, col = n0 + mi * 64 + 8 * chunk;
            const int out = c_row(p, m0 + box * kCRows + row);
            const uint4 v = lds128(buf + row * 128 + ((chunk ^ (row & 7)) << 4));
            if (out >= 0 && col < p.n) *reinterpret_cast<uint4*>(static_cast<u16*>(p.c) + static_cast<long long>(out) * p.ldc + col) = v;
          }
        } else {
          fence_proxy_async_shared();
          named_barrier_sync(2 + cw, 128);
          if ((threadIdx.x & 127) == 0) {
            tma_store_2d(&p.c_map, n0 + mi * 64, m0 + box * kCRows, buf);
            bulk_commit();
          }
        }
        ++boxes;
      }
    }
  }
};

}  // namespace humming
