// humming: the main loop over a segment's BK steps: the stage ring (pipeline.cuh) feeds each step to the
// tile's math, mma.sync (mainloop_sync.cuh; mainloop_sync8.cuh for 8-bit activations) or wgmma
// (mainloop_wgmma.cuh). The shared-memory inputs of
// each k16 slab (packed words, and the scale and zero-point rows of the stage or the per-channel
// values) are fetched here for both.
#pragma once
#include "mainloop_sync.cuh"
#include "mainloop_sync8.cuh"
#include "mainloop_wgmma.cuh"
#include "mainloop_wgmma8.cuh"
#include "pipeline.cuh"

namespace humming {

// The wgmma step's carried state where the tile has no wgmma.
struct NoCarryStep {
  struct Carry {};
};

template <class K>
struct Mainloop {
  using Tl = typename K::Tl;
  using L = typename K::L;
  using Q = typename K::Q;
  using W = typename K::W;
  using Slab = typename W::Slab;

  // Per-channel values used on B (zero points, float offsets, and the scale with a float offset),
  // loaded once, in the permuted order of dequant.cuh: this lane's 8 channels n = nt*8 + lane/4.
  __device__ __forceinline__ static void channel_values(const GemmParams& p, const WarpPlace& w, u32 (&ch_s)[4],
                                                        u32 (&ch_z)[4]) {
    if constexpr (Q::kGroup == 0) {
      if (w.n_valid) {
        const int off = w.n0 + w.unit_n * 64 + (w.lane >> 2) * 8;
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
  }

  // The inputs of k16 slab kk for one warp: its packed words, and the scales and zero points of its
  // lane's 8 channels (group rows of stage `st`, or the per-channel values). `same_row`: the slab lies
  // in the group row already in `in` (groups of 64 or more, not the warp's first slab), whose scales
  // and zero points are kept instead of loaded again.
  __device__ __forceinline__ static void load_slab(Slab& in, u32 st, u32 unit, int kk, const WarpPlace& w,
                                                   const u32 (&ch_s)[4], const u32 (&ch_z)[4], bool same_row) {
    W::load_words(in, unit, kk, w.lane);
    if (Q::kGroup >= 64 && same_row) return;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      in.sw[i] = 0;
      in.zw[i] = 0;
    }
    if constexpr (Q::kGroup > 0) {
      const int idx = K::scale_index(Q::kGroup < Tl::BK ? (w.kw * 64 + kk * 16) / Q::kGroup : 0, w.unit_n, w.lane);
      if constexpr (!K::kScaleOnAcc) {
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

  // Activation scales per group (Q::kActGroup): the scale of tile row r's row of A in group g, 0 for a
  // row that reads none (its codes are zero-filled).
  __device__ __forceinline__ static float act_group_scale(const GemmParams& p, const WarpPlace& w, int r, int g) {
    int src;
    return K::Rows::read_row(p, w.rows, r, src) ? __ldg(p.a_scales + static_cast<long long>(src) * p.a_scale_stride + g)
                                                : 0.0f;
  }
  // K extent of an activation group (1 where there are none: the group index is then unused).
  static constexpr int kActGroupK = Q::kActGroup > 0 ? Q::kActGroup : 1;

  // Every BK step of the segment into `acc`.
  __device__ __forceinline__ static void run(const GemmParams& p, const Segment& seg, const WarpPlace& w,
                                             typename K::Acc& acc, StagePipeline<K>& pipe, const u32 (&ch_s)[4],
                                             const u32 (&ch_z)[4]) {
    using WgmmaStep = typename Pick<K::kWgmma, typename K::Act::template WgmmaStep<K>, NoCarryStep>::type;
    typename WgmmaStep::Carry carry;
    for (int it = 0; it < pipe.iters; ++it) {
      const int prev_stage = pipe.read_stage == 0 ? Tl::STAGES - 1 : pipe.read_stage - 1;  // the stage of step it - 1
      const u32 st = pipe.acquire(p, it);
      const int k0 = (seg.it_begin + it) * Tl::BK;
      // wgmma: every warp of the warpgroup takes part (channels past N are zero-filled and never
      // stored). A warp skips only in the last BK step of K (K is a multiple of 64), where nothing is
      // refilled: the TMA stage hand-off relies on it (a skipping warp does not release a stage).
      if ((!K::kWgmma && !w.n_valid) || k0 + w.kw * 64 >= p.k) continue;
      const u32 unit = st + L::kBOffset + (w.kw * L::kWarpsN + w.unit_n) * L::kUnitBytes;
      const u32 a_tile = st + L::kAOffset + w.kw * L::kASlabBytes;
      // (A warp's 64-deep slice lies in one activation group.)
      const int group = (k0 + w.kw * 64) / kActGroupK;
      auto row_scale = [&](int r) { return act_group_scale(p, w, r, group); };
      if constexpr (K::kWgmma) {
        WgmmaStep::step(
            acc, a_tile, w, [&](Slab& in, int kk, bool same_row) { load_slab(in, st, unit, kk, w, ch_s, ch_z, same_row); },
            [&](int kk) {
              if constexpr (K::kTma) pipe.release(p, w.m0, it, kk, prev_stage);
            },
            row_scale, carry);
      } else {
        K::Act::template SyncStep<K>::step(
            acc, st, a_tile, w, [&](Slab& in, int kk) { load_slab(in, st, unit, kk, w, ch_s, ch_z, false); },
            row_scale);
      }
    }
    if constexpr (K::kWgmma) WgmmaStep::drain(acc, carry);
  }
};

}  // namespace humming
