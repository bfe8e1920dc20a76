// humming: one BK step of the Hopper wgmma main loop (sm_90a). Warps (K, N) = (BK/64, BN/WN); each group
// of four warps along N is one warpgroup over 4 x WN channels and all BM rows (two warpgroups along N
// share the A tile). Per k16 slab each warp dequantizes its WN channels (a whole 64-channel unit, or a
// half or quarter of one) into WN/16 A fragments, exactly as the swap-AB mma.sync path does, and the
// warpgroup issues WN/16 wgmma.m64nBMk16 (rows 16w..16w+15 of wgmma mt come from warp w) with the A tile
// in shared memory as the B operand (128-byte swizzle): weights as the register operand, "swap AB".
// The wgmmas are committed in groups of kGroupSlabs slabs; one group runs while the warps dequantize the
// next, and the shared loads of slab kk + 1 are issued before slab kk is dequantized.
#pragma once
#include "traits.cuh"

namespace humming {

template <class K>
struct WgmmaStage {
  using Tl = typename K::Tl;
  using Act = typename K::Act;
  using W = typename K::W;
  static constexpr int kMt = K::kMt;
  static constexpr int kGroupSlabs = K::kGroupSlabs;

  // The step: `a_tile` is the warpgroup's 64-deep slice of A; load_slab(in, kk, same_row) fetches slab
  // kk's words, scales and zero points (mainloop.cuh); committed(kk) runs after slab kk's group is
  // committed (the TMA stage hand-off, pipeline.cuh).
  // Nothing passes from one step to the next (the 8-bit step's promotion does carry state).
  struct Carry {};
  __device__ __forceinline__ static void drain(typename K::Acc&, Carry&) {}

  template <class LoadSlab, class Committed, class RowScale>
  __device__ __forceinline__ static void step(typename K::Acc& acc, u32 a_tile, const WarpPlace& w,
                                              LoadSlab&& load_slab, Committed&& committed, RowScale&&, Carry&) {
    typename W::Slab ahead;
    load_slab(ahead, 0, false);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      typename W::Slab in = ahead;
      if (kk + 1 < 4) load_slab(ahead, kk + 1, true);
      W::template select<K::kHalves>(in, w.unit_part);
      u32 frag[16];
      W::template dequant<true, true, 16 / K::kHalves, false>(in, frag);
      // Rows 16w..16w+15 of wgmma mt are channels w * WN + mt * 16 + 0..15 (w = wn). B: the k16 slab
      // kk of this warpgroup's A tile, 32 bytes further per slab inside the swizzled 128-byte rows.
      const u64 desc = wgmma_desc_sw128(a_tile + kk * 32);
      wgmma_fence();
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt) {
        Act::template Wgmma<Tl::BM>::template run<kMt>(acc[0], mt, *reinterpret_cast<const u32(*)[4]>(&frag[4 * mt]),
                                                        desc);
      }
      if ((kk + 1) % kGroupSlabs == 0) {
        wgmma_commit();
        wgmma_wait<1>();  // the previous group is done: its registers may be reused
      }
      committed(kk);
    }
  }
};

}  // namespace humming
