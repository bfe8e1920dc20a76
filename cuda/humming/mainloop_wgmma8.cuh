// humming: one BK step of the Hopper wgmma main loop for 8-bit activations (Act8, sm_90a): per k32 slab
// (two packed k16 slabs) each warp turns its WN channels' codes into WN/16 A fragments of 8-bit codes and
// the warpgroup issues WN/16 wgmma.m64nBMk32 with the A tile (64-byte rows, 64-byte swizzle) as the shared
// operand. W8A8 FP8 (weights in A's own code, no group scales): the accumulators take every K step and
// the epilogue applies the channel and row scales. W4A8 FP8: the 4-bit codes become c - z as e4m3
// normalized integers and each slice's sums are promoted (kPromote); W8A8 FP8 block scales promote each
// slice times the weight block's scale and the activation group's row scales (Q::kActGroup). One commit
// group per k32 slab is in flight while the warps build the next slab's fragments, and a slice's sums are
// promoted once the next slice's first fragments are built (Carry); the stage hand-off (committed) is that
// of the 16-bit path, called for both packed slabs of the k32 slab.
#pragma once
#include "traits.cuh"

namespace humming {

template <class K>
struct WgmmaStage8 {
  using Tl = typename K::Tl;
  using Act = typename K::Act;
  using W = typename K::W;
  using Q = typename K::Q;
  using Code = typename Act::Code;
  static constexpr int kMt = K::kMt;
  static constexpr int kAccN = K::kAccN;
  static constexpr float kUnit = W::template unit<Code>();
  // Promotion: with a scale grid on B, or codes that are the weights times 2^-kUnitExp (4-bit integer
  // codes as e4m3 normalized integers), each group's partial sums (a second accumulator set, each group
  // started by a wgmma with scale-d 0) are added into the f32 accumulators as acc += part * scale *
  // unit, once per warpgroup slice (64 deep; groups of 64 or more).
  static constexpr bool kPromote = Q::kScaleOnB || kUnit != 1.0f;
  static_assert(!Code::kInt, "wgmma with 8-bit activations: float codes");
  static_assert(!Q::kScaleOnB || Q::kGroup >= 64, "groups of at least one warpgroup slice");

  using RowScales = typename K::RowScales;  // rs[c]: rows 8 c + 2 (lane % 4) + 0, 1 (warp M = BM)

  // acc += part * scale(channel) * kUnit [* scale(row)]; `sw` the scale words of the slice's group.
  __device__ __forceinline__ static void promote(typename K::Acc& acc, const float (&part)[kAccN][4],
                                                 const u32 (&sw)[4], const RowScales& rs) {
#pragma unroll
    for (int mt = 0; mt < kMt; ++mt) {
      float s0 = kUnit, s1 = kUnit;
      if constexpr (Q::kScaleOnB) {
        s0 = Act::to_float(static_cast<u16>(sw[mt] & 0xFFFFu)) * kUnit;  // channel mt*16 + lane/4
        s1 = Act::to_float(static_cast<u16>(sw[mt] >> 16)) * kUnit;      // channel mt*16 + lane/4 + 8
      }
#pragma unroll
      for (int c = 0; c < kAccN / kMt; ++c) {
        float(&d)[4] = acc[0][c * kMt + mt];
        const float(&q)[4] = part[c * kMt + mt];
        if constexpr (Q::kActGroup > 0) {
          d[0] = fmaf(s0 * rs[c][0], q[0], d[0]);
          d[1] = fmaf(s0 * rs[c][1], q[1], d[1]);
          d[2] = fmaf(s1 * rs[c][0], q[2], d[2]);
          d[3] = fmaf(s1 * rs[c][1], q[3], d[3]);
        } else {
          d[0] = fmaf(s0, q[0], d[0]);
          d[1] = fmaf(s0, q[1], d[1]);
          d[2] = fmaf(s1, q[2], d[2]);
          d[3] = fmaf(s1, q[3], d[3]);
        }
      }
    }
  }

  // What a step leaves to the next with promotion: its slice's sums stay in flight in `part` while the
  // next step's first fragments are built; that step waits for them, promotes them with the scales
  // kept here, and then starts its own sums in `part`. (Reading `part` only after a full wait keeps
  // ptxas from serializing the wgmmas.) Without promotion nothing.
  struct Carry {
    float part[kPromote ? kAccN : 1][4];
    u32 sw[4];
    RowScales rs;
    bool pending = false;  // part holds a slice not promoted yet
  };

  template <class LoadSlab, class Committed, class RowScale>
  __device__ __forceinline__ static void step(typename K::Acc& acc, u32 a_tile, const WarpPlace& w,
                                              LoadSlab&& load_slab, Committed&& committed, RowScale&& row_scale,
                                              Carry& carry) {
    RowScales rs;  // loaded first: their latency hides behind the slice's wgmmas
    load_row_scales<K>(rs, w, row_scale);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      typename W::Slab lo, hi;
      load_slab(lo, 2 * j, false);
      load_slab(hi, 2 * j + 1, false);
      W::template select<K::kHalves>(lo, w.unit_part);
      W::template select<K::kHalves>(hi, w.unit_part);
      u32 blo[8], bhi[8];
      W::template bytes<Code, false>(lo, blo);
      W::template bytes<Code, false>(hi, bhi);
      if constexpr (kPromote) {
        if (j == 0) drain(acc, carry);  // the previous slice, once this one's first fragments are built
      }
      const u64 desc = wgmma_desc_sw64(a_tile + j * 32);
      wgmma_fence();
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt) {
        const u32 f[4] = {blo[2 * mt], blo[2 * mt + 1], bhi[2 * mt], bhi[2 * mt + 1]};
        if constexpr (kPromote) {
          WgmmaRS8<Code, Tl::BM>::template run<kMt>(carry.part, mt, f, desc, j);  // slab 0 starts the sums
        } else {
          WgmmaRS8<Code, Tl::BM>::template run<kMt>(acc[0], mt, f, desc);
        }
      }
      wgmma_commit();
      wgmma_wait<1>();  // the previous k32 slab's wgmmas are done: their registers may be reused
      if constexpr (kPromote) {
        if (j == 1) {
#pragma unroll
          for (int i = 0; i < 4; ++i) carry.sw[i] = hi.sw[i];
          if constexpr (Q::kActGroup > 0) {
#pragma unroll
            for (int c = 0; c < kAccN / kMt; ++c) {
              carry.rs[c][0] = rs[c][0];
              carry.rs[c][1] = rs[c][1];
            }
          }
          carry.pending = true;
        }
      }
      committed(2 * j);
      committed(2 * j + 1);
    }
  }

  // The promotion of the slice still in flight (after the segment's last step, or before the next
  // slice's sums start).
  __device__ __forceinline__ static void drain(typename K::Acc& acc, Carry& carry) {
    wgmma_wait<0>();
    if constexpr (kPromote) {
      if (carry.pending) promote(acc, carry.part, carry.sw, carry.rs);
      carry.pending = false;
    }
  }
};

}  // namespace humming
