// humming: atomic split-K (kFlagAtomicC). The K splits of an output tile add their f32 partials into the
// tile's f32 accumulator in the workspace with vector atomics, in whatever order they finish, and the
// last split to take the tile's ticket writes C through the epilogue from the accumulator and zeroes it
// for the next launch (the accumulator and the tickets are zero between launches). No split reloads
// another's partial or waits for one to start. The sum is f32, so a C that fits its dtype never
// overflows on the way; the order of the additions, and so the last bits of C, may vary from launch to
// launch (Reduction::Deterministic in the runtime turns it off).
#pragma once
#include "traits.cuh"

namespace humming {

template <class K>
struct AtomicSplitK {
  using Tl = typename K::Tl;

  // Takes the tile's ticket once every compute thread has added its values; true in the last split,
  // which may then read the whole accumulator (and resets the ticket). The CTA barrier orders every
  // thread's additions before thread 0's ticket, whose release (GPU scope, cumulative) publishes them;
  // its acquire, then the barrier, order the other splits' additions before this CTA's reads.
  __device__ __forceinline__ static bool last(const GemmParams& p, int tile, int splits) {
    __shared__ int s_last;
    K::sync_compute();
    if (threadIdx.x == 0) s_last = atomic_add_acq_rel_gpu(p.locks + tile, 1) == splits - 1;
    K::sync_compute();
    if (!s_last) return false;
    if (threadIdx.x == 0) p.locks[tile] = 0;
    return true;
  }

  // The last split: the sum of eight values of the accumulator, which it leaves zero.
  __device__ __forceinline__ static void take(float* acc_tile, int r, int col, float (&v)[8]) {
    float4* src = reinterpret_cast<float4*>(acc_tile + r * Tl::BN + col);
    const float4 lo = __ldcg(src), hi = __ldcg(src + 1);
    v[0] = lo.x; v[1] = lo.y; v[2] = lo.z; v[3] = lo.w;
    v[4] = hi.x; v[5] = hi.y; v[6] = hi.z; v[7] = hi.w;
    const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    __stcg(src, zero);
    __stcg(src + 1, zero);
  }
};

}  // namespace humming
