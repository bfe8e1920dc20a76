// humming: one BK step of the mma.sync main loop for 8-bit activations (Act8; swap-AB warp tiles of 8 or
// 16 rows). A warp's 64-deep slice is two k32 slabs, each made of two packed k16 slabs: the weight policy
// turns their code words into the 8-bit operand (bytes), and mma.sync m16n8k32 sums codes times codes in
// f32 (float codes) or s32 (s8). Those partial sums are promoted into the f32 accumulators once per group
// (or per slice without group scales): acc += part * scale * unit. An s32 partial holds at most 64 products
// of |a| <= 128 and |w| <= 255 (below 2^21), so it cannot overflow; K's length only grows the f32 sums.
// Activation scales per group (Q::kActGroup) multiply the promoted sums of their rows.
// 4-bit codes under e4m3 and s8 fold their zero point (see kFold).
#pragma once
#include "traits.cuh"

namespace humming {

template <class K>
struct SyncStage8 {
  using Tl = typename K::Tl;
  using L = typename K::L;
  using Act = typename K::Act;
  using W = typename K::W;
  using Q = typename K::Q;
  using Code = typename Act::Code;
  using Part = typename Act::Part;
  static constexpr int kTokTiles = K::kTokTiles;
  static constexpr int kMt = K::kMt;
  static constexpr int kAccN = K::kAccN;
  static_assert(K::kSwapAB && !K::kWgmma && Tl::WN == 64, "8-bit activations run on swap-AB mma.sync tiles");
  static_assert(Q::kGroup == 0 || Q::kGroup >= 32, "groups of at least one k32 slab");
  // k32 slabs under one promotion: one for groups of 32, else the warp's whole slice.
  static constexpr int kSlabsPerGroup = Q::kGroup == 32 ? 1 : 2;
  static constexpr float kUnit = W::template unit<Code>();
  // Offset folding (IntWeights::folds): the weights' codes are the mma's operand as they are, and
  // fold[tt] = sum of the tile's activations (an mma of all-ones weights, equal in every row) carries
  // the zero point's term: acc += (part - z * fold) * scale * unit.
  static constexpr bool kFold = W::template folds<Code>();

  using RowScales = typename K::RowScales;

  // acc += (part - z * fold) * scale(channel) * kUnit [* scale(row)] for k32 slab j's group (the grid's
  // row of this warp's slice); `in` is a slab of the group (its zero points).
  __device__ __forceinline__ static void promote(typename K::Acc& acc, const Part (&part)[kAccN][4],
                                                 const Part (&fold)[kFold ? kTokTiles : 1][4],
                                                 const typename W::Slab& in, u32 st, const WarpPlace& w, int j,
                                                 const RowScales& rs) {
    float s[kMt][2];
    if constexpr (Q::kScaleOnB) {
      const int idx = K::scale_index(Q::kGroup < Tl::BK ? (w.kw * 64 + j * 32) / Q::kGroup : 0, w.unit_n, w.lane);
      const uint4 v = lds128(st + L::kSOffset + 2 * idx);
      const u32 sv[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt) {
        s[mt][0] = Act::to_float(static_cast<u16>(sv[mt] & 0xFFFFu)) * kUnit;  // channel mt*16 + lane/4
        s[mt][1] = Act::to_float(static_cast<u16>(sv[mt] >> 16)) * kUnit;      // channel mt*16 + lane/4 + 8
      }
    } else {
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt) s[mt][0] = s[mt][1] = kUnit;
    }
#pragma unroll
    for (int mt = 0; mt < kMt; ++mt) {
      // (The partial sums are integers below 2^24, or f32 sums: q - z * f is exact, or one rounding.)
      const float z0 = kFold ? W::zero(in, 2 * mt) : 0.0f, z1 = kFold ? W::zero(in, 2 * mt + 1) : 0.0f;
#pragma unroll
      for (int tt = 0; tt < kTokTiles; ++tt) {
        float(&d)[4] = acc[0][tt * kMt + mt];
        const Part(&q)[4] = part[tt * kMt + mt];
        float v[4] = {static_cast<float>(q[0]), static_cast<float>(q[1]), static_cast<float>(q[2]),
                      static_cast<float>(q[3])};
        if constexpr (kFold) {
          // (The sums' rows are equal: d0 = d2, d1 = d3, the columns of tokens 2 (lane % 4) + 0, 1.)
          const float f0 = static_cast<float>(fold[tt][0]), f1 = static_cast<float>(fold[tt][1]);
          v[0] = fmaf(-z0, f0, v[0]);
          v[1] = fmaf(-z0, f1, v[1]);
          v[2] = fmaf(-z1, f0, v[2]);
          v[3] = fmaf(-z1, f1, v[3]);
        }
        if constexpr (Q::kActGroup > 0) {
          v[0] *= rs[tt][0];
          v[1] *= rs[tt][1];
          v[2] *= rs[tt][0];
          v[3] *= rs[tt][1];
        }
        d[0] = fmaf(s[mt][0], v[0], d[0]);
        d[1] = fmaf(s[mt][0], v[1], d[1]);
        d[2] = fmaf(s[mt][1], v[2], d[2]);
        d[3] = fmaf(s[mt][1], v[3], d[3]);
      }
    }
  }

  // The step at stage `st` (the interface of SyncStage).
  template <class LoadSlab, class RowScale>
  __device__ __forceinline__ static void step(typename K::Acc& acc, u32 st, u32 a_tile, const WarpPlace& w,
                                              LoadSlab&& load_slab, RowScale&& row_scale) {
    Part part[kAccN][4];
    Part fold[kFold ? kTokTiles : 1][4];
    RowScales rs;  // loaded first: their latency hides behind the slice's mmas
    load_row_scales<K>(rs, w, row_scale);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      typename W::Slab lo, hi;
      load_slab(lo, 2 * j);
      load_slab(hi, 2 * j + 1);
      u32 blo[8], bhi[8];
      W::template bytes<Code>(lo, blo);
      W::template bytes<Code>(hi, bhi);
      u32 a[2 * kTokTiles];
      Act::template load_swapped<kTokTiles, Tl::WM>(a, a_tile, j, w.wm, w.lane);
      if constexpr (kFold) {
        constexpr u32 kOnes[4] = {0x01010101u, 0x01010101u, 0x01010101u, 0x01010101u};
#pragma unroll
        for (int tt = 0; tt < kTokTiles; ++tt) {
          if (j % kSlabsPerGroup == 0) {
            Act::template mma<false, true>(fold[tt], kOnes, a[2 * tt], a[2 * tt + 1]);
          } else {
            Act::template mma<true, true>(fold[tt], kOnes, a[2 * tt], a[2 * tt + 1]);
          }
        }
      }
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt) {
        // Channels mt*16 + lane/4 (+ 8) are nt = 2 mt (+ 1); k 0..15 / 16..31 of the slab are lo / hi.
        const u32 f[4] = {blo[2 * mt], blo[2 * mt + 1], bhi[2 * mt], bhi[2 * mt + 1]};
#pragma unroll
        for (int tt = 0; tt < kTokTiles; ++tt) {
          if (j % kSlabsPerGroup == 0) {
            Act::template mma<false, kFold>(part[tt * kMt + mt], f, a[2 * tt], a[2 * tt + 1]);
          } else {
            Act::template mma<true, kFold>(part[tt * kMt + mt], f, a[2 * tt], a[2 * tt + 1]);
          }
        }
      }
      if (j % kSlabsPerGroup == kSlabsPerGroup - 1) promote(acc, part, fold, hi, st, w, j, rs);
    }
  }
};

}  // namespace humming
