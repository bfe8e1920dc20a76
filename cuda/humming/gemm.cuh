// humming: the quantized GEMM kernel, C[M, N] = A[M, K] * dequant(B)[N, K]^T, composed of collectives:
//
//   scheduler.cuh   which output tiles and K ranges (segments) a CTA works on: data-parallel, split-K,
//                   stream-K
//   pipeline.cuh    the shared-memory stage ring: cp.async, bulk copies, TMA with a producer warpgroup
//   mainloop.cuh    the BK steps of a segment: mma.sync (mainloop_sync.cuh) or wgmma
//                   (mainloop_wgmma.cuh), through the activation policy (operand.cuh) and the weight
//                   policy (dequant.cuh)
//   reduction.cuh   the K reductions: across the warps along K, and across K splits through the
//                   workspace
//   atomic.cuh      the K splits added into C with atomics
//   epilogue.cuh    channel scale, bias, activation; C written from registers or staged in shared
//                   memory (with the cluster sum of K splits)
//   rows.cuh        which rows of A and C a tile covers, and whose weights (dense or a MoE layout)
//
// One CTA computes a BM x BN tile of C (traits.cuh has the warp layout and every derived constant).
#pragma once
#include "mainloop.cuh"
#include "reduction.cuh"
#include "scheduler.cuh"

namespace humming {

template <class Q, class Tl, class Act = Act16<typename Q::T>, class W = IntWeights<Q>, class R = DenseRows>
struct Gemm : KernelTraits<Q, Tl, Act, W, R> {
  using K = KernelTraits<Q, Tl, Act, W, R>;
  using Acc = typename K::Acc;
  using Reduce = KReduction<K>;
  using Epi = Epilogue<K>;

  __device__ __forceinline__ static void run(const GemmParams& p) {
    if (p.flags & kFlagEarlyTrigger) grid_launch_dependents();
    TileScheduler<Tl>::template for_each_segment<!(K::kWgmma || Tl::WM > 16)>(
        p, [&](const Segment& s) { tile(p, s); });
  }

  // The segment's rows; with a MoE layout, skipped where the tile holds no rows, else run on a copy of
  // the parameters that points at the tile's expert.
  __device__ __forceinline__ static void tile(const GemmParams& p, const Segment& s) {
    TileRows rows;
    if (!R::template begin<Tl::BM>(p, s.tile_m, rows)) return;
    if constexpr (R::kMoe) {
      GemmParams q = p;
      select_expert(q, rows.expert);
      segment(q, s, rows);
    } else {
      segment(p, s, rows);
    }
  }

  __device__ __forceinline__ static WarpPlace place(const GemmParams& p, const Segment& seg, const TileRows& rows) {
    WarpPlace w;
    w.lane = threadIdx.x & 31;
    w.warp = threadIdx.x >> 5;
    w.wn = w.warp % K::kWarpsN;
    w.wm = (w.warp / K::kWarpsN) % K::kWarpsM;
    w.kw = w.warp / (K::kWarpsN * K::kWarpsM);
    w.producer = K::kProducer && threadIdx.x >= K::kThreads;
    w.n0 = seg.tile_n * Tl::BN;
    w.m0 = rows.m0;
    w.rows = rows;
    w.unit_n = w.wn / K::kHalves;
    w.unit_part = w.wn % K::kHalves;
    w.n_valid = w.n0 + w.wn * Tl::WN < p.n;
    return w;
  }

  // kFlagAtomicC: this launch adds its K splits into C (not with stream-K or a cluster). Recomputed
  // where needed rather than kept in a register across the main loop.
  __device__ __forceinline__ static bool atomic_launch(const GemmParams& p, const Segment& seg) {
    return K::kAtomicC && seg.splits > 1 && (p.flags & (kFlagAtomicC | kFlagStreamK | kFlagClusterSplitK)) == kFlagAtomicC;
  }
  // Split 0 claims the zeroing of C at its start (unless kFlagAtomicNoStartClaim).
  __device__ __forceinline__ static bool start_claim(const GemmParams& p, const Segment& seg) {
    return atomic_launch(p, seg) && (p.flags & kFlagAtomicNoStartClaim) == 0 && seg.split == 0;
  }

