// humming: thin wrappers of the PTX instructions the kernels use (copies, shared-memory loads, bulk
// copies and mbarriers, programmatic dependent launch, clusters, atomics and fences), each with the
// ordering it gives. Inline PTX only: no toolkit headers, so NVCC and NVRTC compile the same text.
#pragma once
#include "common.cuh"

namespace humming {

__device__ __forceinline__ u32 smem_addr(const void* p) {
  u32 r;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
  return r;
}

// 16-byte global->shared copy to the shared-space address `smem`; when `pred` is false nothing is read
// and the destination is zero-filled.
__device__ __forceinline__ void cp_async16(u32 smem, const void* gmem, bool pred) {
  const int n = pred ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(gmem), "r"(n));
}

// Shared-memory loads by 32-bit shared-space address (no generic-pointer conversion in the main loop).
__device__ __forceinline__ uint4 lds128(u32 a) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a));
  return v;
}
__device__ __forceinline__ uint2 lds64(u32 a) {
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "r"(a));
  return v;
}
__device__ __forceinline__ u32 lds32(u32 a) {
  u32 v;
  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(a));
  return v;
}

// Hopper (sm_90+) bulk copies: one thread moves a contiguous run of bytes global -> shared with
// cp.async.bulk (the TMA unit, no tensor map) and the copy signals an mbarrier when its bytes have
// landed (PTX ISA 8.0, "cp.async.bulk" and "mbarrier"). Addresses and sizes are multiples of 16 bytes.
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
#define HUMMING_HAS_BULK 1
#else
#define HUMMING_HAS_BULK 0
#endif

// Programmatic dependent launch (sm_90+, PTX "griddepcontrol"; host side: the launch attribute
// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION). launch_dependents lets the next kernel of the
// stream, if launched with that attribute, start before this one ends; wait blocks until the previous
// kernel of the stream has completed and its memory operations are visible. Without the attribute
// both are no-ops. Everything a kernel reads before its wait must not be written by the kernel before
// it (here: only the packed weights, scales and zero points, which no kernel writes).
__device__ __forceinline__ void grid_dependency_wait() {
#if HUMMING_HAS_BULK
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void grid_launch_dependents() {
#if HUMMING_HAS_BULK
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Thread-block clusters (sm_90+, PTX ISA 8.0 for the .release / .acquire barrier forms).
// cluster_sync: every thread of every CTA of the cluster arrives (release) and waits (acquire), so
// shared-memory writes before it are visible to the cluster's CTAs after it. map_rank: the shared::cluster address of `addr` (this CTA's shared memory) in the CTA
// of cluster rank `rank`; ld_cluster_f4 reads 16 bytes there.
__device__ __forceinline__ void cluster_sync() {
#if HUMMING_HAS_BULK
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ u32 map_rank(u32 addr, u32 rank) {
  u32 r = addr;
#if HUMMING_HAS_BULK
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
#endif
  return r;
}
__device__ __forceinline__ float4 ld_cluster_f4(u32 addr) {
  float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#if HUMMING_HAS_BULK
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr)
               : "memory");
#endif
  return v;
}

// Initialises the mbarrier at shared-space address `bar` for `count` arrivals per phase; then
// mbar_fence_init() and a CTA barrier before any other thread or the TMA unit uses it.
__device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
#if HUMMING_HAS_BULK
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#endif
}
__device__ __forceinline__ void mbar_fence_init() {
#if HUMMING_HAS_BULK
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
// One arrival that also expects `bytes` of bulk copies to complete before the phase ends.
__device__ __forceinline__ void mbar_arrive_expect_tx(u32 bar, u32 bytes) {
#if HUMMING_HAS_BULK
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
#endif
}
// Waits until the phase of parity `parity` of the mbarrier at `bar` has completed.
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
#if HUMMING_HAS_BULK
  u32 done;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
#endif
}
// One arrival on the mbarrier at `bar` (no transaction bytes).
__device__ __forceinline__ void mbar_arrive(u32 bar) {
#if HUMMING_HAS_BULK
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#endif
}
// Invalidates the mbarrier at `bar` (no phase pending on it), before its shared memory is used for
// anything else (PTX "mbarrier.inval").
__device__ __forceinline__ void mbar_inval(u32 bar) {
#if HUMMING_HAS_BULK
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
#endif
}
// TMA: copies the box at coordinates (c0, c1) (elements; c0 the inner dimension) of the 2-D tensor map
// at generic address `map` (a __grid_constant__ kernel parameter) to shared `dst`, zero-filling what lies
// outside the tensor; the box's bytes are counted on the mbarrier `bar` (PTX "cp.async.bulk.tensor").
__device__ __forceinline__ void tma_load_2d(u32 dst, const void* map, int c0, int c1, u32 bar) {
#if HUMMING_HAS_BULK
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
#endif
}
// TMA store: copies shared `src` (the box's layout, written by ordinary stores and made visible to the
// async proxy with fence_proxy_async_shared) to the box at (c0, c1) of the 2-D tensor map `map`; what
// lies outside the tensor is not written. Completion is tracked per bulk group of this thread:
// bulk_commit() closes a group, bulk_wait_read<N>() waits until at most N groups still read shared
// memory (their sources may then be overwritten), bulk_wait<N>() until at most N are incomplete.
__device__ __forceinline__ void tma_store_2d(const void* map, int c0, int c1, u32 src) {
#if HUMMING_HAS_BULK
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(map), "r"(c0),
               "r"(c1), "r"(src)
               : "memory");
