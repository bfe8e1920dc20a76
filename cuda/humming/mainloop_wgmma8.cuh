// humming: one BK step of the Hopper wgmma main loop for 8-bit activations (Act8, sm_90a): per k32 slab
// (two packed k16 slabs) each warp turns its WN channels' codes into WN/16 A fragments of 8-bit codes and
// the warpgroup issues WN/16 wgmma.m64nBMk32 with the A tile (64-byte rows, 64-byte swizzle) as the shared
// operand. The codes are the operand as they are (W8A8 FP8: weights in A's own code, no group scales),
// so the accumulators take every K step and the epilogue applies the channel and row scales. One commit
// group per k32 slab is in flight while the warps build the next slab's fragments; the stage hand-off
// (committed) is that of the 16-bit path, called for both packed slabs of the k32 slab.
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
  static_assert(!Code::kInt && !W::template folds<Code>() && W::template unit<Code>() == 1.0f && !Q::kScaleOnB,
                "wgmma with 8-bit activations: float weights in A's code under channel or tensor scales");

  template <class LoadSlab, class Committed>
  __device__ __forceinline__ static void step(typename K::Acc& acc, u32 a_tile, const WarpPlace& w,
                                              LoadSlab&& load_slab, Committed&& committed) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      typename W::Slab lo, hi;
      load_slab(lo, 2 * j, false);
      load_slab(hi, 2 * j + 1, false);
      W::template select<K::kHalves>(lo, w.unit_part);
      W::template select<K::kHalves>(hi, w.unit_part);
      u32 blo[8], bhi[8];
      W::template bytes<Code>(lo, blo);
      W::template bytes<Code>(hi, bhi);
      const u64 desc = wgmma_desc_sw64(a_tile + j * 32);
      wgmma_fence();
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt) {
        const u32 f[4] = {blo[2 * mt], blo[2 * mt + 1], bhi[2 * mt], bhi[2 * mt + 1]};
        WgmmaRS8<Code, Tl::BM>::template run<kMt>(acc[0], mt, f, desc);
      }
      wgmma_commit();
      wgmma_wait<1>();  // the previous slab's wgmmas are done: their registers may be reused
      committed(2 * j);
      committed(2 * j + 1);
    }
  }
};

}  // namespace humming
