// humming: the shared-memory stage ring of the main loop. STAGES buffers, each one BK step of A, packed
// B units and scale / zero-point rows (loader.cuh), filled ahead of the step that reads them:
//
// - cp.async (before sm_90): every thread copies its chunks; a stage is refilled kAhead steps ahead,
//   after a CTA barrier.
// - bulk copies (sm_90+, kBulk): the weights of a stage are a few contiguous runs that one lane per
//   warp copies with cp.async.bulk into the stage's "full" mbarrier; A still by cp.async.
// - TMA (wgmma on sm_90a, kTma): every copy of a stage, A by TMA box, from one thread, into the stage's
//   "full" mbarrier; every compute thread releases a stage on its "empty" mbarrier once its warp's
//   wgmma group that last read it is done, and the stage is refilled once every compute thread has
//   released it, so the main loop has no CTA barrier. With a producer warpgroup (Tl::kProducer, warp
//   specialisation) its first thread issues every copy and the warpgroup hands its registers to the
//   compute warps (setmaxnreg); otherwise thread 0 refills a stage in its warp's main loop.
//
// The first stages' weights are requested before griddepcontrol.wait (programmatic dependent launch,
// ptx.cuh): no kernel writes them. A, C and the split-K workspace are touched only after it.
#pragma once
#include "traits.cuh"

namespace humming {

template <class K>
struct StagePipeline {
  using Tl = typename K::Tl;
  using L = typename K::L;
  using Loader = typename K::Loader;
  static constexpr int kAhead = K::kAhead;
  static_assert(Tl::STAGES * 16 + 16 <= kStaticSmemBytes, "static shared memory beyond abi.cuh's kStaticSmemBytes");

  Loader loader;
  u32 sbase;    // shared-space address of stage 0
  u32 bars;     // kBulk: the stages' "full" mbarriers, 8 bytes apart
  u32 empties;  // kTma: the stages' "empty" mbarriers
  int iters;    // BK steps of this segment
  // Stage buffers read and written this step ((ring + it) % STAGES and (ring + it + kAhead) % STAGES;
  // ring = 0 but for a stream-K CTA's later segments) and the parity of the read stage's phase.
  int read_stage, write_stage;
  u32 phase;

  // Loader::kBulk (sm_90+): one mbarrier per stage, completed by the stage's kCopies bulk copies (and,
  // with kTma, the A tile's TMA boxes: kCopies + 1 arrivals); the n-th use of a stage completes its
  // barrier's phase n, waited on with parity n % 2. kTma: a second ring, the "empty" barriers: the n-th
  // use of a stage is released when every compute thread has arrived, completing phase n.
  __device__ __forceinline__ static u32 full_bars() {
    __shared__ __align__(8) u64 b[Loader::kBulk ? Tl::STAGES : 1];
    return smem_addr(b);
  }
  __device__ __forceinline__ static u32 empty_bars() {
    __shared__ __align__(8) u64 b[K::kTma ? Tl::STAGES : 1];
    return smem_addr(b);
  }

  __device__ __forceinline__ StagePipeline(const GemmParams& p, const TileRows& rows, int n0, const Segment& seg,
                                           u32 smem_base)
      : loader(p, rows, n0, seg.it_begin * Tl::BK),
        sbase(K::kWgmma ? (smem_base + K::kAlignSlack - 1) & ~static_cast<u32>(K::kAlignSlack - 1) : smem_base),
        bars(full_bars()),
        empties(empty_bars()),
        iters(seg.it_end - seg.it_begin),
        read_stage(seg.ring % Tl::STAGES),
        write_stage((seg.ring + kAhead) % Tl::STAGES),
        phase(static_cast<u32>(seg.ring / Tl::STAGES) & 1u) {
    if (Loader::kBulk && seg.ring == 0) {
      if (threadIdx.x == 0) {
#pragma unroll
        for (int s = 0; s < Tl::STAGES; ++s) {
          mbar_init(bars + 8 * s, Loader::kCopies + (K::kTma ? 1 : 0));
          if constexpr (K::kTma) mbar_init(empties + 8 * s, K::kThreads);
        }
        mbar_fence_init();
      }
      __syncthreads();
    }
  }

