// humming: the weight-only quantized GEMM kernel, C[M, N] = A[M, K] * dequant(B)[N, K]^T.
//
// One CTA computes a BM x BN tile of C. Warps are arranged (K, M, N) = (BK/64, BM/WM, BN/64); each warp
// owns a WM x 64 tile of C and one 64-deep slice of every BK step. Per BK step a STAGES-deep cp.async
// pipeline brings the A tile, the packed B units and the scale/zero-point rows into shared memory.
// Per k16 slab a warp loads its B fragments with one shared load per bit-plane, dequantizes them in
// registers (magic-number trick, zero point, group scale), loads A with ldmatrix.x4 and issues
// mma.sync m16n8k16 with f32 accumulation. Warps along K are reduced through shared memory; the
// epilogue applies the channel scale, bias and fused activation in f32 and writes C rows < M only.
//
// Split-K (gridDim.z = splits > 1, for grids too small to fill the GPU): split s walks its own range
// of BK steps and stores its f32 partial tile in the workspace; the last split to finish a tile (an
// atomic ticket per tile) sums the partials in split order 0, 1, ... (deterministic, independent of
// arrival order), runs the epilogue and resets the tile's ticket to zero for the next launch.
#pragma once
#include "common.cuh"
#include "dequant.cuh"
#include "epilogue.cuh"
#include "loader.cuh"
#include "mma.cuh"

namespace humming {

template <class Q, class Tl>
struct Gemm {
  using T = typename Q::T;
  using L = StageLayout<Q, Tl>;
  static constexpr int kWarpsN = L::kWarpsN;
  static constexpr int kWarpsK = L::kWarpsK;
  static constexpr int kWarpsM = Tl::BM / Tl::WM;
  static constexpr int kThreads = kWarpsM * kWarpsN * kWarpsK * 32;
  // Warp tiles of 8 or 16 rows use the weights as the mma's A operand (16 channels x 16 k) and the rows
  // of A as its B operand (one n8 tile per 8 rows), "swap AB": at M <= 8 this halves the mma count (one
  // n8 tile instead of an m16 tile that is mostly padding), and each thread's accumulators hold only its
  // own 8 channels, so group scales go on the f32 accumulators once per group and stage (16 fma per n8
  // tile and thread) instead of on every dequantized weight pair (64 f16x2 multiplies per thread and
  // stage).
  static constexpr bool kSwapAB = Tl::WM <= 16;
  static constexpr int kTokTiles = Tl::WM / 8;  // n8 tiles of A rows per warp when swapped
  static constexpr int kMTiles = kSwapAB ? 1 : Tl::WM / 16;
  // Accumulator tiles per m16 row block; swapped: 4 m16 channel tiles per n8 tile of rows.
  static constexpr int kAccN = kSwapAB ? 4 * kTokTiles : 8;
  static constexpr bool kScaleOnAcc =
      kSwapAB && Q::kScaleOnB && Q::kGroup >= 64 && Q::kZp != ZeroPointKind::kFloatOffset;

  // Swapped accumulators acc[0][i][j] (i = tt * 4 + mt): row (of A and C) 8 tt + 2 (lane % 4) + j % 2
  // of the warp tile, channel (2 mt + j / 2) * 8 + lane / 4 of the warp's 64.
  __device__ __forceinline__ static int swapped_row(int i, int j, int lane) { return (i >> 2) * 8 + 2 * (lane & 3) + (j & 1); }
  __device__ __forceinline__ static int swapped_col(int i, int j, int lane) { return (2 * (i & 3) + (j >> 1)) * 8 + (lane >> 2); }
  static constexpr int kPipelineBytes = Tl::STAGES * L::kStageBytes;
  static constexpr int kReduceBytes = (kWarpsK - 1) * Tl::BM * Tl::BN * 4;
  static constexpr int kSmemBytes = kPipelineBytes > kReduceBytes ? kPipelineBytes : kReduceBytes;
  static_assert(kThreads <= 1024, "too many threads per CTA");

  __device__ __forceinline__ static void run(const GemmParams& p) {
    extern __shared__ __align__(128) char smem[];
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int wn = warp % kWarpsN;
    const int wm = (warp / kWarpsN) % kWarpsM;
    const int kw = warp / (kWarpsN * kWarpsM);
    const int n0 = blockIdx.x * Tl::BN;
    const int m0 = blockIdx.y * Tl::BM;
    const bool n_valid = n0 + wn * 64 < p.n;

    float acc[kMTiles][kAccN][4];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < kAccN; ++nt)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[mt][nt][j] = 0.0f;

