// humming: the activation operand policy. Everything the main loops do with A (its shared-memory tile,
// its fragments, the tensor-core instruction that consumes it) goes through the policy, so that an
// 8-bit activation is a new policy rather than a new branch of the main loops.
#pragma once
#include "dequant.cuh"
#include "loader.cuh"
#include "mma.cuh"
#include "wgmma.cuh"
#include "wgmma8.cuh"

namespace humming {

// The BK step of the mma.sync main loop for each kind of activation (mainloop_sync.cuh,
// mainloop_sync8.cuh).
template <class K>
struct SyncStage;
template <class K>
struct SyncStage8;
template <class K>
struct WgmmaStage;
template <class K>
struct WgmmaStage8;

// 16-bit float activations (f16 or bf16): A tiles of 64-element (128-byte) rows, swizzled (a_swizzle),
// read with ldmatrix; mma.sync m16n8k16 or wgmma m64nNk16 with f32 accumulation.
template <class T_>
struct Act16 {
  using T = T_;
  using H = Half2<T>;
  static constexpr int kBytes = 2;
  static constexpr bool kMma16 = true;  // the mma.sync main loop multiplies T pairs (SyncStage)
  template <class K>
  using SyncStep = SyncStage<K>;
  template <class K>
  using WgmmaStep = WgmmaStage<K>;

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

// Bytes i and j of `c` (8-bit float codes of Code) as a T pair (byte i low), exactly: e4m3 to f16 by the
// conversion instruction; e5m2 to f16 as the pair's high bytes (e5m2 is f16's top byte); to bf16 by
// moving the exponent-and-mantissa field to bf16's lowest binades and multiplying by 2^(127 - bias), which
// maps subnormals linearly too.
template <class T, class Code, int i, int j>
__device__ __forceinline__ u32 float_code_pair(u32 c) {
  static_assert(!Code::kInt, "float codes");
  if constexpr (!T::kIsBf16 && Code::kE4M3) {
    const u16 x = static_cast<u16>(__byte_perm(c, 0, 0x4400 | (j << 4) | i));
    u32 d;
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(d) : "h"(x));
    return d;
  } else if constexpr (!T::kIsBf16) {
    return __byte_perm(c, 0, 0x0404 | (j << 12) | (i << 4));
  } else {
    constexpr int kMan = Code::kE4M3 ? 3 : 2;
    constexpr u32 kPow = Code::kE4M3 ? 0x7B807B80u : 0x77807780u;  // 2^120, 2^112
    const u32 x = __byte_perm(c, 0, 0x4040 | (j << 8) | i);       // bytes i and j at 0 and 2
    return Half2<T>::mul(((x & 0x007F007Fu) << (7 - kMan)) | ((x & 0x00800080u) << 8), kPow);
  }
}

// 8-bit float activation codes (e4m3, e5m2) with integer weights on the 16-bit mma.sync main loop
// (SyncStage): A tiles as Act8 (64-byte rows, a_swizzle<1>); after ldmatrix each k16 slab's codes
// become T pairs (exact), and mma.sync m16n8k16 takes the weights dequantized to T as for 16-bit
// activations. sm_90 has no FP8 mma.sync (an m16n8k32 e4m3 is two m16n8k16 on both operands
// converted), so converting only A, which a warp's 64 channels share, is the cheaper path. The
// activation scale multiplies C in the epilogue. Everything after the A fragments (the mma, the 16-bit
// main loop, the scales' type) is Act16's.
template <class T_, class Code_>
struct Act8Wide : Act16<T_> {
  using T = T_;
  using Code = Code_;
  static constexpr int kBytes = 1;
  static_assert(!Code::kInt, "float codes (s8 has a real m16n8k32: Act8)");
  template <class K>
  using WgmmaStep = WgmmaStage8<K>;