  // kTma, by the one thread that issues the copies: the first kStages stages' weights before
  // griddepcontrol.wait, their A tiles after it.
  template <int kStages>
  __device__ __forceinline__ void fill_ring(const GemmParams& p, int m0) {
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      if (s < iters) loader.load_weights_one(sbase + s * L::kStageBytes, bars + 8 * s, p);
    }
    grid_dependency_wait();
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      if (s < iters) loader.load_a_tma(sbase + s * L::kStageBytes, bars + 8 * s, p, m0);
    }
  }

  // Tl::kProducer (sm_90a): the producer warpgroup's first thread fills the whole ring, then refills
  // stage s with step it as soon as every compute thread has released the stage's previous use, step
  // it - STAGES (its release completes phase it / STAGES - 1 of the stage's "empty" mbarrier). The
  // compute warps never issue a copy or wait for a release.
  __device__ __forceinline__ void produce(const GemmParams& p, int m0) {
    fill_ring<Tl::STAGES>(p, m0);
    int stage = 0;
    u32 parity = 0;
    for (int it = Tl::STAGES; it < iters; ++it) {
      mbar_wait(empties + 8 * stage, parity);
      loader.load_weights_one(sbase + stage * L::kStageBytes, bars + 8 * stage, p);
      loader.load_a_tma(sbase + stage * L::kStageBytes, bars + 8 * stage, p, m0);
      if (++stage == Tl::STAGES) {
        stage = 0;
        parity ^= 1u;
      }
    }
  }

  // Fills the first stages (or, in the producer warpgroup, the whole ring) and waits for the previous
  // kernel of the stream where this thread will touch what it writes. Returns false in the producer
  // warpgroup, which has nothing left to do.
  __device__ __forceinline__ bool prologue(const GemmParams& p, int m0, int ring, bool producer) {
    if constexpr (K::kProducer) {
      // Without TMA (wgmma compiled for an arch below sm_90, where it cannot run) the kernel traps.
      if constexpr (!K::kTma) __trap();
      if (producer) {
        setmaxnreg_dec<Tl::kProducerRegs>();
        if (threadIdx.x == K::kThreads) produce(p, m0);
        return false;
      }
      setmaxnreg_inc<Tl::kConsumerRegs>();
      grid_dependency_wait();
    } else if constexpr (K::kTma) {
      // Thread 0 is the producer: the first kAhead stages (refilled in the main loop, refill()).
      if (threadIdx.x == 0) {
        fill_ring<kAhead>(p, m0);
      } else {
        grid_dependency_wait();
      }
    } else if constexpr (Loader::kBulk) {
#pragma unroll
      for (int s = 0; s < kAhead; ++s) {
        const int r = (ring + s) % Tl::STAGES;
        if (s < iters) loader.load_weights(sbase + r * L::kStageBytes, bars + 8 * r, p);
      }
      grid_dependency_wait();
#pragma unroll
      for (int s = 0; s < kAhead; ++s) {
        if (s < iters) loader.load_a(sbase + (ring + s) % Tl::STAGES * L::kStageBytes, p);
        cp_async_commit();
      }
    } else {
#pragma unroll
      for (int s = 0; s < kAhead; ++s) {
        const int r = (ring + s) % Tl::STAGES;
        if (s < iters) loader.load(sbase + r * L::kStageBytes, bars + 8 * r, p);
        cp_async_commit();
      }
    }
    return true;
  }

  // Waits until step it's stage has landed (without TMA, also refills the stage kAhead steps ahead),
  // moves the ring on and returns the stage's shared-space address.
  __device__ __forceinline__ u32 acquire(const GemmParams& p, int it) {
    const int next = it + kAhead;
    if constexpr (K::kTma) {
      mbar_wait(bars + 8 * read_stage, phase);
    } else {
      cp_async_wait<kAhead - 1>();
      if constexpr (Loader::kBulk) mbar_wait(bars + 8 * read_stage, phase);
      if constexpr (K::kWgmma) fence_proxy_async_shared();  // this thread's copies, visible to wgmma
      __syncthreads();
      if (next < iters) {
        loader.load(sbase + write_stage * L::kStageBytes, bars + 8 * write_stage, p);
      }
      cp_async_commit();
    }
    const u32 st = sbase + read_stage * L::kStageBytes;
    if (read_stage == Tl::STAGES - 1) phase ^= 1u;
    read_stage = read_stage == Tl::STAGES - 1 ? 0 : read_stage + 1;
    write_stage = write_stage == Tl::STAGES - 1 ? 0 : write_stage + 1;
    return st;
  }

  // kTma, in step it's wgmma slab loop after slab kk's group is committed: step it - 1's last wgmma
  // group is done once this step's first group is committed, so every thread releases its stage
  // (`prev_stage`); without a producer warpgroup thread 0 then refills that stage with step
  // it + STAGES - 1, once every thread has released it (n-th release = phase n). Every thread arrives,
  // each releasing its own shared loads of the stage.
  __device__ __forceinline__ void release(const GemmParams& p, int m0, int it, int kk, int prev_stage) {
    const int next = it + kAhead;
    if (kk == K::kGroupSlabs - 1 && it > 0) {
      mbar_arrive(empties + 8 * prev_stage);
    }
    if (!K::kProducer && kk == (K::kGroupSlabs < 2 ? 1 : 3) && threadIdx.x == 0 && next < iters) {
      if (it > 0) mbar_wait(empties + 8 * prev_stage, static_cast<u32>((it - 1) / Tl::STAGES) & 1u);
      loader.load_weights_one(sbase + prev_stage * L::kStageBytes, bars + 8 * prev_stage, p);
      loader.load_a_tma(sbase + prev_stage * L::kStageBytes, bars + 8 * prev_stage, p, m0);
    }
  }

  // After the last step: no copy of this thread is still in flight.
  __device__ __forceinline__ void drain() {
    if constexpr (!K::kTma) cp_async_wait<0>();
  }
};

}  // namespace humming