#endif
}
__device__ __forceinline__ void bulk_commit() {
#if HUMMING_HAS_BULK
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
#if HUMMING_HAS_BULK
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
#endif
}
template <int N>
__device__ __forceinline__ void bulk_wait() {
#if HUMMING_HAS_BULK
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}
// Brings the tensor map at generic address `map` (a kernel parameter) into the TMA unit's cache.
// Brings the line of `p` into L1 (no register written: the load's latency is not waited for).
__device__ __forceinline__ void prefetch_l1(const void* p) { asm volatile("prefetch.global.L1 [%0];\n" ::"l"(p)); }

__device__ __forceinline__ void prefetch_tensormap(const void* map) {
#if HUMMING_HAS_BULK
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
#endif
}
// Stores four (two) 8 x 8 matrices of 16-bit values transposed (sm_90 stmatrix): this lane's register j
// holds row lane / 4, columns 2 (lane % 4) + {0, 1} of matrix j; lane 8 j + i gives the shared address
// of row i of stored matrix j, which is column i of matrix j (16 contiguous bytes).
__device__ __forceinline__ void stmatrix_x4_trans(u32 addr, u32 r0, u32 r1, u32 r2, u32 r3) {
#if HUMMING_HAS_BULK
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
#endif
}
__device__ __forceinline__ void stmatrix_x2_trans(u32 addr, u32 r0, u32 r1) {
#if HUMMING_HAS_BULK
  asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %2};\n" ::"r"(addr), "r"(r0), "r"(r1)
               : "memory");
#endif
}
// A barrier of the `threads` threads (whole warps) that name barrier `id` (1..15; 0 is __syncthreads).
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// Arrives on named barrier `id` without waiting: the signalling side of a hand-off to threads that
// bar.sync it (the count includes both sides).
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void sts32(u32 a, u32 v) { asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(a), "r"(v) : "memory"); }
__device__ __forceinline__ float2 lds_f2(u32 a) {
  float2 v;
  asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(a));
  return v;
}

// Copies `bytes` from global `src` to shared `dst`; completion is counted on the mbarrier `bar`.
__device__ __forceinline__ void bulk_copy_g2s(u32 dst, const void* src, u32 bytes, u32 bar) {
#if HUMMING_HAS_BULK
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
#endif
}

// Orders this thread's generic-proxy global accesses (and those it has observed, e.g. through an
// acquire) before its later async-proxy ones, such as a bulk copy reading what other CTAs stored
// (PTX "fence.proxy.async").
__device__ __forceinline__ void fence_proxy_async_global() {
#if HUMMING_HAS_BULK
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
#endif
}

// Atomic add at GPU scope with acquire-release semantics (PTX memory model): returns the old value.
__device__ __forceinline__ int atomic_add_acq_rel_gpu(int* addr, int v) {
  int old;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;\n" : "=r"(old) : "l"(addr), "r"(v) : "memory");
  return old;
}

__device__ __forceinline__ int ld_acquire_gpu(const int* addr) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(v) : "l"(addr) : "memory");
  return v;
}

