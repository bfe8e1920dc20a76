// humming: the K reductions after the main loop.
//
// - Across the warps along K of one CTA (BK > 64), through shared memory (sum_warps_k).
// - Across the K splits of an output tile (gridDim.z = splits > 1), through the global workspace: every
//   split stores its f32 partial tile, fragment-major (float4 q of accumulating thread t at
//   q * kAccThreads + t, coalesced 16-byte stores), and takes the tile's ticket (gemm.cuh, Gemm::finish);
//   the last split to finish the tile sums every split's partial in split order 0, 1, ...
//   (deterministic, independent of arrival order), writes C and resets the ticket for the next launch.
//   It reads the partials through shared memory by bulk copies (bulk_tail, wgmma on sm_90a), with every
//   thread of the CTA in batches over the splits (wide_tail, the 8-row tile), or with its own 16-byte
//   loads (register_tail).
// The cluster sum and the atomic additions into C are parts of the staged epilogue (epilogue.cuh).
#pragma once
#include "epilogue.cuh"

namespace humming {

template <class K>
struct KReduction {
  using Tl = typename K::Tl;
  using Q = typename K::Q;
  using Acc = typename K::Acc;
  static constexpr int kMTiles = K::kMTiles;
  static constexpr int kAccN = K::kAccN;
  static constexpr int kAccThreads = K::kAccThreads;
  static constexpr int kQuads = K::kQuads;
  static constexpr int kThreads = K::kThreads;

  // Sums the accumulators of the warps along K into those of K-warp 0 (the pipeline buffers are free).
  __device__ __forceinline__ static void sum_warps_k(Acc& acc, const WarpPlace& w) {
    if constexpr (K::kWarpsK > 1) {
      extern __shared__ __align__(128) char smem[];
      K::sync_compute();
      float* red = reinterpret_cast<float*>(smem);
      const int slot_base = (w.wm * K::kWarpsN + w.wn) * kMTiles * kAccN;
      constexpr int kSlots = K::kWarpsM * K::kWarpsN * kMTiles * kAccN;
      if (w.kw > 0) {
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
          for (int nt = 0; nt < kAccN; ++nt)
#pragma unroll
            for (int j = 0; j < 4; ++j)
              red[(((w.kw - 1) * kSlots + slot_base + mt * kAccN + nt) * 4 + j) * 32 + w.lane] = acc[mt][nt][j];
      }
      K::sync_compute();
      if (w.kw == 0) {
#pragma unroll
        for (int k2 = 1; k2 < K::kWarpsK; ++k2)
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
            for (int nt = 0; nt < kAccN; ++nt)
#pragma unroll
              for (int j = 0; j < 4; ++j)
                acc[mt][nt][j] += red[(((k2 - 1) * kSlots + slot_base + mt * kAccN + nt) * 4 + j) * 32 + w.lane];
      }
    }
  }

  // kBulkTail: the last split's CTA sums every split's partial tile (split 0 at `ws0`, the next
  // `split_stride` floats further) into `acc` in split order, 0 + p_0 + p_1 + ..., the sums of the
  // register path bit for bit. Chunk j (split j / kTailChunks, part j % kTailChunks) goes to ring slot
  // j % kTailRing; thread 0 issues the first kTailRing chunks, then refills a slot once every thread has
  // read it. Every thread of the CTA takes part (CTA barriers); `holds`: this thread's accumulators are
  // part of the tile (K-warp 0, channels below N).
  __device__ __forceinline__ static void bulk_tail(Acc& acc, const float* ws0, long long split_stride, int splits,
                                                   bool holds) {
    extern __shared__ __align__(128) char smem[];
    constexpr int kTailRing = K::kTailRing, kTailBytes = K::kTailBytes, kTailChunks = K::kTailChunks,
                  kTailQuads = K::kTailQuads;
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
    K::sync_compute();  // the pipeline's shared memory is free (the K-warp reduction's reads included)
    if (threadIdx.x == 0) {
#pragma unroll
      for (int r = 0; r < kTailRing; ++r) mbar_init(bars + 8 * r, 1);
      mbar_fence_init();
      fence_proxy_async_global();  // the partials the ticket acquired, before the bulk copies read them
      for (int j = 0; j < kTailRing && j < total; ++j) issue(j);
    }
    K::zero_acc(acc);
    K::sync_compute();  // the barriers are initialised before anyone waits on them
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
        K::sync_compute();  // slot read by every thread: it may be refilled
        if (threadIdx.x == 0 && j + kTailRing < total) issue(j + kTailRing);
      }
    }
    // Every phase is complete: the barriers' memory may be reused (the staged epilogue, after its own
    // CTA barrier) once they are invalidated.
    if (threadIdx.x == 0) {
#pragma unroll
      for (int r = 0; r < kTailRing; ++r) mbar_inval(bars + 8 * r);
    }
  }

  // The tail of the swap-AB mma.sync tiles of one n8 tile of rows per warp, in the last split's CTA:
  // every thread (not only the kAccThreads that hold accumulators) takes positions pos = threadIdx.x,
  // + kThreads, ... of the partial tiles, loads that float4 of up to kWideBatch splits at once (one L2
  // round trip per batch), sums them in split order (the sums of the register path bit for bit) and
  // writes the position's four values of C.
  static constexpr int kWideBatch = 8;
  __device__ __forceinline__ static void wide_tail(const GemmParams& p, const float* ws_tile, long long split_stride,
                                                   int splits, const WarpPlace& place) {
    const int n0 = place.n0;
    constexpr int kPositions = kQuads * kAccThreads;
    constexpr int kPer = (kPositions + kThreads - 1) / kThreads;
    const long long stride4 = split_stride / 4;
#pragma unroll 1
    for (int r = 0; r < kPer; ++r) {
      const int pos = static_cast<int>(threadIdx.x) + r * kThreads;
      const int t = pos % kAccThreads, q = pos / kAccThreads;
      const int lane = t & 31, w = t >> 5;
      const int wn = w % K::kWarpsN, wm = w / K::kWarpsN;
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
      Epilogue<K>::store_swapped(p, sum, place.rows, n0, wm, wn, q, lane);
    }
  }

  // The tail by the accumulating threads' own 16-byte loads, in batches of up to kRegTailBatch per
  // thread (a batch costs about one L2 round trip), summed in split order into `acc`.
  __device__ __forceinline__ static void register_tail(Acc& acc, const float* ws_tile, long long split_stride,
                                                       int splits) {
    K::zero_acc(acc);
    constexpr int kBatch = K::kRegTailBatch;
    const float4* ws_t = reinterpret_cast<const float4*>(ws_tile) + threadIdx.x;
    for (int s = 0; s < splits; ++s) {
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
};

}  // namespace humming
