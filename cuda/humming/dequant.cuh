// humming: 16-bit float pair arithmetic and weight dequantization by bit tricks.
//
// Packed weight layout (produced by humming_runtime::pack, inverse in unpack):
//   B is cut into 64 (K) x 64 (N) units, stored unit after unit in [K/64][N/64] order.
//   A b-bit code is split into power-of-two bit-planes ("parts"): 1,2,4,8 -> one part; 3 = 2+1,
//   5 = 4+1, 6 = 4+2, 7 = 4+2+1 (lowest bits first). A unit holds its parts one after the other; a part
//   of width s holds, for each k16 slab kk (0..3) and lane (0..31), s consecutive 32-bit words:
//     word index in part = (kk * 32 + lane) * s + q / (16 / s)
//   Those s words hold the 16 value pairs q = nt * 2 + r (nt = n8 tile 0..7, r = register 0/1) of the
//   lane's mma.m16n8k16 B fragments: pair q sits in slot j = q % (16 / s), its first value (even k) at
//   bits [j*s, j*s+s) and its second value (odd k) at bits [16 + j*s, 16 + j*s + s). The values of pair
//   (nt, r) of lane L are B[n][k] with n = nt*8 + L/4, k = kk*16 + 2*(L%4) + 8*r + {0, 1}.
//   So a thread fetches its whole fragment for a slab with one 4..32-byte shared load per part, and one
//   mask extracts two values straight into the two halves of a 16-bit float pair. 4-bit float codes
//   are placed differently inside their slots (FloatWeights, kSignBits).
//
// Dequantization (no int->float conversion instructions): OR-ing a code c < 2^10 into the mantissa of
// 1024.0 (f16 0x6400) gives exactly 1024 + c; for bf16 with c < 2^7, 128.0 (0x4300) gives 128 + c.
// One subtraction of (1024 + bias) then yields c - bias exactly. 8-bit codes under bf16 go through the
// same trick in f32 (2^23 = 0x4B000000), then an exact f32->bf16 pair conversion.
// Codes of one bit-plane (1, 2, 4, 8 bits) are taken from their slot without shifting it down when the
// slot still lies inside the mantissa: a 4-bit code at bits [4, 8) gives 1024 + 16c, and one fma by
// 1/16 (exact: a power of two) with -(64 + bias) yields c - bias, so one mask-and-or (lop3) and one
// shift per word serve four pairs (the trick of the Marlin kernel, Frantar et al. 2024).
#pragma once
#include "ptx.cuh"