    // Per-channel values used on B (zero points, float offsets, and the scale with a float offset) are
    // loaded once, in the permuted order of dequant.cuh: this lane's 8 channels n = nt*8 + lane/4.
    u32 ch_s[4] = {0, 0, 0, 0}, ch_z[4] = {0, 0, 0, 0};
    if constexpr (Q::kGroup == 0) {
      if (n_valid) {
        const int off = n0 + wn * 64 + (lane >> 2) * 8;
        if constexpr (Q::kScaleOnB) {
          const uint4 v = *reinterpret_cast<const uint4*>(static_cast<const u16*>(p.scales) + off);
          ch_s[0] = v.x; ch_s[1] = v.y; ch_s[2] = v.z; ch_s[3] = v.w;
        }
        if constexpr (Q::kZp != ZeroPointKind::kNone) {
          const uint4 v = *reinterpret_cast<const uint4*>(static_cast<const u16*>(p.zeros) + off);
          ch_z[0] = v.x; ch_z[1] = v.y; ch_z[2] = v.z; ch_z[3] = v.w;
        }
      }
    }

    const int iters_total = (p.k + Tl::BK - 1) / Tl::BK;
    const int split = blockIdx.z;
    const int it_begin = static_cast<int>(static_cast<long long>(iters_total) * split / p.splits);
    const int it_end = static_cast<int>(static_cast<long long>(iters_total) * (split + 1) / p.splits);
    const int iters = it_end - it_begin;
    StageLoader<Q, Tl, kThreads> loader(p, m0, n0, it_begin * Tl::BK);
    const u32 sbase = smem_addr(smem);
#pragma unroll
    for (int s = 0; s < Tl::STAGES - 1; ++s) {
      if (s < iters) loader.load(sbase + s * L::kStageBytes, p);
      cp_async_commit();
    }

