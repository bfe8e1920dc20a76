// humming: the epilogue. Its math (8-bit activations' row scale, f32 channel factor, bias, fused activation) in f32, then rounding to C's
// dtype; and the two ways a CTA writes its tile of C:
// - from the accumulators' registers, rows < M only (store_registers);
// - staged (wgmma tiles, and the 8-row tile's atomic split-K): the accumulators go to shared memory as
//   an f32 tile, then every thread writes 8 channels of a row at once (one 16-byte store where C
//   allows), optionally summing the tiles of a thread-block cluster's K splits (distributed shared
//   memory) or adding into C with f16 atomics (atomic.cuh).
#pragma once
#include "atomic.cuh"

namespace humming {

template <EpilogueKind E>
__device__ __forceinline__ float apply_epilogue(float x) {
  if constexpr (E == EpilogueKind::kRelu) {
    return x > 0.0f ? x : 0.0f;
  } else if constexpr (E == EpilogueKind::kSilu) {
    return x / (1.0f + __expf(-x));
  } else if constexpr (E == EpilogueKind::kGelu) {
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  } else if constexpr (E == EpilogueKind::kGeluTanh) {
    return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
  } else {
    return x;
  }
}

// Finishes two adjacent outputs (columns col, col + 1 of one row), times the row's factor `rf`, and
// returns them as a C pair.
template <class Q>
__device__ __forceinline__ u32 finish_pair(float v0, float v1, const GemmParams& p, int col, float rf = 1.0f) {
  using H = Half2<typename Q::T>;
  if constexpr (Q::kChannelScale) {
    const float2 s = *reinterpret_cast<const float2*>(p.channel + col);
    v0 *= s.x;
    v1 *= s.y;
  }
  if constexpr (Q::kBias) {
    const u32 b = *reinterpret_cast<const u32*>(static_cast<const u16*>(p.bias) + col);
    v0 += H::to_float(static_cast<u16>(b & 0xFFFFu));
    v1 += H::to_float(static_cast<u16>(b >> 16));
  }
  v0 = apply_epilogue<Q::kEpilogue>(v0) * rf;
  v1 = apply_epilogue<Q::kEpilogue>(v1) * rf;
  return H::from_floats(v0, v1);
}

// Finishes one output (column col), times the row's factor `rf`, and returns it as C bits.
template <class Q>
__device__ __forceinline__ u16 finish_one(float v, const GemmParams& p, int col, float rf = 1.0f) {
  using H = Half2<typename Q::T>;
  if constexpr (Q::kChannelScale) v *= p.channel[col];
  if constexpr (Q::kBias) v += H::to_float(static_cast<const u16*>(p.bias)[col]);
  v = apply_epilogue<Q::kEpilogue>(v) * rf;
  return static_cast<u16>(H::from_floats(v, 0.0f) & 0xFFFFu);
}

// SiLU-GLU: the output of gate channel col (col % 16 < 8) from its sum `g` and its up projection's `u`
// (channel col + 8), in f32: silu(g) * u.
template <class Q>
__device__ __forceinline__ float glu_value(float g, float u, const GemmParams& p, int col) {
  if constexpr (Q::kChannelScale) {
    g *= p.channel[col];
    u *= p.channel[col + 8];
  }
  return g / (1.0f + __expf(-g)) * u;
}

// C's column of gate channel col.
__device__ __forceinline__ int glu_column(int col) { return (col >> 4) * 8 + (col & 7); }

template <class K>
struct Epilogue {
  using Tl = typename K::Tl;
  using Q = typename K::Q;
  using R = typename K::Rows;
  static constexpr int kStageLd = K::kStageLd;

  // The factor of C's row `row` (GemmParams::row_weights; MoE layouts only), 1 without one.
  __device__ __forceinline__ static float row_factor(const GemmParams& p, int row) {
    if constexpr (R::kMoe) {
      return p.row_weights != nullptr ? __ldg(p.row_weights + row) : 1.0f;
    } else {
      return 1.0f;
    }
  }

  // 8-bit activations: the scale of the row of A behind row `row` of C (GemmParams::a_scales), which
  // multiplies the row's sums first; 1 for 16-bit activations and for scales per group (promoted in
  // the main loop).
  __device__ __forceinline__ static float act_scale(const GemmParams& p, int row) {
    if constexpr (K::Act::kBytes == 1 && K::Q::kActGroup == 0) {
      return __ldg(p.a_scales + static_cast<long long>(R::a_row(p, row)) * p.a_scale_stride);
    } else {
      return 1.0f;
    }
  }

