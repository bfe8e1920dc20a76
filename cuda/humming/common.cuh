// humming: the types every component shares: element tags, the format of one kernel (QuantConfig) and
// its tile (Tile). The runtime contract (GemmParams, flag bits, limits) is abi.cuh, generated from the
// Rust side (humming_spec::abi).
//
// The headers are self-contained (no CUDA toolkit headers): 16-bit floats are carried as raw bits and
// all arithmetic on them is inline PTX, so the same source compiles with NVCC and with NVRTC without
// include paths. Requires sm_80 or newer (cp.async, bf16 tensor cores, f16x2/bf16x2 conversions).
#pragma once
#include "abi.cuh"

namespace humming {

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned long long u64;

// Element-type tags. Values of both are 16-bit patterns in a u16 (pairs in a u32).
struct f16 {
  static constexpr bool kIsBf16 = false;
};
struct bf16 {
  static constexpr bool kIsBf16 = true;
};

// std::conditional without the toolkit's headers.
template <bool kFirst, class A, class B>
struct Pick {
  using type = A;
};
template <class A, class B>
struct Pick<false, A, B> {
  using type = B;
};

// 8-bit activation codes (the mma's operand type): OCP e4m3 / e5m2 with f32 accumulation (sm_89+), or s8
// with s32 accumulation. kLinear: the largest magnitude m for which the code with bits m is m * 2^-kUnitExp
// (the subnormals and the first binade: the "normalized integer" form of small integer weights).
struct CodeE4M3 {
  static constexpr bool kInt = false;
  static constexpr bool kE4M3 = true;
  static constexpr int kUnitExp = 9;  // bias 7 + 3 mantissa bits - 1
  static constexpr int kLinear = 16;
};
struct CodeE5M2 {
  static constexpr bool kInt = false;
  static constexpr bool kE4M3 = false;
  static constexpr int kUnitExp = 16;  // bias 15 + 2 mantissa bits - 1
  static constexpr int kLinear = 8;
};
struct CodeS8 {
  static constexpr bool kInt = true;
  static constexpr bool kE4M3 = false;
  static constexpr int kUnitExp = 0;
  static constexpr int kLinear = 127;
};

enum class ZeroPointKind : int { kNone = 0, kInteger = 1, kFloatOffset = 2 };
enum class EpilogueKind : int { kNone = 0, kRelu = 1, kSilu = 2, kGelu = 3, kGeluTanh = 4, kSiluGlu = 5 };

// Everything about the number formats of one kernel.
template <class T_, int kBits_, bool kSigned_, ZeroPointKind kZp_, int kGroup_, bool kScaleOnB_,
          bool kChannelScale_, bool kBias_, EpilogueKind kEpilogue_, int kABytes_ = 2, int kActGroup_ = 0,
          int kBlockN_ = 0>
struct QuantConfig {
  using T = T_;  // C's element type, and that of the scale grid on B (A's too, for 16-bit activations)
  static constexpr int kABytes = kABytes_;  // bytes of one element of A: 2, or 1 for 8-bit codes
  static constexpr int kBits = kBits_;
  static constexpr bool kSigned = kSigned_;
  static constexpr ZeroPointKind kZp = kZp_;
  static constexpr int kGroup = kGroup_;  // K extent of a row of the scale grid on B; 0: none or per channel
  static constexpr bool kScaleOnB = kScaleOnB_;  // a grid of A-dtype scales multiplies the weights
  static constexpr bool kChannelScale = kChannelScale_;  // an f32 factor per channel multiplies C
  static constexpr bool kBias = kBias_;
  static constexpr EpilogueKind kEpilogue = kEpilogue_;
  // K extent of a group of activation scales (8-bit A, GemmParams::a_scales): each group's partial sums
  // are promoted times its row scales; 0: one scale per row, applied in the epilogue.
  static constexpr int kActGroup = kActGroup_;
  // N extent of a weight block scale (block scales; 0 otherwise): the persistent kernel reads the exact
  // f32 block scales, one per block (humming_spec::layout::WeightLayout::KMajor).
  static constexpr int kBlockN = kBlockN_;
  static_assert(kBits >= 1 && kBits <= 8, "weight width must be 1..8 bits");
  static_assert(kGroup == 0 || (kGroup >= kMmaKBits / (8 * kABytes_) && (kGroup & (kGroup - 1)) == 0),
                "a group is a power of two of at least one mma K step (humming_spec::layout::check_group_size)");
  static_assert(!(kSigned && kZp != ZeroPointKind::kNone), "zero points need unsigned codes");
  static_assert(kABytes == 2 || kABytes == 1, "A is 16-bit or 8-bit");
  static_assert(kActGroup == 0 || (kABytes == 1 && kActGroup >= 64 && (kActGroup & (kActGroup - 1)) == 0),
                "activation groups: 8-bit A, a power of two of at least one warp slice");
};

// One tile configuration. kWgmma: the Hopper wgmma kernel (one warpgroup of four warps along N per 64
// of BK, each warp over all BM rows and 64, 32 or 16 channels; see gemm.cuh), else mma.sync.
// CONSUMER_REGS_ > 0 (wgmma only): a producer warpgroup after the compute warps issues every copy of
// the stage ring; it gives its registers back (setmaxnreg) down to kProducerRegs per thread and the
// compute warps take kConsumerRegs = CONSUMER_REGS_ (the code generator's budget, codegen.rs).
template <int BM_, int BN_, int BK_, int WM_, int WN_, int WK_, int STAGES_, bool WGMMA_ = false, int CONSUMER_REGS_ = 0>
struct Tile {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, WK = WK_, STAGES = STAGES_;
  static constexpr bool kWgmma = WGMMA_;
  static constexpr bool kProducer = CONSUMER_REGS_ > 0;
  static constexpr int kConsumerRegs = CONSUMER_REGS_;
  static constexpr int kProducerRegs = humming::kProducerRegs;
  static_assert(!kProducer || (kWgmma && CONSUMER_REGS_ % 8 == 0 && CONSUMER_REGS_ >= 24 && CONSUMER_REGS_ <= 256),
                "a producer warpgroup only with wgmma; setmaxnreg counts are multiples of 8 in 24..256");
  static_assert(WK == 64 && (WN == 64 || (kWgmma && (WN == 32 || WN == 16))),
                "warp tiles are 64 deep and 64 wide (wgmma: or 32 or 16 wide)");
  static_assert(kWgmma || ((WM == 8 || (WM % 16 == 0 && WM <= 64)) && BM % WM == 0),
                "mma.sync: warp M must be 8, 16, 32, 48 or 64 and divide block M");
  static_assert(!kWgmma || ((BN == 4 * WN || BN == 8 * WN) && WM == BM && BM % 8 == 0 && BM * WN <= 4096 &&
                             (BK == 64 || BK == 128) && BN / WN * BK / 64 <= 16 && STAGES >= 3),
                "wgmma: block (M, 4 or 8 x warp N, 64 or 128), warp (block M, 16, 32 or 64, 64), M * warp N <= 4096, "
                "at most 16 warps, at least 3 stages");
  static_assert(STAGES >= 2 && STAGES <= kMaxStages, "2 to kMaxStages pipeline stages (abi.cuh)");
};

}  // namespace humming
