// humming: the tile scheduler. It turns a CTA's place in the grid into the pieces of work it runs, one
// Segment each: a range of BK steps of one output tile, and which K split of that tile the range is.
//
// - Data-parallel and split-K (gridDim.z = splits): one segment, split blockIdx.z of output tile
//   (blockIdx.x, blockIdx.y), its share of the K steps.
// - Stream-K (kFlagStreamK, swap-AB mma.sync tiles; Osama et al., "Stream-K: Work-centric Parallel
//   Decomposition for Dense Matrix Multiplication", PPoPP 2023): the tiles x steps BK steps of the
//   launch, tile-major, are cut into gridDim.x = G equal ranges, one per CTA; a CTA walks the pieces of
//   tiles its range covers in order. The CTAs that share a tile are its K splits in K order (split j =
//   the j-th CTA whose range meets it), so the split-K tails sum them exactly as uniform splits.
// - Persistent (PersistentTiles, the persistent kernel of persistent.cuh): about one CTA per SM walks
//   output tiles blockIdx.x, blockIdx.x + gridDim.x, ... in a raster order that keeps the tiles running
//   at once on few weight tiles and few row tiles, so that both stay in L2.
#pragma once
#include "common.cuh"

namespace humming {

// One piece of work of a CTA: BK steps [it_begin, it_end) of output tile `tile` (column tile tile_n,
// row tile tile_m, of `tiles`), K split `split` of the `splits` that cover that tile. `ring`: the BK
// steps the CTA walked in segments before this one (stream-K), so that its stage ring and the stages'
// mbarrier phases go on where they stopped: step i of the segment uses stage (ring + i) % STAGES,
// phase ((ring + i) / STAGES) % 2.
struct Segment {
  int tile_n, tile_m, tile, tiles, it_begin, it_end, split, splits, ring;
};

template <class Tl>
struct TileScheduler {
  // The one segment of split blockIdx.z of this CTA's output tile, among `tiles`.
  __device__ __forceinline__ static Segment split_segment(const GemmParams& p, int steps, int tiles) {
    const int split = blockIdx.z;
    return Segment{static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y),
                   static_cast<int>(blockIdx.y * gridDim.x + blockIdx.x), tiles,
                   static_cast<int>(static_cast<long long>(steps) * split / p.splits),
                   static_cast<int>(static_cast<long long>(steps) * (split + 1) / p.splits), split, p.splits, 0};
  }

  // Runs `segment(s)` for each segment of this CTA. kSegments false: the tile never runs stream-K
  // (wgmma tiles, and mma.sync tiles of warps over more than 16 rows, whose registers the segment loop
  // would spill), so its one segment runs straight.
  template <bool kSegments, class F>
  __device__ __forceinline__ static void for_each_segment(const GemmParams& p, F&& segment) {
    const int steps = (p.k + Tl::BK - 1) / Tl::BK;
    if constexpr (!kSegments) {
      segment(split_segment(p, steps, static_cast<int>(gridDim.x * gridDim.y)));
      return;
    }
    // Step x lies in the range of CTA ((x + 1) * G - 1) / total. Needs G <= total (every CTA at least
    // one step; the runtime clamps it): the loop runs its body once before the test, which keeps the
    // main loop's register allocation as without stream-K.
    const bool stream_k = (p.flags & kFlagStreamK) != 0;
    const int tiles_n = (p.n + Tl::BN - 1) / Tl::BN;
    const int tiles = stream_k ? tiles_n * ((p.m + Tl::BM - 1) / Tl::BM) : static_cast<int>(gridDim.x * gridDim.y);
    const long long total = static_cast<long long>(tiles) * steps;
    const long long g = gridDim.x;
    long long b = stream_k ? total * blockIdx.x / g : 0;
    const long long e = stream_k ? total * (blockIdx.x + 1) / g : 1;
    int ring = 0;
    do {
      Segment s;
      if (stream_k) {
        const int tile = static_cast<int>(b / steps);
        const long long t0 = static_cast<long long>(tile) * steps;
        const long long end = e < t0 + steps ? e : t0 + steps;
        const int first = static_cast<int>(((t0 + 1) * g - 1) / total);
        const int last = static_cast<int>(((t0 + steps) * g - 1) / total);
        s = Segment{tile % tiles_n, tile / tiles_n, tile, tiles, static_cast<int>(b - t0), static_cast<int>(end - t0),
                    static_cast<int>(blockIdx.x) - first, last - first + 1, ring};
        b = end;
      } else {
        s = split_segment(p, steps, tiles);
        b = e;
      }
      segment(s);
      ring += s.it_end - s.it_begin;
    } while (b < e);
  }
};

// The work of a persistent launch: output tiles of BM rows x BN channels, each cut into `splits` K
// ranges (GemmParams::splits; 1 but for launches of fewer tiles than SMs), unit u = split u % splits of
// tile u / splits, so that a tile's splits run at once on neighbouring CTAs. Tiles go in raster order:
// bands of `raster` row tiles (GemmParams::raster), each walked row tile fastest, then the next weight
// tile, so that the tiles running at once share about gridDim.x / raster weight tiles and raster row
// tiles, which stay in L2.
template <int BM, int BN, int BK>
struct PersistentTiles {
  int rows, tiles_m, tiles_n, tiles, splits, units, steps, raster;

  // `m`: the rows of A the launch reads (p.m, or the gathered rows in use of a MoE launch).
  __device__ __forceinline__ PersistentTiles(const GemmParams& p, int m)
      : rows(m), tiles_m((m + BM - 1) / BM), tiles_n((p.n + BN - 1) / BN), tiles(tiles_m * tiles_n),
        splits(p.splits > 1 ? p.splits : 1), units(tiles * splits), steps((p.k + BK - 1) / BK),
        raster(p.raster > 0 ? p.raster : 1) {}

  struct Unit {
    int tile, tile_m, tile_n, split, kb0, kb1;  // BK steps kb0 .. kb1 of output tile `tile`
  };

  __device__ __forceinline__ Unit unit(int u) const {
    Unit w;
    w.tile = u / splits;
    w.split = u - w.tile * splits;
    w.kb0 = static_cast<int>(static_cast<long long>(steps) * w.split / splits);
    w.kb1 = static_cast<int>(static_cast<long long>(steps) * (w.split + 1) / splits);
    const int band = w.tile / (raster * tiles_n);
    const int in_band = w.tile - band * raster * tiles_n;
    const int rows = min(raster, tiles_m - band * raster);  // row tiles of this band (the last may have fewer)
    w.tile_m = band * raster + in_band % rows;
    w.tile_n = in_band / rows;
    return w;
  }
};

}  // namespace humming
