// humming: atomic split-K (kFlagAtomicC), the lock-word protocol of each output tile. The K splits add
// their outputs into C with f16 atomics once the tile's C is zeroed; no split waits for the others.
//
// Each output tile's lock word goes 0 (before the launch) -> 1 (a CTA claimed the zeroing of the tile's
// C) -> 2 (zeroed, released); then every split, once it has added its outputs, adds its share of -2
// without waiting for a result (split 0 -(splits + 1), the others 1, modulo 2^32: the word reads 2 or
// more, as an unsigned number, until the last share brings it back to 0 for the next launch). Split 0
// claims the zeroing at its start (its compute threads, long before any split ends); a split that ends
// and finds the word still 0 claims it itself, so that no CTA waits for a CTA that may not be resident
// yet (a CTA waits only while a resident one zeroes).
#pragma once
#include "traits.cuh"

namespace humming {

template <class K>
struct AtomicSplitK {
  using Tl = typename K::Tl;
  static constexpr int kThreads = K::kThreads;

  // The rows < M and channels < N of this launch's tile in C, zeroed by the compute threads in chunks of
  // 8 channels as the staged epilogue writes them (16-byte stores where C allows, else 4-byte ones: N
  // is a multiple of 64, C 4-byte aligned with an even ldc).
  __device__ __forceinline__ static void zero_c_tile(const GemmParams& p, int m0, int n0) {
    constexpr int kChunks = Tl::BN / 8;
    const int rows = min(Tl::BM, p.m - m0);
    const bool vec16 = (p.ldc % 8) == 0 && (reinterpret_cast<unsigned long long>(p.c) & 15) == 0;
    u32* c = static_cast<u32*>(p.c);
    for (int it = threadIdx.x; it < rows * kChunks; it += kThreads) {
      const int r = it / kChunks, col = (it % kChunks) * 8;
      if (n0 + col >= p.n) continue;
      const long long at = (static_cast<long long>(m0 + r) * p.ldc + n0 + col) >> 1;
      if (vec16) {
        *reinterpret_cast<uint4*>(c + at) = make_uint4(0u, 0u, 0u, 0u);
      } else {
#pragma unroll
        for (int q = 0; q < 4; ++q) c[at + q] = 0u;
      }
    }
  }

  // A CTA that claimed the zeroing of its tile's C (lock word 1): the compute threads zero it, then
  // thread `leader` releases it (word 2).
  __device__ __forceinline__ static void zero_and_release(const GemmParams& p, int tile, int m0, int n0,
                                                          int leader = 0) {
    zero_c_tile(p, m0, n0);
    K::sync_compute();
    if (threadIdx.x == leader) st_release_gpu(p.locks + tile, 2);
  }

  // Whether this CTA zeroed its tile's C at its start, kept in shared memory rather than in a register
  // across the main loop.
  __device__ __forceinline__ static int& zeroed_here() {
    __shared__ int s;
    return s;
  }

  // Split 0's claim at its start: the compute threads zero the tile if nobody has, then the first lane
  // of the last compute warp releases it. The claim is a relaxed CAS: nothing before it needs ordering
  // (the previous kernel's accesses to C are complete and visible after griddepcontrol.wait, and no
  // split reads or adds to C before it acquires word 2, which the release publishes with the zeroing).
  // It and the release come from a warp that issues no bulk copy of the stage ring.
  __device__ __forceinline__ static void claim_at_start(const GemmParams& p, int tile, int m0, int n0) {
    constexpr int kLeader = kThreads - 32;
    if (threadIdx.x == kLeader) zeroed_here() = atomic_cas_relaxed_gpu(p.locks + tile, 0, 1) == 0;
    K::sync_compute();
    if (zeroed_here() != 0) zero_and_release(p, tile, m0, n0, kLeader);
  }

  // The wait, at a tail, until the tile's C is zeroed (claiming the zeroing if nobody has: the compute
  // threads zero it and thread 0 releases it). `seen`: thread 0's read of the lock word, issued right
  // after the main loop with ld_split_acquire_gpu; completed here where it shows C zeroed (the loads of
  // the wait loop are acquires themselves, and a CTA that claims the zeroing needs none).
  __device__ __forceinline__ static void await_zeroed(const GemmParams& p, int tile, int m0, int n0, int seen) {
    __shared__ int s_zero;  // 1: this CTA zeroes the tile; 2: it is zeroed
    if (threadIdx.x == 0) {
      u32 v = static_cast<u32>(seen);  // (0 free, 1 claimed, 2 or more zeroed: unsigned)
      if (v >= 2) split_acquire_complete_gpu();
      while (v < 2) {
        if (v == 0 && atomic_cas_acq_rel_gpu(p.locks + tile, 0, 1) == 0) break;
        if (v == 1) __nanosleep(64);
        v = static_cast<u32>(ld_acquire_gpu(p.locks + tile));
      }
      s_zero = v < 2 ? 1 : 2;
    }
    K::sync_compute();
    if (s_zero == 1) zero_and_release(p, tile, m0, n0);
  }

  // Done (nobody waits for it): split `split`'s share of the -2 that brings the word back to 0.
  __device__ __forceinline__ static void finish(const GemmParams& p, int tile, int split, int splits) {
    if (threadIdx.x == 0) red_add_u32(p.locks + tile, split == 0 ? 0u - static_cast<u32>(splits + 1) : 1u);
  }
};

}  // namespace humming