  // Writes the four swapped accumulators `v` of this lane's position (rows swapped_row(q, j), channels
  // swapped_col(q, j) of the warp tile at (wm, wn)) to C: rows the row policy maps, channels below N.
  __device__ __forceinline__ static void store_swapped(const GemmParams& p, const float (&v)[4], const TileRows& rows,
                                                       int n0, int wm, int wn, int q, int lane) {
    u16* c16 = static_cast<u16*>(p.c);
#pragma unroll
    for (int j = 0; j < (K::kGlu ? 2 : 4); ++j) {
      const int row = R::write_row(p, rows, wm * Tl::WM + K::swapped_row(q, j, lane));
      const int col = n0 + wn * Tl::WN + K::swapped_col(q, j, lane);
      if (row < 0) continue;
      if constexpr (K::kGlu) {
        // (j and j + 2: channels col and col + 8 of the same row.)
        const float as = act_scale(p, row);
        const float o = glu_value<Q>(v[j] * as, v[j + 2] * as, p, col) * row_factor(p, row);
        c16[static_cast<long long>(row) * p.ldc + glu_column(col)] =
            static_cast<u16>(Half2<typename Q::T>::from_floats(o, 0.0f) & 0xFFFFu);
      } else {
        c16[static_cast<long long>(row) * p.ldc + col] = finish_one<Q>(v[j] * act_scale(p, row), p, col, row_factor(p, row));
      }
    }
  }

