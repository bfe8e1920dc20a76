// humming: the activation operand policy. Everything the main loops do with A (its shared-memory tile,
// its fragments, the tensor-core instruction that consumes it) goes through the policy, so that an
// 8-bit activation is a new policy rather than a new branch of the main loops.
#pragma once
#include "dequant.cuh"
#include "loader.cuh"
#include "mma.cuh"
#include "wgmma.cuh"

namespace humming {

// 16-bit float activations (f16 or bf16): A tiles of 64-element (128-byte) rows, swizzled (a_swizzle),
// read with ldmatrix; mma.sync m16n8k16 or wgmma m64nNk16 with f32 accumulation.
template <class T_>
struct Act16 {
  using T = T_;
  using H = Half2<T>;

  // Swap AB (warp tiles of 8 or 16 rows): the mma's B operands of k16 slab kk for the warp's kTokTiles
  // n8 tiles of rows, a[2 t] / a[2 t + 1] = k 0..7 / 8..15 of rows 8t..8t+7 of the warp tile (lanes
  // 8i..8i+7 address matrix i), so each mma's B operand is a pair.
  template <int kTokTiles, int WM>
  __device__ __forceinline__ static void load_swapped(u32 (&a)[2 * kTokTiles], u32 a_tile, int kk, int wm, int lane) {
    const int row = wm * WM + ((lane >> 4) << 3) * (kTokTiles - 1) + (lane & 7);
    const int chunk = kk * 2 + ((lane >> 3) & 1);
    if constexpr (kTokTiles == 1) {
      ldmatrix_x2(*reinterpret_cast<u32(*)[2]>(a), a_tile + a_swizzle(row, chunk));
    } else {
      ldmatrix_x4(*reinterpret_cast<u32(*)[4]>(a), a_tile + a_swizzle(row, chunk));
    }
  }

  // Not swapped: the mma's A operand (16 rows x 16 k) of slab kk at rows `row0`.. of the tile.
  __device__ __forceinline__ static void load_rows(u32 (&a)[4], u32 a_tile, int row0, int kk, int lane) {
    ldmatrix_x4(a, a_tile + a_swizzle(row0 + (lane & 15), kk * 2 + (lane >> 4)));
  }

  // d += a * (b0, b1); d = a * (b0, b1) + c; d = a * (b0, b1).
  __device__ __forceinline__ static void mma(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
    mma_16816<T>(d, a, b0, b1);
  }
  __device__ __forceinline__ static void mma_c(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1, const float (&c)[4]) {
    mma_16816_c<T>(d, a, b0, b1, c);
  }
  __device__ __forceinline__ static void mma_zero(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
    mma_16816_zero<T>(d, a, b0, b1);
  }

  // wgmma with the weights in registers and this A tile (block M rows) as the shared-memory operand.
  template <int BM>
  using Wgmma = WgmmaRS<T, BM>;

  // A pair of activations multiplied by an exact pair (offset folding's 2^-R).
  __device__ __forceinline__ static u32 scale(u32 a, u32 s) { return H::mul(a, s); }

  // An activation's bits (C's element type is A's) to f32.
  __device__ __forceinline__ static float to_float(u16 v) { return H::to_float(v); }
};

}  // namespace humming
