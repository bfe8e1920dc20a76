// humming: one BK step of the mma.sync main loop (sm_80+). Per k16 slab a warp loads its packed words
// (one shared load per bit-plane), dequantizes them in registers (weight policy), loads its rows of A
// with ldmatrix and issues mma.sync m16n8k16 with f32 accumulation (activation policy).
//
// Swap-AB tiles (warps of 8 or 16 rows): the dequantized weights are the mma's A operand. With the scale
// on the accumulators (kScaleOnAcc), the sums of each group's slabs (all four, or two for groups of 32)
// start from zero and are scaled once (16 fma per n8 tile and thread); with offset folding (kFold) one
// extra mma per slab and n8 tile of rows supplies the offset the dequantization skipped, and starts each
// group's channel tile sums.
#pragma once
#include "traits.cuh"

namespace humming {

template <class K>
struct SyncStage {
  using Tl = typename K::Tl;
  using L = typename K::L;
  using Act = typename K::Act;
  using W = typename K::W;
  using Q = typename K::Q;
  using T = typename K::T;
  static constexpr int kTokTiles = K::kTokTiles;
  static constexpr int kAccN = K::kAccN;
  static constexpr bool kFold = K::kFold;
  static constexpr bool kScaleOnAcc = K::kScaleOnAcc;
  static constexpr int kGS = K::kAccGroupSlabs;  // slabs per group scale (kScaleOnAcc)
  static constexpr int kGroups = kScaleOnAcc ? 4 / kGS : 1;

  // kFold: the A operands of the stage's four slabs up front, and per group the folded offsets' term of
  // each n8 tile of rows (equal for every channel), which starts the group's channel tile sums.
  __device__ __forceinline__ static void fold_terms(u32 (&a_stage)[kFold ? 4 : 1][2 * kTokTiles],
                                                    float (&fold_sum)[kFold ? kGroups : 1][kFold ? kTokTiles : 1][4],
                                                    u32 a_tile,
                                                    const WarpPlace& w) {
    using Fold = OffsetFold<Q>;
    constexpr u32 nf[4] = {Fold::frag(0), Fold::frag(1), Fold::frag(2), Fold::frag(3)};
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      Act::template load_swapped<kTokTiles, Tl::WM>(a_stage[kk], a_tile, kk, w.wm, w.lane);
      if constexpr (Fold::kHiRes > 0) {
#pragma unroll
        for (int tt = 0; tt < kTokTiles; ++tt) {
          a_stage[kk][2 * tt + 1] = Act::scale(a_stage[kk][2 * tt + 1], Fold::kHiScale);
        }
      }
    }
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
#pragma unroll
      for (int tt = 0; tt < kTokTiles; ++tt) {
        Act::mma_zero(fold_sum[g][tt], nf, a_stage[g * kGS][2 * tt], a_stage[g * kGS][2 * tt + 1]);
#pragma unroll
        for (int kk = g * kGS + 1; kk < (g + 1) * kGS; ++kk) {
          Act::mma(fold_sum[g][tt], nf, a_stage[kk][2 * tt], a_stage[kk][2 * tt + 1]);
        }
      }
    }
  }

  // kScaleOnAcc: acc += scale(channel) * part for the group of slabs g * kGS .. (g + 1) * kGS - 1 of
  // this warp's 64-deep slice.
  __device__ __forceinline__ static void scale_onto(typename K::Acc& acc, const float (&part)[kAccN][4], u32 st,
                                                    const WarpPlace& w, int g) {
    const int idx =
        K::scale_index(Q::kGroup < Tl::BK ? (w.kw * 64 + g * kGS * 16) / Q::kGroup : 0, w.unit_n, w.lane);
    const uint4 v = lds128(st + L::kSOffset + 2 * idx);
    const u32 sv[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int mt = 0; mt < 4; ++mt) {
      const float s0 = Act::to_float(static_cast<u16>(sv[mt] & 0xFFFFu));  // channel mt*16 + lane/4
      const float s1 = Act::to_float(static_cast<u16>(sv[mt] >> 16));      // channel mt*16 + lane/4 + 8
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

  // The step at stage `st`: `unit` is this warp's packed unit, `a_tile` its 64-deep slice of A;
  // load_slab(in, kk) fetches slab kk's words, scales and zero points (mainloop.cuh).
  template <class LoadSlab, class RowScale>
  __device__ __forceinline__ static void step(typename K::Acc& acc, u32 st, u32 a_tile, const WarpPlace& w,
                                              LoadSlab&& load_slab, RowScale&&) {
    float part[kScaleOnAcc ? kAccN : 1][4];  // this stage's sums, before the group scale (kScaleOnAcc)
    u32 a_stage[kFold ? 4 : 1][2 * kTokTiles];
    float fold_sum[kFold ? kGroups : 1][kFold ? kTokTiles : 1][4];
    if constexpr (kFold) fold_terms(a_stage, fold_sum, a_tile, w);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      typename W::Slab in;
      load_slab(in, kk);
      u32 frag[16];
      W::template dequant<!kScaleOnAcc, K::kSwapAB, 16, kFold>(in, frag);
      if constexpr (K::kSwapAB) {
        u32 a[2 * kTokTiles];
        if constexpr (kFold) {
#pragma unroll
          for (int i = 0; i < 2 * kTokTiles; ++i) a[i] = a_stage[kk][i];
        } else {
          Act::template load_swapped<kTokTiles, Tl::WM>(a, a_tile, kk, w.wm, w.lane);
        }
#pragma unroll
        for (int mt = 0; mt < 4; ++mt) {
          // Channels mt*16 + lane/4 (+ 8) are the weight pairs nt = 2 mt (+ 1) of the B layout.
          const u32(&wf)[4] = *reinterpret_cast<const u32(*)[4]>(&frag[4 * mt]);
#pragma unroll
          for (int tt = 0; tt < kTokTiles; ++tt) {
            if constexpr (kScaleOnAcc) {
              if (kFold && kk % kGS == 0) {
                Act::mma_c(part[tt * 4 + mt], wf, a[2 * tt], a[2 * tt + 1], fold_sum[kFold ? kk / kGS : 0][kFold ? tt : 0]);
              } else if (kk % kGS == 0) {
                Act::mma_zero(part[tt * 4 + mt], wf, a[2 * tt], a[2 * tt + 1]);
              } else {
                Act::mma(part[tt * 4 + mt], wf, a[2 * tt], a[2 * tt + 1]);
              }
            } else {
              Act::mma(acc[0][tt * 4 + mt], wf, a[2 * tt], a[2 * tt + 1]);
            }
          }
        }
      } else {
#pragma unroll
        for (int mt = 0; mt < K::kMTiles; ++mt) {
          u32 a[4];
          Act::load_rows(a, a_tile, w.wm * Tl::WM + mt * 16, kk, w.lane);
#pragma unroll
          for (int nt = 0; nt < 8; ++nt) Act::mma(acc[mt][nt], a, frag[2 * nt], frag[2 * nt + 1]);
        }
      }
      if constexpr (kScaleOnAcc) {
        if (kk % kGS == kGS - 1) scale_onto(acc, part, st, w, kk / kGS);
      }
    }
  }
};

}  // namespace humming