namespace humming {

// ---- 16-bit float pairs (raw bits in a u32) -------------------------------------------------------

template <class T>
struct Half2;

template <>
struct Half2<f16> {
  static constexpr u32 kMagic = 0x64006400u;  // (1024.0, 1024.0)
  static constexpr int kMagicBits = 10;       // codes below 2^10 fit the mantissa
  static constexpr float kMagicValue = 1024.0f;
  __device__ __forceinline__ static u32 sub(u32 a, u32 b) {
    u32 d;
    asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
  }
  __device__ __forceinline__ static u32 mul(u32 a, u32 b) {
    u32 d;
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
  }
  __device__ __forceinline__ static u32 fma(u32 a, u32 b, u32 c) {
    u32 d;
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
  }
  __device__ __forceinline__ static u32 add(u32 a, u32 b) {
    u32 d;
    asm("add.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
  }
  // (lo, hi) floats -> pair, round to nearest even.
  __device__ __forceinline__ static u32 from_floats(float lo, float hi) {
    u32 d;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
  }
  __device__ __forceinline__ static float to_float(u16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
  }
};

template <>
struct Half2<bf16> {
  static constexpr u32 kMagic = 0x43004300u;  // (128.0, 128.0)
  static constexpr int kMagicBits = 7;
  static constexpr float kMagicValue = 128.0f;
  // sm_80 has no bf16x2 add/sub/mul; fma.rn.bf16x2 is exact-rounded and does all three.
  __device__ __forceinline__ static u32 fma(u32 a, u32 b, u32 c) {
    u32 d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
  }
  __device__ __forceinline__ static u32 sub(u32 a, u32 b) { return fma(b, 0xBF80BF80u, a); }  // a + b * -1
  __device__ __forceinline__ static u32 add(u32 a, u32 b) { return fma(b, 0x3F803F80u, a); }  // a + b * 1
  __device__ __forceinline__ static u32 mul(u32 a, u32 b) { return fma(a, b, 0x80008000u); }  // a * b + -0
  __device__ __forceinline__ static u32 from_floats(float lo, float hi) {
    u32 d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
  }
  __device__ __forceinline__ static float to_float(u16 h) { return __uint_as_float(((u32)h) << 16); }
};

// Both halves of a pair set to the low (`high` false) or the high half of `w`.
__device__ __forceinline__ u32 broadcast_half(u32 w, bool high) { return __byte_perm(w, 0, high ? 0x3232 : 0x1010); }

// ---- bit-plane parts -------------------------------------------------------------------------------

// Width of part `i` of a `kBits`-bit code (0 past the last part).
template <int kBits>
__device__ __host__ constexpr int part_width(int i) {
  return kBits == 3   ? (i == 0 ? 2 : i == 1 ? 1 : 0)
         : kBits == 5 ? (i == 0 ? 4 : i == 1 ? 1 : 0)
         : kBits == 6 ? (i == 0 ? 4 : i == 1 ? 2 : 0)
         : kBits == 7 ? (i == 0 ? 4 : i == 1 ? 2 : i == 2 ? 1 : 0)
                      : (i == 0 ? kBits : 0);
}

// Sum of the widths of the parts before part `i`.
template <int kBits>
__device__ __host__ constexpr int part_offset(int i) {
  return i <= 0 ? 0 : part_offset<kBits>(i - 1) + part_width<kBits>(i - 1);
}

// Loads the words of one k16 slab for this lane: w[part_offset(i) .. + part_width(i)) = part i.
// `unit` is the shared-space address of the unit's first word.
template <int kBits>
__device__ __forceinline__ void load_slab_words(u32 unit, int kk, int lane, u32 (&w)[kBits]) {
#pragma unroll
  for (int i = 0; i < 3; ++i) {
    const int s = part_width<kBits>(i);
    if (s == 0) continue;
    const u32 src = unit + 4u * (128 * part_offset<kBits>(i) + (kk * 32 + lane) * s);
    const int o = part_offset<kBits>(i);
    if (s == 8) {
      const uint4 x = lds128(src);
      const uint4 y = lds128(src + 16);
      w[o + 0] = x.x; w[o + 1] = x.y; w[o + 2] = x.z; w[o + 3] = x.w;
      w[o + 4] = y.x; w[o + 5] = y.y; w[o + 6] = y.z; w[o + 7] = y.w;
    } else if (s == 4) {
      const uint4 x = lds128(src);
      w[o + 0] = x.x; w[o + 1] = x.y; w[o + 2] = x.z; w[o + 3] = x.w;
    } else if (s == 2) {
      const uint2 x = lds64(src);
      w[o + 0] = x.x; w[o + 1] = x.y;
    } else {
      w[o] = lds32(src);
    }
  }
}

// The code pair q (0..15) of a slab: both codes in the low bits of each 16-bit half.
template <int kBits>
__device__ __forceinline__ u32 code_pair(const u32 (&w)[kBits], int q) {
  u32 c = 0;
#pragma unroll
  for (int i = 0; i < 3; ++i) {
    const int s = part_width<kBits>(i);
    if (s == 0) continue;
    const int per = 16 / s;
    const u32 mask = ((1u << s) - 1u) * 0x00010001u;
    const u32 word = w[part_offset<kBits>(i) + q / per];
    c |= ((word >> ((q % per) * s)) & mask) << part_offset<kBits>(i);
  }
  return c;
}

// The pair of codes as exact 16-bit floats offset by the magic number: (M + c_lo, M + c_hi), where M
// is Half2<T>::kMagicValue; for 8-bit codes under bf16 the offset is 0 (exact values).
template <class T, int kBits>
struct CodeToFloat {
  static constexpr bool kDirect = kBits <= Half2<T>::kMagicBits;
  // Value of the offset carried by the result.
  static constexpr float kOffset = kDirect ? Half2<T>::kMagicValue : 0.0f;
  __device__ __forceinline__ static u32 convert(u32 c) {
    if constexpr (kDirect) {
      return c | Half2<T>::kMagic;
    } else {
      const float lo = __uint_as_float(0x4B000000u | (c & 0xFFFFu)) - 8388608.0f;
      const float hi = __uint_as_float(0x4B000000u | (c >> 16)) - 8388608.0f;
      return Half2<T>::from_floats(lo, hi);  // exact: integers below 256
    }
  }
};

// (a & b) | c in one instruction.
__device__ __forceinline__ u32 and_or(u32 a, u32 b, u32 c) {
  u32 d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// 2^e as a float, at compile time.
__host__ __device__ constexpr float pow2f(int e) { return e == 0 ? 1.0f : e > 0 ? 2.0f * pow2f(e - 1) : 0.5f * pow2f(e + 1); }

// Bit pattern, in both halves of a pair, of a value that T represents exactly (small integers, powers
// of two, their sums), computed at compile time.
template <class T>
__host__ __device__ constexpr u32 exact_pair(float v) {
  constexpr int kMant = T::kIsBf16 ? 7 : 10;
  constexpr int kExpBias = T::kIsBf16 ? 127 : 15;
  u32 sign = 0;
  if (v < 0.0f) {
    sign = 0x8000u;
    v = -v;
  }
  u32 h = sign;
  if (v != 0.0f) {
    int e = 0;
    while (v >= 2.0f) {
      v *= 0.5f;
      ++e;
    }
    while (v < 1.0f) {
      v *= 2.0f;
      --e;
    }
    h |= static_cast<u32>(e + kExpBias) << kMant | static_cast<u32>((v - 1.0f) * static_cast<float>(1 << kMant));
  }
  return h | h << 16;
}

// Extraction of the code pairs of a slab as 16-bit float pairs x = (kOffset + c) * 2^residual(q).
template <class T, int kBits>
struct Codes {
  using H = Half2<T>;
  static constexpr bool kDirect = CodeToFloat<T, kBits>::kDirect;
  // One bit-plane under the magic-number path: codes are read in place from their slots.
  static constexpr bool kSlots = kDirect && part_width<kBits>(1) == 0;
  static constexpr int kPer = 16 / kBits;  // slots per 16-bit half (one bit-plane)
  // Consecutive slots that fit the mantissa without a shift; the next ones come after one shift.
  static constexpr int kFit = kSlots ? (H::kMagicBits - kBits) / kBits + 1 : 1;
  static constexpr float kOffset = CodeToFloat<T, kBits>::kOffset;

  __host__ __device__ static constexpr int residual(int q) { return kSlots ? ((q % kPer) % kFit) * kBits : 0; }

  __device__ __forceinline__ static u32 extract(const u32 (&w)[kBits], int q) {
    if constexpr (kSlots) {
      const int j = q % kPer;
      const int shift = (j / kFit) * kFit * kBits;
      const u32 mask = (((1u << kBits) - 1u) << residual(q)) * 0x00010001u;
      return and_or(w[q / kPer] >> shift, mask, H::kMagic);
    } else {
      return CodeToFloat<T, kBits>::convert(code_pair<kBits>(w, q));
    }
  }
};

// Offset folding, for swap-AB tiles whose scale goes on the f32 accumulators and that have no zero
// point. A pair read in place at residual 0 (x = kOffset + c) is left as x, skipping the subtraction of
// kOffset + code bias (one f16x2/bf16x2 op per pair). When the pairs of register r = 1 of every n8 tile
// (k 8..15 of the slab) are all read at one residual R > 0 and the others at 0 (4-bit codes under f16:
// x = 1024 + 16c), those are left as x too, and the activations they meet (the mma's second B register,
// shared by all channel tiles) are multiplied by 2^-R instead: one op per slab and n8 tile of rows
// instead of one per pair. The mma then sums x * a, and the missing terms, equal for every channel,
// come from one extra mma per k16 slab and n8 tile of rows whose A operand is the constant fragment
// frag(): its result starts the accumulation of the stage. The products are exact (x and the constants
// are integers below 2^11; a * 2^-R is exact unless it falls below the smallest normal f16, 2^-14, where
// it rounds by at most 2^-25 and that rounded value is used consistently by both mmas, so the error of
// a term is below |c - bias| * 2^-25 * scale); the f32 sum cancels ~log2(kOffset) bits, far below the
// output's rounding. kOk: the folded slots are the same in every m16 tile (4- and 8-bit codes, codes of
// several bit-planes; not 1 or 2 bits, whose in-place slots vary from tile to tile).
template <class Q>
struct OffsetFold {
  using T = typename Q::T;
  using D = Codes<T, Q::kBits>;
  static constexpr float kCodeBias = Q::kSigned ? static_cast<float>(1 << (Q::kBits - 1)) : 0.0f;
  __host__ __device__ static constexpr int hi_residual() {
    const int r = D::residual(1);
    for (int q = 0; q < 16; ++q) {
      if (D::residual(q) != ((q & 1) != 0 ? r : 0)) return 0;
    }
    return r;
  }
  // R above (0: no scaling of the activations).
  static constexpr int kHiRes = hi_residual();
  __host__ __device__ static constexpr bool folded(int q) { return kHiRes > 0 || D::residual(q) == 0; }
  __host__ __device__ static constexpr bool uniform() {
    for (int q = 0; q < 16; ++q) {
      if (folded(q) != folded(q % 4)) return false;
    }
    return true;
  }
  static constexpr bool kOk = uniform() && Q::kZp == ZeroPointKind::kNone;
  // The activations of register 1 are scaled by this pair (2^-R).
  static constexpr u32 kHiScale = exact_pair<T>(1.0f / static_cast<float>(1 << kHiRes));
  // Register i (0..3) of an m16 tile's A fragment holds pair q = 2 (i & 1) + i / 2 (see dequant_pairs):
  // -(kOffset + bias), or -(kOffset + 2^R bias) against activations scaled by 2^-R, or 0 (not folded).
  __host__ __device__ static constexpr u32 frag(int i) {
    return !folded(2 * (i & 1) + i / 2) ? 0u
           : (kHiRes > 0 && i >= 2)     ? exact_pair<T>(-(D::kOffset + kCodeBias * static_cast<float>(1 << kHiRes)))
                                        : exact_pair<T>(-(D::kOffset + kCodeBias));
  }
};

// Compile-time checks of the folding constants for the common formats (no code generated).
namespace offset_fold_checks {
using W4F16 = QuantConfig<f16, 4, true, ZeroPointKind::kNone, 128, true, false, false, EpilogueKind::kNone>;
using W4Bf16 = QuantConfig<bf16, 4, true, ZeroPointKind::kNone, 128, true, false, false, EpilogueKind::kNone>;
using W8F16 = QuantConfig<f16, 8, true, ZeroPointKind::kNone, 128, true, false, false, EpilogueKind::kNone>;
using W2F16 = QuantConfig<f16, 2, true, ZeroPointKind::kNone, 128, true, false, false, EpilogueKind::kNone>;
using W4F16Zp = QuantConfig<f16, 4, false, ZeroPointKind::kInteger, 128, true, false, false, EpilogueKind::kNone>;
// 4-bit f16: k 0..7 as 1024 + c against a, k 8..15 as 1024 + 16c against a / 16.
static_assert(OffsetFold<W4F16>::kOk && OffsetFold<W4F16>::kHiRes == 4, "4-bit f16 folds every pair");
static_assert(OffsetFold<W4F16>::frag(0) == 0xE408E408u && OffsetFold<W4F16>::frag(1) == 0xE408E408u, "-(1024 + 8)");
static_assert(OffsetFold<W4F16>::frag(2) == 0xE480E480u && OffsetFold<W4F16>::frag(3) == 0xE480E480u, "-(1024 + 16 * 8)");
static_assert(OffsetFold<W4F16>::kHiScale == 0x2C002C00u, "1/16");
// 4-bit bf16 (shifted codes, 128 + c) and 8-bit f16 (1024 + c): every pair at residual 0.
static_assert(OffsetFold<W4Bf16>::kOk && OffsetFold<W4Bf16>::kHiRes == 0 && OffsetFold<W4Bf16>::frag(3) == 0xC308C308u, "-(128 + 8)");
static_assert(OffsetFold<W8F16>::kOk && OffsetFold<W8F16>::kHiRes == 0 && OffsetFold<W8F16>::frag(0) == 0xE480E480u, "-(1024 + 128)");
// Not folded: 2-bit codes (in-place slots differ between m16 tiles) and integer zero points.
static_assert(!OffsetFold<W2F16>::kOk && !OffsetFold<W4F16Zp>::kOk, "no folding");
}  // namespace offset_fold_checks

// Pair q (and, recursively, the pairs after it) of one k16 slab: frag[q / 2][q % 2] = dequantized pair
// q = 2 nt + r (layout above), with sw[nt / 2] / zw[nt / 2] holding the scales / zero points of this
// lane's channels (two per word).
//   symmetric:      (c - 2^(bits-1)) * s          integer zero point: (c - z) * s
//   float offset:   (c - 0) * s + z              scale not on B (channel scale in the epilogue): no * s
// q is a template argument so that the slot, shift and constants of each pair are compile-time values.
// kMulScale false leaves the scale out (the caller applies it to the f32 accumulators). Pairs q <
// kPairs are dequantized (8: the first half of the slab, channels nt*8 + lane/4 for nt < 4; 4: the first
// quarter, nt < 2).
// kFold (OffsetFold, scale not applied here, no zero point): pairs read at residual 0 stay kOffset + c.
template <class Q, bool kMulScale, bool kAOrder, int q, int kPairs = 16, bool kFold = false>
__device__ __forceinline__ void dequant_pairs(const u32 (&w)[Q::kBits], const u32 (&sw)[4], const u32 (&zw)[4],
                                              u32 (&frag)[16]) {
  using T = typename Q::T;
  using H = Half2<T>;
  using D = Codes<T, Q::kBits>;
  constexpr float kCodeBias = Q::kSigned ? static_cast<float>(1 << (Q::kBits - 1)) : 0.0f;
  constexpr int nt = q / 2;
  constexpr int res = D::residual(q);
  constexpr float off = D::kOffset / static_cast<float>(1 << res);  // offset carried after * 2^-res
  constexpr u32 kP = exact_pair<T>(1.0f / static_cast<float>(1 << res));
  const u32 x = D::extract(w, q);
  u32 v;
  if constexpr (Q::kZp == ZeroPointKind::kFloatOffset) {
    v = H::fma(H::fma(x, kP, exact_pair<T>(-off)), broadcast_half(sw[nt >> 1], nt & 1), broadcast_half(zw[nt >> 1], nt & 1));
  } else if constexpr (kFold && OffsetFold<Q>::folded(q)) {
    static_assert(!kMulScale && Q::kZp == ZeroPointKind::kNone, "offset folding needs the scale on the accumulators");
    v = x;
  } else {
    u32 nb;
    if constexpr (Q::kZp == ZeroPointKind::kInteger) {
      nb = H::fma(broadcast_half(zw[nt >> 1], nt & 1), exact_pair<T>(-1.0f), exact_pair<T>(-off));
    } else {
      nb = exact_pair<T>(-(off + kCodeBias));
    }
    v = H::fma(x, kP, nb);
    if constexpr (kMulScale) v = H::mul(v, broadcast_half(sw[nt >> 1], nt & 1));
  }
  // B order: pair (nt, r) at 2 nt + r. A order (weights as the mma's A operand, channels nt*8 + lane/4
  // as rows): m16 tile mt = nt / 2 holds {(2mt, 0), (2mt+1, 0), (2mt, 1), (2mt+1, 1)} at 4 mt + 0..3.
  constexpr int slot = kAOrder ? (nt / 2) * 4 + (nt & 1) + 2 * (q & 1) : q;
  frag[slot] = v;
  if constexpr (q + 1 < kPairs) dequant_pairs<Q, kMulScale, kAOrder, q + 1, kPairs, kFold>(w, sw, zw, frag);
}

// The weight fragments of one k16 slab (see dequant_pairs), in B order or (kAOrder) A order, each
// mma operand in consecutive registers; the scale is applied when Q::kScaleOnB and kMulScale.
// kPairs = 8 / 4: only the first half / quarter of the slab (frag[0..7] / frag[0..3]); see half_slab,
// quarter_slab.
template <class Q, bool kMulScale, bool kAOrder, int kPairs = 16, bool kFold = false>
__device__ __forceinline__ void dequant_slab(const u32 (&w)[Q::kBits], const u32 (&sw)[4], const u32 (&zw)[4],
                                             u32 (&frag)[16]) {
  dequant_pairs<Q, Q::kScaleOnB && kMulScale, kAOrder, 0, kPairs, kFold>(w, sw, zw, frag);
}

// Moves the second half of a slab (pairs 8..15: channels nt*8 + lane/4 for nt = 4..7, the 32
// channels 32..63 of the unit) to where the first half was, when `second`: words, scales and zero
// points, so that dequant_slab<..., 8> then dequantizes that half. A part of width s >= 2 keeps pairs
// 8..15 in its words s/2..s-1 (same slots); a 1-bit part keeps them in bits 8..15 of its one word.
template <int kBits>
__device__ __forceinline__ void half_slab(u32 (&w)[kBits], u32 (&sw)[4], u32 (&zw)[4], bool second) {
#pragma unroll
  for (int i = 0; i < 3; ++i) {
    const int s = part_width<kBits>(i);
    const int o = part_offset<kBits>(i);
    if (s == 0) continue;
    if (s == 1) {
      w[o] = second ? w[o] >> 8 : w[o];
    } else {
#pragma unroll
      for (int j = 0; j < s / 2; ++j) w[o + j] = second ? w[o + s / 2 + j] : w[o + j];
    }
  }
  sw[0] = second ? sw[2] : sw[0];
  sw[1] = second ? sw[3] : sw[1];
  zw[0] = second ? zw[2] : zw[0];
  zw[1] = second ? zw[3] : zw[1];
}

// One quarter of a slab, `part` 0..3 (pairs 4 part .. 4 part + 3: channels nt*8 + lane/4 for nt = 2 part,
// 2 part + 1, the 16 channels 16 part .. 16 part + 15 of the unit), moved to where pairs 0..3 were, for
// wgmma warps of 16 channels (a quarter unit each); dequant_slab<..., 4> then dequantizes it. A part of
// width s >= 4 keeps the quarter in its words part * s/4 .. part * s/4 + s/4 - 1 (same slots); a 2-bit
// part in word part / 2, slots 4..7 for an odd part (shifted down 8 bits: both halves of the pair
// move to slots 0..3); a 1-bit part in slots 4 part .. 4 part + 3 of its one word. The words above the
// quarter's slots may keep other codes: extraction masks its slots. `part` is warp-uniform; the
// selections are register moves, not indexing (no local memory).
template <int kBits>
__device__ __forceinline__ void quarter_slab(u32 (&w)[kBits], u32 (&sw)[4], u32 (&zw)[4], int part) {
  const auto pick = [part](u32 a, u32 b, u32 c, u32 d) { return part == 0 ? a : part == 1 ? b : part == 2 ? c : d; };
#pragma unroll
  for (int i = 0; i < 3; ++i) {
    const int s = part_width<kBits>(i);
    const int o = part_offset<kBits>(i);
    if (s == 0) continue;
    if (s == 1) {
      w[o] = w[o] >> (4 * part);
    } else if (s == 2) {
      w[o] = (part >= 2 ? w[o + 1] : w[o]) >> (8 * (part & 1));
    } else {
#pragma unroll
      for (int j = 0; j < s / 4; ++j) w[o + j] = pick(w[o + j], w[o + s / 4 + j], w[o + s / 2 + j], w[o + 3 * s / 4 + j]);
    }
  }
  sw[0] = pick(sw[0], sw[1], sw[2], sw[3]);
  zw[0] = pick(zw[0], zw[1], zw[2], zw[3]);
}

// ---- The integer weight policy ---------------------------------------------------------------------

// Integer codes of 1 to 8 bits (unsigned, or signed stored offset-binary) with their scales and zero
// points, dequantized in registers by the bit tricks above. The main loops take the weights through
// this policy only: loading a slab's code words, choosing a warp's half or quarter of a unit, and
// turning words, scales and zero points into mma fragments.
template <class Q>
struct IntWeights {
  // The 32-bit code words of one k16 slab per lane, and the lane's scales and zero points (two per
  // word, for channels nt*8 + lane/4).
  struct Slab {
    u32 w[Q::kBits];
    u32 sw[4];
    u32 zw[4];
  };
  // Offset folding (OffsetFold) applies.
  static constexpr bool kFoldable = OffsetFold<Q>::kOk;

  // The words of slab kk of the unit at shared-space address `unit`.
  __device__ __forceinline__ static void load_words(Slab& s, u32 unit, int kk, int lane) {
    load_slab_words<Q::kBits>(unit, kk, lane, s.w);
  }

  // A warp of 64 / kHalves channels keeps its half (kHalves 2) or quarter (4) of the unit's slab.
  template <int kHalves>
  __device__ __forceinline__ static void select(Slab& s, int part) {
    if constexpr (kHalves == 2) half_slab<Q::kBits>(s.w, s.sw, s.zw, part != 0);
    if constexpr (kHalves == 4) quarter_slab<Q::kBits>(s.w, s.sw, s.zw, part);
  }

  // The fragments of the slab (dequant_slab).
  template <bool kMulScale, bool kAOrder, int kPairs, bool kFold>
  __device__ __forceinline__ static void dequant(Slab& s, u32 (&frag)[16]) {
    u32(&w)[Q::kBits] = s.w;
    u32(&sw)[4] = s.sw;
    u32(&zw)[4] = s.zw;
    dequant_slab<Q, kMulScale, kAOrder, kPairs, kFold>(w, sw, zw, frag);
  }

  // 8-bit activations of code Code: the value (code - zero point) of one weight is the mma's operand times
  // unit<Code>() (1 for s8; 2^kUnitExp for the normalized integers of float codes).
  template <class Code>
  __host__ __device__ static constexpr float unit() {
    return Code::kInt ? 1.0f : pow2f(Code::kUnitExp);
  }

  // 8-bit activations, offset folding: 4-bit codes go to the mma as they are (unsigned: u8 under s8, the
  // normalized integer c * 2^-9 under e4m3, exact for c < 16) and the zero point's term z * sum(a), equal
  // for every channel but for z, comes from one extra mma per slab (mainloop_sync8.cuh). Not under e5m2,
  // whose normalized integers stop at 8.
  template <class Code>
  __host__ __device__ static constexpr bool folds() {
    return Q::kBits == 4 && (Code::kInt || Code::kE4M3);
  }

  // The zero point of channel nt * 8 + lane / 4 (0..7) of a slab (2^(bits - 1) for signed codes, 0
  // for unsigned codes without one).
  __device__ __forceinline__ static float zero(const Slab& s, int nt) {
    if constexpr (Q::kZp == ZeroPointKind::kInteger) {
      const u32 zw = s.zw[nt >> 1];
      return Half2<typename Q::T>::to_float(static_cast<u16>((nt & 1) != 0 ? zw >> 16 : zw & 0xFFFFu));
    } else {
      return Q::kSigned ? static_cast<float>(1 << (Q::kBits - 1)) : 0.0f;
    }
  }

  // 8-bit activations: the slab's codes as the mma's operand, b[nt] = the four codes of channel
  // nt * 8 + lane / 4 in the packed K order of 8-bit kernels (humming_spec::layout::act8_k_order), whose
  // byte i is the mma's k 4 (lane % 4) + i. Each byte becomes v = code - zero point (the zero point, or
  // 2^(bits - 1) for signed codes): s8 in two's complement, by a per-byte subtraction that cannot borrow
  // ((c | 0x80) - z, then the top bit flipped); for float codes, |v| (below Code::kLinear) as the
  // normalized integer |v| * 2^-kUnitExp with v's sign, the sign found where 16 + c - z leaves bit 4.
  // kFold false: the value c - z even where the codes could fold (the wgmma path, which has no fold).
  template <class Code, bool kFold = folds<Code>()>
  __device__ __forceinline__ static void bytes(const Slab& s, u32 (&b)[8]) {
    static_assert(Q::kBits == 4 || (Q::kBits == 8 && Code::kInt && Q::kSigned),
                  "8-bit activations take 4-bit codes, or signed 8-bit codes with s8");
    static_assert(!kFold || folds<Code>(), "folding where the codes allow it");
    u32 u[8];  // the codes of channel nt * 8 + lane / 4, one per byte
    codes(s, u);
    if constexpr (kFold) {
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) b[nt] = u[nt];
      return;
    }
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      u32 zz = (Q::kSigned ? 1u << (Q::kBits - 1) : 0u) * 0x01010101u;
      if constexpr (Q::kZp == ZeroPointKind::kInteger) zz = static_cast<u32>(zero(s, nt)) * 0x01010101u;
      if constexpr (Code::kInt && Q::kBits == 8) {
        b[nt] = u[nt] ^ 0x80808080u;  // offset binary to two's complement
      } else if constexpr (Code::kInt) {
        b[nt] = ((u[nt] | 0x80808080u) - zz) ^ 0x80808080u;
      } else {
        const u32 t = (u[nt] | 0x10101010u) - zz;                  // 16 + c - z, 1..31
        const u32 neg = ((t >> 4) & 0x01010101u) ^ 0x01010101u;     // 1 where c < z
        const u32 mag = ((t & 0x0F0F0F0Fu) ^ (neg * 0x0Fu)) + neg;  // |c - z|
        b[nt] = mag | (neg << 7);
      }
    }
  }