  // One segment: the main loop into the accumulators, then the K reductions and the epilogue.
  __device__ __forceinline__ static void segment(const GemmParams& p, const Segment& seg, const TileRows& rows) {
    extern __shared__ __align__(128) char smem[];
    if (!K::kWgmma && seg.ring > 0) {
      // The previous segment's shared reads and writes (the K-warp sum's generic stores included)
      // before this one's copies into the same buffers. Its mbarriers go on with their phases.
      fence_proxy_async_shared();
      __syncthreads();
    }
    const WarpPlace w = place(p, seg, rows);
    Acc acc;
    K::zero_acc(acc);
    u32 ch_s[4] = {0, 0, 0, 0}, ch_z[4] = {0, 0, 0, 0};
    Mainloop<K>::channel_values(p, w, ch_s, ch_z);
    StagePipeline<K> pipe(p, rows, w.n0, seg, smem_addr(smem));
    if (!pipe.prologue(p, w.m0, seg.ring, w.producer)) return;
    if constexpr (K::kAtomicC) {
      // (After griddepcontrol.wait: the previous kernel may still read this C.)
      if (start_claim(p, seg)) AtomicSplitK<K>::claim_at_start(p, seg.tile, w.m0, w.n0);
    }
    Mainloop<K>::run(p, seg, w, acc, pipe, ch_s, ch_z);
    // kFlagAtomicC: thread 0 reads the tile's lock word now (ld_split_acquire_gpu: the acquire is
    // completed where the value is used, so that the L2 round trip overlaps the K-warp sum and the f32
    // tile's shared stores).
    int lock_seen = 0;
    const bool atomic_c = atomic_launch(p, seg);
    // (Read only where the claim ran: its thread wrote it before the claim's barriers.)
    const bool zeroed_here = K::kAtomicC && start_claim(p, seg) && AtomicSplitK<K>::zeroed_here() != 0;
    if constexpr (K::kAtomicC) {
      if (atomic_c && !zeroed_here && threadIdx.x == 0) lock_seen = ld_split_acquire_gpu(p.locks + seg.tile);
    }
    pipe.drain();
    if constexpr (K::kWgmma) wgmma_wait<0>();
    // The next kernel may start (and stream its first weights) once every CTA here is past its main
    // loop (a stream-K CTA: past its first segment's), unless kFlagEarlyTrigger let it at the start.
    grid_launch_dependents();
    Reduce::sum_warps_k(acc, w);
    finish(p, seg, w, acc, atomic_c, zeroed_here, lock_seen);
  }

  // After the K-warp sum: the K splits' reduction, if any, and C.
  __device__ __forceinline__ static void finish(const GemmParams& p, const Segment& seg, const WarpPlace& w, Acc& acc,
                                                bool atomic_c, bool zeroed_here, int lock_seen) {
    if constexpr (K::kStaged) {
      // The runtime sets the flag only with a cluster launch of 2 to kMaxClusterSplits splits.
      const bool cluster = seg.splits > 1 && seg.splits <= kMaxClusterSplits && (p.flags & kFlagClusterSplitK) != 0;
      if (seg.splits == 1 || cluster) {
        Epi::staged(p, acc, w.kw == 0 && w.n_valid, w, cluster ? seg.split : 0, cluster ? seg.splits : 1);
        return;
      }
    }
    if constexpr (K::kAtomicC) {
      if (atomic_c) {
        Epi::template staged<true>(p, acc, w.kw == 0 && w.n_valid, w, 0, 1, seg.tile, seg.split, seg.splits, zeroed_here, lock_seen);
        return;
      }
    }
    if (seg.splits > 1) {
      // Publish this split's partial tile and take the tile's ticket (kept in this function: as a
      // call of its own it made ptxas allocate the 16-row tiles' main loops worse).
      __shared__ int s_last;
      constexpr int kTileFloats = Tl::BM * Tl::BN;
      static_assert(K::kAccThreads * K::kQuads * 4 == kTileFloats, "a partial tile is exactly the accumulators");
      const int tile = seg.tile;
      const long long stride = static_cast<long long>(seg.tiles) * kTileFloats;
      const int t = threadIdx.x;  // < kAccThreads when kw == 0
      float* ws_tile = p.workspace + static_cast<long long>(tile) * kTileFloats;  // split 0's partial
      if (w.kw == 0 && w.n_valid) {
        float4* ws = reinterpret_cast<float4*>(ws_tile + seg.split * stride) + t;
#pragma unroll
        for (int mt = 0; mt < K::kMTiles; ++mt)
#pragma unroll
          for (int nt = 0; nt < K::kAccN; ++nt) {
            const float(&a)[4] = acc[mt][nt];
            __stcg(ws + (mt * K::kAccN + nt) * K::kAccThreads, make_float4(a[0], a[1], a[2], a[3]));
          }
        if constexpr (K::kBulkTail) fence_proxy_async_global();  // the last CTA reads them by bulk copy
      }
      K::sync_compute();
      if (threadIdx.x == 0) s_last = atomic_add_acq_rel_gpu(p.locks + tile, 1) == seg.splits - 1;
      K::sync_compute();
      if (!s_last) return;
      if (threadIdx.x == 0) p.locks[tile] = 0;
      if constexpr (K::kBulkTail) {
        Reduce::bulk_tail(acc, ws_tile, stride, seg.splits, w.kw == 0 && w.n_valid);
        if constexpr (K::kStaged) {
          Epi::staged(p, acc, w.kw == 0 && w.n_valid, w, 0, 1);
          return;
        }
      } else if constexpr (K::kSwapAB && !K::kWgmma && K::kTokTiles == 1) {
        Reduce::wide_tail(p, ws_tile, stride, seg.splits, w);
        return;
      } else {
        if (w.kw != 0 || !w.n_valid) return;
        Reduce::register_tail(acc, ws_tile, stride, seg.splits);
      }
    }
    if (w.kw != 0 || !w.n_valid) return;
    Epi::store_registers(p, acc, w);
  }
};

}  // namespace humming