// An acquire read at GPU scope split in two, so that its L2 round trip can overlap other work:
// ld_split_acquire_gpu issues the load, split_acquire_complete_gpu (later, in the same thread, before
// anything that must be ordered after the read: only the accesses after it are) completes the
// acquire. Where `fence.acquire` exists (PTX ISA 8.6, CUDA 12.8+, sm_90+) the load is relaxed (a strong
// read) and the completion that fence (SASS: an L1 invalidation, CCTL.IVALL; PTX memory model: a
// strong read followed by an acquire fence is an acquire pattern). Elsewhere the load is an acquire and
// the completion nothing: fence.acq_rel there costs a MEMBAR.GPU more than the acquire load.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && \
    (__CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 8))
#define HUMMING_FENCE_ACQUIRE 1
#else
#define HUMMING_FENCE_ACQUIRE 0
#endif

__device__ __forceinline__ int ld_split_acquire_gpu(const int* addr) {
#if HUMMING_FENCE_ACQUIRE
  int v;
  asm volatile("ld.relaxed.gpu.global.s32 %0, [%1];\n" : "=r"(v) : "l"(addr) : "memory");
  return v;
#else
  return ld_acquire_gpu(addr);
#endif
}

__device__ __forceinline__ void split_acquire_complete_gpu() {
#if HUMMING_FENCE_ACQUIRE
  asm volatile("fence.acquire.gpu;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void st_release_gpu(int* addr, int v) {
  asm volatile("st.release.gpu.global.s32 [%0], %1;\n" ::"l"(addr), "r"(v) : "memory");
}

// A relaxed compare-and-swap at GPU scope: atomic on its word, no ordering of other accesses (no
// MEMBAR.GPU before it, no L1 invalidation after: SASS ATOMG.E.CAS.STRONG.GPU alone).
__device__ __forceinline__ int atomic_cas_relaxed_gpu(int* addr, int expected, int desired) {
  int old;
  asm volatile("atom.relaxed.gpu.global.cas.b32 %0, [%1], %2, %3;\n"
               : "=r"(old)
               : "l"(addr), "r"(expected), "r"(desired)
               : "memory");
  return old;
}

__device__ __forceinline__ int atomic_cas_acq_rel_gpu(int* addr, int expected, int desired) {
  int old;
  asm volatile("atom.acq_rel.gpu.global.cas.b32 %0, [%1], %2, %3;\n"
               : "=r"(old)
               : "l"(addr), "r"(expected), "r"(desired)
               : "memory");
  return old;
}

// Adds 8 f16 values (four f16x2, 16-byte aligned address) to global memory, without a result (PTX
// red.add.noftz.v4.f16x2, sm_90+); one f16x2 (4-byte aligned) below.
__device__ __forceinline__ void red_add_f16x8(void* addr, u32 a, u32 b, u32 c, u32 d) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.noftz.v4.f16x2 [%0], {%1, %2, %3, %4};\n" ::"l"(addr), "r"(a), "r"(b), "r"(c), "r"(d)
               : "memory");
#else
  asm volatile("red.global.add.noftz.f16x2 [%0], %1;\n" ::"l"(addr), "r"(a) : "memory");
  asm volatile("red.global.add.noftz.f16x2 [%0], %1;\n" ::"l"(static_cast<char*>(addr) + 4), "r"(b) : "memory");
  asm volatile("red.global.add.noftz.f16x2 [%0], %1;\n" ::"l"(static_cast<char*>(addr) + 8), "r"(c) : "memory");
  asm volatile("red.global.add.noftz.f16x2 [%0], %1;\n" ::"l"(static_cast<char*>(addr) + 12), "r"(d) : "memory");
#endif
}
// Relaxed atomic add without a result (wraps modulo 2^32).
__device__ __forceinline__ void red_add_u32(int* addr, u32 v) {
  asm volatile("red.relaxed.gpu.global.add.u32 [%0], %1;\n" ::"l"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ void red_add_f16x2(void* addr, u32 v) {
  asm volatile("red.global.add.noftz.f16x2 [%0], %1;\n" ::"l"(addr), "r"(v) : "memory");
}

// 4-byte global->shared copy (zero-filled when `pred` is false; `gmem` must still be a valid address), and
// an arrival on the mbarrier at `bar` once this thread's earlier cp.async copies have landed, counted among
// the arrivals the barrier was initialised with (PTX "cp.async.mbarrier.arrive.noinc").
__device__ __forceinline__ void cp_async4(u32 smem, const void* gmem, bool pred) {
  const int n = pred ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem), "l"(gmem), "r"(n) : "memory");
}
__device__ __forceinline__ void cp_async_mbar_arrive(u32 bar) {
#if HUMMING_HAS_BULK
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
#endif
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

}  // namespace humming