  // Writes the accumulators of this warp (K-warp 0, channels below N) to C, rows the row policy maps.
  __device__ __forceinline__ static void store_registers(const GemmParams& p, const typename K::Acc& acc,
                                                         const WarpPlace& w) {
    if constexpr (K::kSwapAB) {
#pragma unroll
      for (int i = 0; i < K::kAccN; ++i) store_swapped(p, acc[0][i], w.rows, w.n0, w.wm, w.wn, i, w.lane);
      return;
    }
    u32* c = static_cast<u32*>(p.c);
#pragma unroll
    for (int mt = 0; mt < K::kMTiles; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = R::write_row(p, w.rows, w.wm * Tl::WM + K::plain_row(mt, h, w.lane));
        if (row < 0) continue;
        const float rf = row_factor(p, row);
        const float as = act_scale(p, row);
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          const int col = w.n0 + w.wn * 64 + K::plain_col(nt, w.lane);
          if constexpr (K::kGlu) {
            // (Tiles nt and nt + 1: channels col and col + 8.)
            if (nt % 2 == 0) {
              const float o0 = glu_value<Q>(acc[mt][nt][2 * h] * as, acc[mt][nt + 1][2 * h] * as, p, col) * rf;
              const float o1 = glu_value<Q>(acc[mt][nt][2 * h + 1] * as, acc[mt][nt + 1][2 * h + 1] * as, p, col + 1) * rf;
              c[(static_cast<long long>(row) * p.ldc + glu_column(col)) >> 1] = Half2<typename Q::T>::from_floats(o0, o1);
            }
          } else {
            c[(static_cast<long long>(row) * p.ldc + col) >> 1] =
                finish_pair<Q>(acc[mt][nt][2 * h] * as, acc[mt][nt][2 * h + 1] * as, p, col, rf);
          }
        }
      }
    }
  }

  // Eight outputs (columns col.. of one row) summed over the `ranks` shared tiles of a cluster at
  // shared::cta address `at`, in rank (split) order: 0 + p_0 + p_1 + ..., the sums of the
  // global-workspace path bit for bit.
  __device__ __forceinline__ static void sum_cluster(float (&v)[8], u32 at, int ranks) {
    float4 part[2 * kMaxClusterSplits];
#pragma unroll
    for (int s = 0; s < kMaxClusterSplits; ++s) {
      if (s < ranks) {
        const u32 remote = map_rank(at, s);
        part[2 * s] = ld_cluster_f4(remote);
        part[2 * s + 1] = ld_cluster_f4(remote + 16);
      }
    }
#pragma unroll
    for (int s = 0; s < kMaxClusterSplits; ++s) {
      if (s < ranks) {
        const float4 lo = part[2 * s], hi = part[2 * s + 1];
        v[0] += lo.x; v[1] += lo.y; v[2] += lo.z; v[3] += lo.w;
        v[4] += hi.x; v[5] += hi.y; v[6] += hi.z; v[7] += hi.w;
      }
    }
  }

  // The staged epilogue: `holds` = this thread's accumulators are part of the tile (kw == 0, channels
  // below N); `rank` of `ranks` CTAs (a cluster when ranks > 1, rank = its split) writes rows rank,
  // rank + ranks, ... of the tile, each summed over the ranks' shared tiles in rank (split) order.
  // kRed (kFlagAtomicC, split `split` of the `splits` of output tile `tile`): the outputs are added to C
  // with f16 atomics once the tile's C is zeroed: by this CTA (`zeroed_here`), else awaited (from thread
  // 0's early read `seen` of the lock word); then the split adds its share to the lock word.
  template <bool kRed = false>
  __device__ __forceinline__ static void staged(const GemmParams& p, const typename K::Acc& acc, bool holds,
                                                const WarpPlace& w, int rank, int ranks, int tile = 0, int split = 0,
                                                int splits = 1, bool zeroed_here = false, int seen = 0) {
    extern __shared__ __align__(128) char smem[];
    K::sync_compute();  // the pipeline buffers (and the K-warp reduction's) are free
    if (holds) {
#pragma unroll
      for (int i = 0; i < K::kAccN; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          reinterpret_cast<float*>(smem)[(w.wm * Tl::WM + K::swapped_row(i, j, w.lane)) * kStageLd + w.wn * Tl::WN +
                                         K::swapped_col(i, j, w.lane)] = acc[0][i][j];
    }
    if (kRed && !zeroed_here) {
      AtomicSplitK<K>::await_zeroed(p, tile, w.m0, w.n0, seen);  // (its barriers also order the shared tile's stores)
    } else if (ranks > 1) {
      cluster_sync();
    } else {
      K::sync_compute();
    }
    const int rows = min(Tl::BM, R::kMoe ? w.rows.rows : p.m - w.m0);
    constexpr int kChunks = Tl::BN / 8;  // 8 channels each
    const bool vec16 = (p.ldc % 8) == 0 && (reinterpret_cast<unsigned long long>(p.c) & 15) == 0;
    const u32 base = smem_addr(smem);
    u32* c = static_cast<u32*>(p.c);
    const int my_rows = rows > rank ? (rows - rank + ranks - 1) / ranks : 0;
    for (int it = threadIdx.x; it < my_rows * kChunks; it += K::kThreads) {
      const int r = rank + (it / kChunks) * ranks;
      const int col = (it % kChunks) * 8;
      const int row = R::write_row(p, w.rows, r);
      if (row < 0 || w.n0 + col >= p.n) continue;  // N is a multiple of 64: a chunk is all in or all out
      const u32 at = base + 4 * (r * kStageLd + col);
      float v[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
      if (ranks == 1) {
        const uint4 lo = lds128(at), hi = lds128(at + 16);
        v[0] = __uint_as_float(lo.x); v[1] = __uint_as_float(lo.y); v[2] = __uint_as_float(lo.z); v[3] = __uint_as_float(lo.w);
        v[4] = __uint_as_float(hi.x); v[5] = __uint_as_float(hi.y); v[6] = __uint_as_float(hi.z); v[7] = __uint_as_float(hi.w);
      } else {
        sum_cluster(v, at, ranks);
      }
      u32 out[4];
      const float rf = row_factor(p, row);
      const float as = act_scale(p, row);
#pragma unroll
      for (int q = 0; q < 4; ++q) out[q] = finish_pair<Q>(v[2 * q] * as, v[2 * q + 1] * as, p, w.n0 + col + 2 * q, rf);
      const long long at_c = (static_cast<long long>(row) * p.ldc + w.n0 + col) >> 1;
      if constexpr (kRed) {
        if (vec16) {
          red_add_f16x8(c + at_c, out[0], out[1], out[2], out[3]);
        } else {
#pragma unroll
          for (int q = 0; q < 4; ++q) red_add_f16x2(c + at_c + q, out[q]);
        }
      } else if (vec16) {
        *reinterpret_cast<uint4*>(c + at_c) = make_uint4(out[0], out[1], out[2], out[3]);
      } else {
#pragma unroll
        for (int q = 0; q < 4; ++q) c[at_c + q] = out[q];
      }
    }
    if constexpr (kRed) {
      AtomicSplitK<K>::finish(p, tile, split, splits);
    } else if (ranks > 1) {
      cluster_sync();  // no CTA leaves while another may still read its shared tile
    }
  }
};

}  // namespace humming
