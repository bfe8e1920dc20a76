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

}  // namespace humming