  // The codes of the slab, one per byte: u[nt] = the four codes of channel nt * 8 + lane / 4.
  __device__ __forceinline__ static void codes(const Slab& s, u32 (&u)[8]) {
    if constexpr (Q::kBits == 4) {
      // Word m holds pairs 4m .. 4m + 3: nibbles 0, 1, 4, 5 are channel nt = 2m, nibbles 2, 3, 6, 7 nt = 2m + 1.
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const u32 x = s.w[m];
        u[2 * m] = (x & 0x000F000Fu) | ((x << 4) & 0x0F000F00u);
        u[2 * m + 1] = ((x >> 8) & 0x000F000Fu) | ((x >> 4) & 0x0F000F00u);
      }
    } else {
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) u[nt] = s.w[nt];
    }
  }
};

// 8-bit float weights in the activations' own code (W8A8 FP8: e4m3 weights with e4m3 activations): the
// packed bytes are the mma's operand as they are.
template <class Q>
struct NativeWeights {
  using Slab = typename IntWeights<Q>::Slab;
  static constexpr bool kFoldable = false;
  static_assert(Q::kBits == 8 && Q::kZp == ZeroPointKind::kNone, "8-bit float codes without a zero point");
  __device__ __forceinline__ static void load_words(Slab& s, u32 unit, int kk, int lane) {
    load_slab_words<Q::kBits>(unit, kk, lane, s.w);
  }
  template <int kHalves>
  __device__ __forceinline__ static void select(Slab& s, int part) {
    IntWeights<Q>::template select<kHalves>(s, part);
  }
  template <class Code>
  __host__ __device__ static constexpr float unit() {
    return 1.0f;
  }
  template <class Code>
  __host__ __device__ static constexpr bool folds() {
    return false;
  }
  __device__ __forceinline__ static float zero(const Slab&, int) { return 0.0f; }
  template <class Code, bool kFold = false>
  __device__ __forceinline__ static void bytes(const Slab& s, u32 (&b)[8]) {
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) b[nt] = s.w[nt];
  }
};