    // Stage buffers read and written this iteration (it % STAGES and (it + STAGES - 1) % STAGES).
    int read_stage = 0, write_stage = Tl::STAGES - 1;
    for (int it = 0; it < iters; ++it) {
      cp_async_wait<Tl::STAGES - 2>();
      __syncthreads();
      const int next = it + Tl::STAGES - 1;
      if (next < iters) {
        loader.load(sbase + write_stage * L::kStageBytes, p);
      }
      cp_async_commit();

      const u32 st = sbase + read_stage * L::kStageBytes;
      read_stage = read_stage == Tl::STAGES - 1 ? 0 : read_stage + 1;
      write_stage = write_stage == Tl::STAGES - 1 ? 0 : write_stage + 1;
      const int k0 = (it_begin + it) * Tl::BK;
      if (!n_valid || k0 + kw * 64 >= p.k) continue;
      const u32 unit = st + L::kBOffset + (kw * kWarpsN + wn) * L::kUnitBytes;
      const u32 a_tile = st + L::kAOffset + kw * (Tl::BM * 128);
      float part[kScaleOnAcc ? kAccN : 1][4];  // this stage's sums, before the group scale (kScaleOnAcc)
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        u32 w[Q::kBits];
        load_slab_words<Q::kBits>(unit, kk, lane, w);
        u32 sw[4] = {0, 0, 0, 0}, zw[4] = {0, 0, 0, 0};
        if constexpr (Q::kGroup > 0) {
          const int r = Q::kGroup < Tl::BK ? (kw * 64 + kk * 16) / Q::kGroup : 0;
          const int idx = r * Tl::BN + wn * 64 + (lane >> 2) * 8;
          if constexpr (!kScaleOnAcc) {
            const uint4 v = lds128(st + L::kSOffset + 2 * idx);
            sw[0] = v.x; sw[1] = v.y; sw[2] = v.z; sw[3] = v.w;
          }
          if constexpr (Q::kZp != ZeroPointKind::kNone) {
            const uint4 z = lds128(st + L::kZOffset + 2 * idx);
            zw[0] = z.x; zw[1] = z.y; zw[2] = z.z; zw[3] = z.w;
          }
        } else {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            sw[i] = ch_s[i];
            zw[i] = ch_z[i];
          }
        }
        u32 frag[16];
        dequant_slab<Q, !kScaleOnAcc, kSwapAB>(w, sw, zw, frag);
        if constexpr (kSwapAB) {
          // a[2 t] / a[2 t + 1] = k 0..7 / 8..15 of rows 8t..8t+7 of the warp tile (lanes 8i..8i+7 address
          // matrix i), so each mma's B operand is a register pair.
          const int row = wm * Tl::WM + ((lane >> 4) << 3) * (kTokTiles - 1) + (lane & 7);
          const int chunk = kk * 2 + ((lane >> 3) & 1);
          u32 a[2 * kTokTiles];
          if constexpr (kTokTiles == 1) {
            ldmatrix_x2(*reinterpret_cast<u32(*)[2]>(a), a_tile + a_swizzle(row, chunk));
          } else {
            ldmatrix_x4(*reinterpret_cast<u32(*)[4]>(a), a_tile + a_swizzle(row, chunk));
          }
#pragma unroll
          for (int mt = 0; mt < 4; ++mt) {
            // Channels mt*16 + lane/4 (+ 8) are the weight pairs nt = 2 mt (+ 1) of the B layout.
            const u32(&wf)[4] = *reinterpret_cast<const u32(*)[4]>(&frag[4 * mt]);
#pragma unroll
            for (int tt = 0; tt < kTokTiles; ++tt) {
              if constexpr (kScaleOnAcc) {
                if (kk == 0) {
                  mma_16816_zero<T>(part[tt * 4 + mt], wf, a[2 * tt], a[2 * tt + 1]);
                } else {
                  mma_16816<T>(part[tt * 4 + mt], wf, a[2 * tt], a[2 * tt + 1]);
                }
              } else {
                mma_16816<T>(acc[0][tt * 4 + mt], wf, a[2 * tt], a[2 * tt + 1]);
              }
            }
          }
        } else {
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {
            const int row = wm * Tl::WM + mt * 16 + (lane & 15);
            const int chunk = kk * 2 + (lane >> 4);
            u32 a[4];
            ldmatrix_x4(a, a_tile + a_swizzle(row, chunk));
#pragma unroll
            for (int nt = 0; nt < 8; ++nt) mma_16816<T>(acc[mt][nt], a, frag[2 * nt], frag[2 * nt + 1]);
          }
        }
      }
      if constexpr (kScaleOnAcc) {
        // This warp's 64-deep slice lies in one group (G >= 64): acc += scale(channel) * part.
        const int r = Q::kGroup < Tl::BK ? (kw * 64) / Q::kGroup : 0;
        const int idx = r * Tl::BN + wn * 64 + (lane >> 2) * 8;
        const uint4 v = lds128(st + L::kSOffset + 2 * idx);
        const u32 sv[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int mt = 0; mt < 4; ++mt) {
          const float s0 = Half2<T>::to_float(static_cast<u16>(sv[mt] & 0xFFFFu));  // channel mt*16 + lane/4
          const float s1 = Half2<T>::to_float(static_cast<u16>(sv[mt] >> 16));      // channel mt*16 + lane/4 + 8
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
    }
    cp_async_wait<0>();

    // Reduce the warps along K through shared memory (the pipeline buffers are free now).
    if constexpr (kWarpsK > 1) {
      __syncthreads();
      float* red = reinterpret_cast<float*>(smem);
      const int slot_base = (wm * kWarpsN + wn) * kMTiles * kAccN;
      constexpr int kSlots = kWarpsM * kWarpsN * kMTiles * kAccN;
      if (kw > 0) {
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
          for (int nt = 0; nt < kAccN; ++nt)
#pragma unroll
            for (int j = 0; j < 4; ++j)
              red[(((kw - 1) * kSlots + slot_base + mt * kAccN + nt) * 4 + j) * 32 + lane] = acc[mt][nt][j];
      }
      __syncthreads();
      if (kw == 0) {
#pragma unroll
        for (int k2 = 1; k2 < kWarpsK; ++k2)
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
            for (int nt = 0; nt < kAccN; ++nt)
#pragma unroll
              for (int j = 0; j < 4; ++j)
                acc[mt][nt][j] += red[(((k2 - 1) * kSlots + slot_base + mt * kAccN + nt) * 4 + j) * 32 + lane];
      }
    }

    // Split-K: publish this split's partial tile (row-major [BM][BN] f32, rows < M only); the last
    // split to finish the tile sums all partials in split order with every thread of the CTA
    // (16-byte loads, all splits in flight) and writes C itself.
    if (p.splits > 1) {
      __shared__ int s_last;
      const int tile = blockIdx.y * gridDim.x + blockIdx.x;
      const int tiles = gridDim.x * gridDim.y;
      constexpr int kTileFloats = Tl::BM * Tl::BN;
      const long long split_stride = static_cast<long long>(tiles) * kTileFloats;
      float* ws_tile = p.workspace + static_cast<long long>(tile) * kTileFloats;
      if (kw == 0 && n_valid && kSwapAB) {
        float* ws = ws_tile + split * split_stride;
#pragma unroll
        for (int i = 0; i < kAccN; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int row = wm * Tl::WM + swapped_row(i, j, lane);
            const int col = wn * 64 + swapped_col(i, j, lane);
            if (m0 + row < p.m) __stcg(ws + row * Tl::BN + col, acc[0][i][j]);
          }
      } else if (kw == 0 && n_valid) {
        float* ws = ws_tile + split * split_stride;
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
          for (int nt = 0; nt < 8; ++nt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int row = wm * Tl::WM + mt * 16 + (lane >> 2) + h * 8;
              const int col = wn * 64 + nt * 8 + 2 * (lane & 3);
              if (m0 + row < p.m) {
                __stcg(reinterpret_cast<float2*>(ws + row * Tl::BN + col), make_float2(acc[mt][nt][2 * h], acc[mt][nt][2 * h + 1]));
              }
            }
      }
      __threadfence();
      __syncthreads();
      if (threadIdx.x == 0) s_last = atomicAdd(p.locks + tile, 1) == p.splits - 1;
      __syncthreads();
      if (!s_last) return;
      __threadfence();
      const int rows = min(Tl::BM, p.m - m0);
      constexpr int kQuads = Tl::BN / 4;
      u32* c = static_cast<u32*>(p.c);
      for (int i = threadIdx.x; i < rows * kQuads; i += kThreads) {
        const int row = i / kQuads, col = (i % kQuads) * 4;
        if (n0 + col >= p.n) continue;
        const float* src = ws_tile + row * Tl::BN + col;
        float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        int s = 0;
        for (; s + 4 <= p.splits; s += 4) {
          float4 v[4];
#pragma unroll
          for (int u = 0; u < 4; ++u) v[u] = __ldcg(reinterpret_cast<const float4*>(src + (s + u) * split_stride));
#pragma unroll
          for (int u = 0; u < 4; ++u) {
            sum.x += v[u].x; sum.y += v[u].y; sum.z += v[u].z; sum.w += v[u].w;
          }
        }
        for (; s < p.splits; ++s) {
          const float4 v = __ldcg(reinterpret_cast<const float4*>(src + s * split_stride));
          sum.x += v.x; sum.y += v.y; sum.z += v.z; sum.w += v.w;
        }
        const long long at = (static_cast<long long>(m0 + row) * p.ldc + n0 + col) >> 1;
        c[at] = finish_pair<Q>(sum.x, sum.y, p, n0 + col);
        c[at + 1] = finish_pair<Q>(sum.z, sum.w, p, n0 + col + 2);
      }
      if (threadIdx.x == 0) p.locks[tile] = 0;
      return;
    }
    if (kw != 0 || !n_valid) return;

    if constexpr (kSwapAB) {
      u16* c16 = static_cast<u16*>(p.c);
#pragma unroll
      for (int i = 0; i < kAccN; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int row = m0 + wm * Tl::WM + swapped_row(i, j, lane);
          const int col = n0 + wn * 64 + swapped_col(i, j, lane);
          if (row < p.m) c16[static_cast<long long>(row) * p.ldc + col] = finish_one<Q>(acc[0][i][j], p, col);
        }
      return;
    }
    u32* c = static_cast<u32*>(p.c);
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      const int row0 = m0 + wm * Tl::WM + mt * 16 + (lane >> 2);
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const int col = n0 + wn * 64 + nt * 8 + 2 * (lane & 3);
        if (row0 < p.m) {
          c[(static_cast<long long>(row0) * p.ldc + col) >> 1] = finish_pair<Q>(acc[mt][nt][0], acc[mt][nt][1], p, col);
        }
        if (row0 + 8 < p.m) {
          c[(static_cast<long long>(row0 + 8) * p.ldc + col) >> 1] = finish_pair<Q>(acc[mt][nt][2], acc[mt][nt][3], p, col);
        }
      }
    }
  }
};

}  // namespace humming