  // Swap AB: the mma's B operands of k16 slab kk for the warp's kTokTiles n8 tiles of rows, as Act16's.
  // ldmatrix gives lane L codes k = 4 (L % 4) .. + 3 of row L / 4 (the slab is one 16-byte chunk); in the
  // packed K order of 8-bit kernels (humming_spec::layout::act8_k_order) the m16n8k16 operand's k
  // 2 (L % 4) + h is byte 2 h of them and k 8 + 2 (L % 4) + h byte 1 + 2 h.
  template <int kTokTiles, int WM>
  __device__ __forceinline__ static void load_swapped(u32 (&a)[2 * kTokTiles], u32 a_tile, int kk, int wm, int lane) {
    const int row = wm * WM + ((lane >> 3) & 1) * 8 * (kTokTiles - 1) + (lane & 7);
    u32 c[2];
    ldmatrix_x2(c, a_tile + a_swizzle<1>(row, kk));
#pragma unroll
    for (int t = 0; t < kTokTiles; ++t) {
      a[2 * t] = float_code_pair<T, Code, 0, 2>(c[t]);
      a[2 * t + 1] = float_code_pair<T, Code, 1, 3>(c[t]);
    }
  }

  // Not swapped: the mma's A operand (16 rows x 16 k) of slab kk at rows `row0`.. of the tile, in the same
  // K order (lane L: codes k = 4 (L % 4) .. + 3 of rows row0 + L / 4 and row0 + 8 + L / 4).
  __device__ __forceinline__ static void load_rows(u32 (&a)[4], u32 a_tile, int row0, int kk, int lane) {
    u32 c[2];
    ldmatrix_x2(c, a_tile + a_swizzle<1>(row0 + (lane & 15), kk));
    a[0] = float_code_pair<T, Code, 0, 2>(c[0]);
    a[1] = float_code_pair<T, Code, 0, 2>(c[1]);
    a[2] = float_code_pair<T, Code, 1, 3>(c[0]);
    a[3] = float_code_pair<T, Code, 1, 3>(c[1]);
  }
};

// 8-bit activation codes (Code: CodeE4M3, CodeE5M2 or CodeS8) with C of type T_: A tiles of 64-byte rows
// (a_swizzle<1>), read with ldmatrix (a b16 pair is four codes); mma.sync m16n8k32 with f32 (float codes)
// or s32 (s8) partial sums, which the main loop promotes into the f32 accumulators under the group and
// weight scales (mainloop_sync8.cuh). The activation scale (per row of A) multiplies C in the epilogue.
template <class T_, class Code_>
struct Act8 {
  using T = T_;
  using Code = Code_;
  static constexpr int kBytes = 1;
  static constexpr bool kMma16 = false;
  using Part = typename Pick<Code::kInt, int, float>::type;  // an mma's partial sums
  template <class K>
  using SyncStep = SyncStage8<K>;
  template <class K>
  using WgmmaStep = WgmmaStage8<K>;

  // Swap AB: the mma's B operands of k32 slab j (0, 1) of the warp's 64-deep slice for its kTokTiles
  // n8 tiles of rows: a[2 t] / a[2 t + 1] = k 0..15 / 16..31 of rows 8t..8t+7 (lanes 8i..8i+7 address
  // matrix i; ldmatrix gives lane L row L / 4, codes 4 (L % 4) .. + 3 of the matrix's 16).
  template <int kTokTiles, int WM>
  __device__ __forceinline__ static void load_swapped(u32 (&a)[2 * kTokTiles], u32 a_tile, int j, int wm, int lane) {
    const int row = wm * WM + ((lane >> 4) << 3) * (kTokTiles - 1) + (lane & 7);
    const int chunk = j * 2 + ((lane >> 3) & 1);
    if constexpr (kTokTiles == 1) {
      ldmatrix_x2(*reinterpret_cast<u32(*)[2]>(a), a_tile + a_swizzle<1>(row, chunk));
    } else {
      ldmatrix_x4(*reinterpret_cast<u32(*)[4]>(a), a_tile + a_swizzle<1>(row, chunk));
    }
  }

  // d = a * (b0, b1) (+ d when kAcc); kUnsignedA: a holds unsigned codes (u8 under s8; for float codes
  // the positive normalized integers are codes of the type itself).
  template <bool kAcc, bool kUnsignedA = false>
  __device__ __forceinline__ static void mma(Part (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
    mma_k32<Code, kAcc, kUnsignedA && Code::kInt>(d, a, b0, b1);
  }

  // A scale of the grid on B (C's type) to f32.
  __device__ __forceinline__ static float to_float(u16 v) { return Half2<T>::to_float(v); }
};

}  // namespace humming