// ---- The float weight policy -----------------------------------------------------------------------

// Float codes eXmY (one sign bit, kExp >= 1 exponent bits, kMan mantissa bits; OCP FP8 / FP6 / FP4 and
// the other minifloats), packed as their raw bit patterns in the integer layout above. Each pair of
// codes becomes a 16-bit float pair by moving bit fields, with no conversion instruction: the sign to
// bit 15 of its half, the exponent-and-mantissa field to T's lowest exponent bits and highest mantissa
// bits. That reads the weight w as w * 2^-kShift exactly, subnormals included (the field maps linearly
// onto T's lowest binades), kShift = bias(T) - bias(eXmY).
// Under bf16 the pair is multiplied back by 2^kShift at once (w * 2^-kShift can be tiny enough that the
// mma's f32 products would lose it); under f16 the power of two stays, and the scales carry it
// (humming_spec::layout::carried_shift: the host multiplies the scale grid on B, or the channel factor,
// by 2^kCarried).
template <class Q, int kExp, int kMan, u32 kSignBits = 0>
struct FloatWeights {
  using T = typename Q::T;
  using H = Half2<T>;
  static_assert(kExp >= 1 && 1 + kExp + kMan == Q::kBits, "eXmY weights of 1 + X + Y bits");
  static constexpr int kTMan = T::kIsBf16 ? 7 : 10;
  static constexpr int kTBias = T::kIsBf16 ? 127 : 15;
  static_assert(kMan <= kTMan && kExp <= (T::kIsBf16 ? 8 : 5), "the weight's fields must fit A's dtype");
  static constexpr int kShift = kTBias - ((1 << (kExp - 1)) - 1);
  static constexpr bool kMulPow = T::kIsBf16;
  static constexpr int kCarried = kMulPow ? 0 : kShift;
  static constexpr u32 kFieldMask = ((1u << (kExp + kMan)) - 1u) * 0x00010001u;
  static constexpr bool kFoldable = false;
  static_assert(Q::kZp == ZeroPointKind::kNone, "float weights have no zero point");

