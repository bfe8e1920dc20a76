// humming: the row policies. Which rows of A a tile reads, which rows of C it writes, and whose
// weights it multiplies them by: a dense GEMM's consecutive rows, or one of the mixture-of-experts
// layouts (GemmParams::route and the fields after it):
//
//   IndexedRows            vLLM fused_moe: block-M slots of sorted ids, one expert per block; slot id i
//                          reads row i / top_k of A and writes row i of C
//   GroupedContiguousRows  DeepGEMM contiguous: expert e owns rows offsets[e] .. offsets[e + 1]
//   GroupedMaskedRows      DeepGEMM masked: expert e owns rows e * max_m .. e * max_m + counts[e]
//
// Every index read from the routing buffers is clamped to the problem, so bad routing data can skip or
// repeat work but never reads or writes outside A, B or C.
#pragma once
#include "ptx.cuh"

namespace humming {

// The rows of one output tile: `m0`, the first row (dense, grouped) or slot (indexed); `rows`, how many
// rows from m0 hold data (indexed: BM, each slot checked on its own); `expert`, whose weights.
struct TileRows {
  int m0, rows, expert;
};

struct DenseRows {
  static constexpr bool kMoe = false, kIndexed = false;
  template <int BM>
  __device__ __forceinline__ static bool begin(const GemmParams& p, int tile_m, TileRows& t) {
    t.m0 = tile_m * BM;
    t.rows = p.m - t.m0;
    t.expert = 0;
    return true;
  }
  // Whether row r of the tile reads a row of A, and which (`src`). (Against p.m, a parameter, rather
  // than t.rows: nothing of the tile's rows stays live in registers across the main loop.)
  __device__ __forceinline__ static bool read_row(const GemmParams& p, const TileRows& t, int r, int& src) {
    src = t.m0 + r;
    return src < p.m;
  }
  // Row of C that row r of the tile writes, or -1 for none.
  __device__ __forceinline__ static int write_row(const GemmParams& p, const TileRows& t, int r) {
    return t.m0 + r < p.m ? t.m0 + r : -1;
  }
  // Row of A behind row `row` of C (a written row).
  __device__ __forceinline__ static int a_row(const GemmParams&, int row) { return row; }
};

// The grouped layouts: a tile is rows [m0, m0 + rows) of A and C, all of one expert.
struct GroupedRows {
  static constexpr bool kMoe = true, kIndexed = false;
  __device__ __forceinline__ static bool read_row(const GemmParams&, const TileRows& t, int r, int& src) {
    src = t.m0 + r;
    return r < t.rows;
  }
  __device__ __forceinline__ static int write_row(const GemmParams&, const TileRows& t, int r) {
    return r < t.rows ? t.m0 + r : -1;
  }
  __device__ __forceinline__ static int a_row(const GemmParams&, int row) { return row; }
};

struct IndexedRows {
  static constexpr bool kMoe = true, kIndexed = true;
  template <int BM>
  __device__ __forceinline__ static bool begin(const GemmParams& p, int tile_m, TileRows& t) {
    grid_dependency_wait();  // the routing buffers may come from the previous kernel
    t.m0 = tile_m * BM;
    t.rows = BM;
    if (t.m0 >= *p.route_slots) return false;
    t.expert = p.expert_ids[tile_m];
    return t.expert >= 0 && t.expert < p.experts;
  }
  __device__ __forceinline__ static int slot(const GemmParams& p, const TileRows& t, int r) {
    const int id = __ldg(p.route + t.m0 + r);
    return id >= 0 && id < p.m * p.top_k ? id : -1;
  }
  __device__ __forceinline__ static bool read_row(const GemmParams& p, const TileRows& t, int r, int& src) {
    const int id = slot(p, t, r);
    src = id / p.top_k;
    return id >= 0;
  }
  __device__ __forceinline__ static int write_row(const GemmParams& p, const TileRows& t, int r) {
    return slot(p, t, r);
  }
  __device__ __forceinline__ static int a_row(const GemmParams& p, int row) { return row / p.top_k; }
};

struct GroupedContiguousRows : GroupedRows {
  // Expert e's rows, clamped to [0, M] and to start where the previous expert's end.
  __device__ __forceinline__ static void span(const GemmParams& p, int e, int& lo, int& hi) {
    lo = min(max(__ldg(p.route + e), 0), p.m);
    hi = min(max(__ldg(p.route + e + 1), lo), p.m);
  }
  // Tile tile_m of the experts' tiles in expert order (ceil(rows_e / BM) each): each lane counts the
  // tiles of experts lane, lane + 32, ... in turn, a warp scan finds the expert whose tiles hold it.
  template <int BM>
  __device__ __forceinline__ static bool begin(const GemmParams& p, int tile_m, TileRows& t) {
    grid_dependency_wait();
    const int lane = threadIdx.x & 31;
    int before = 0;  // tiles of the experts before this round
    for (int e0 = 0; e0 < p.experts; e0 += 32) {
      const int e = e0 + lane;
      int lo = 0, hi = 0;
      if (e < p.experts) span(p, e, lo, hi);
      const int tiles = (hi - lo + BM - 1) / BM;
      int incl = tiles;
#pragma unroll
      for (int d = 1; d < 32; d *= 2) {
        const int v = __shfl_up_sync(0xffffffffu, incl, d);
        if (lane >= d) incl += v;
      }
      const int first = before + incl - tiles;
      const unsigned hit = __ballot_sync(0xffffffffu, tiles > 0 && tile_m >= first && tile_m < first + tiles);
      if (hit != 0) {
        const int src = __ffs(hit) - 1;
        const int f = __shfl_sync(0xffffffffu, first, src);
        const int l = __shfl_sync(0xffffffffu, lo, src);
        const int h = __shfl_sync(0xffffffffu, hi, src);
        t.expert = e0 + src;
        t.m0 = l + (tile_m - f) * BM;
        t.rows = h - t.m0;
        return true;
      }
      before += __shfl_sync(0xffffffffu, incl, 31);
    }
    return false;
  }
};

struct GroupedMaskedRows : GroupedRows {
  template <int BM>
  __device__ __forceinline__ static bool begin(const GemmParams& p, int tile_m, TileRows& t) {
    grid_dependency_wait();
    const int per = (p.expert_rows + BM - 1) / BM;  // tiles per expert
    t.expert = tile_m / per;
    if (t.expert >= p.experts) return false;
    const int local = (tile_m - t.expert * per) * BM;
    const int count = min(max(__ldg(p.route + t.expert), 0), p.expert_rows);
    t.m0 = t.expert * p.expert_rows + local;
    t.rows = count - local;
    return t.rows > 0;
  }
};

// Points the weight fields of `q` (a copy of the launch's parameters) at expert e's.
__device__ __forceinline__ void select_expert(GemmParams& q, int e) {
  const long long ee = e;
  q.b = static_cast<const char*>(q.b) + ee * q.b_expert;
  if (q.scales != nullptr) q.scales = static_cast<const u16*>(q.scales) + ee * q.s_expert;
  if (q.zeros != nullptr) q.zeros = static_cast<const u16*>(q.zeros) + ee * q.s_expert;
  if (q.channel != nullptr) q.channel += ee * q.n;
  if (q.bias != nullptr) q.bias = static_cast<const u16*>(q.bias) + ee * q.n;
}

}  // namespace humming