  using Slab = typename IntWeights<Q>::Slab;

  __device__ __forceinline__ static void load_words(Slab& s, u32 unit, int kk, int lane) {
    load_slab_words<Q::kBits>(unit, kk, lane, s.w);
  }
  template <int kHalves>
  __device__ __forceinline__ static void select(Slab& s, int part) {
    IntWeights<Q>::template select<kHalves>(s, part);
  }

  // 4-bit codes (kSignBits, from humming_spec::layout::float4_sign_bits): in each half of a word, slot j
  // keeps its field at bits 3j .. 3j + 2 and its sign at bit (kSignBits >> 4j) & 15, so that the field
  // moves by kT - 3j, and where the sign sits at 15 - (kT - 3j) it moves with it.
  static constexpr int kT = kTMan - kMan;  // the field's lowest bit in T
  static constexpr bool kFloat4 = Q::kBits == 4;
  static_assert(kFloat4 == (kSignBits != 0), "4-bit float codes, and only they, come with their sign bits");

  __device__ __forceinline__ static u32 shift_left(u32 x, int n) { return n >= 0 ? x << n : x >> -n; }

  // Both codes of pair q as a 16-bit float pair, w * 2^-kShift (kMulPow: w).
  __device__ __forceinline__ static u32 pair_value(const u32 (&w)[Q::kBits], int q) {
    u32 x;
    if constexpr (kFloat4) {
      const int j = q % 4;
      const int d = kT - 3 * j;
      const int e = 15 - static_cast<int>((kSignBits >> (4 * j)) & 15u);
      const u32 field = (7u << kT) * 0x00010001u;
      if (d == e) {
        x = shift_left(w[q / 4], d) & (field | 0x80008000u);
      } else {
        x = (shift_left(w[q / 4], d) & field) | (shift_left(w[q / 4], e) & 0x80008000u);
      }
    } else {
      const u32 c = code_pair<Q::kBits>(w, q);
      x = ((c & kFieldMask) << kT) | ((c << (16 - Q::kBits)) & 0x80008000u);
    }
    if constexpr (kMulPow) x = H::mul(x, exact_pair<T>(pow2f(kShift)));
    return x;
  }

  template <bool kMulScale, bool kAOrder, int kPairs, bool kFold>
  __device__ __forceinline__ static void dequant(Slab& s, u32 (&frag)[16]) {
    static_assert(!kFold, "float weights do not fold offsets");
#pragma unroll
    for (int q = 0; q < kPairs; ++q) {
      const int nt = q / 2;
      u32 v = pair_value(s.w, q);
      if constexpr (kMulScale && Q::kScaleOnB) v = H::mul(v, broadcast_half(s.sw[nt >> 1], nt & 1));
      const int slot = kAOrder ? (nt / 2) * 4 + (nt & 1) + 2 * (q & 1) : q;
      frag[slot] = v;
    }
  }
};

}  // namespace humming
