// humming: the helpers around a MoE GEMM of the indexed layout (rows.cuh, IndexedRows).
//
//   moe_route     the router's choices [M, top_k] -> each expert's slot ids in blocks of block M, the
//                 expert of each block and the slots in use (vLLM's moe_align_block_size), in one CTA.
//                 Deterministic: an expert's slots keep the choices' flat order.
//   moe_combine   the sum over each token's top_k output rows, times the router's weights, in f32.
#pragma once
#include "dequant.cuh"

namespace humming {

// Chunks of 32 choices a warp of the routing helper loads at once (their loads in flight together).
constexpr int kRouteBatch = 8;

// Choices base + b * 32 + lane (b < kRouteBatch) below `hi`, else -1.
__device__ __forceinline__ void load_choices(const RouteParams& p, int base, int hi, int lane, int (&es)[kRouteBatch]) {
#pragma unroll
  for (int b = 0; b < kRouteBatch; ++b) {
    const int i = base + b * 32 + lane;
    es[b] = i < hi ? __ldg(p.topk_ids + i) : -1;
  }
}

// For each lane's kRouteBatch keys (an expert, or -1 for none): the lanes below it with the same key
// (`rank`) and, on the lowest of them, how many lanes hold it (`count`; 0 on the others). A bitonic
// sort of the (key, lane) pairs, the batches' sorts interleaved: a fixed 15 shuffle steps whatever the
// number of distinct keys (__match_any_sync takes about a step per distinct key, and a batch of 32
// choices over hundreds of experts has about 32). `scratch`: this warp's 32 ints of shared memory.
__device__ __forceinline__ void warp_peers(const int (&keys)[kRouteBatch], int lane, int* scratch, int (&rank)[kRouteBatch],
                                           int (&count)[kRouteBatch]) {
  unsigned v[kRouteBatch];
#pragma unroll
  for (int b = 0; b < kRouteBatch; ++b) v[b] = static_cast<unsigned>(keys[b] + 1) << 5 | static_cast<unsigned>(lane);
#pragma unroll
  for (int k = 2; k <= 32; k <<= 1) {
#pragma unroll
    for (int j = k >> 1; j > 0; j >>= 1) {
      const bool take_min = ((lane & j) == 0) == ((lane & k) == 0);
#pragma unroll
      for (int b = 0; b < kRouteBatch; ++b) {
        const unsigned o = __shfl_xor_sync(0xffffffffu, v[b], j);
        v[b] = take_min ? min(v[b], o) : max(v[b], o);
      }
    }
  }
  // Sorted position `lane` holds (key + 1, its lane): runs of one key, in lane order within a run.
#pragma unroll
  for (int b = 0; b < kRouteBatch; ++b) {
    const unsigned key = v[b] >> 5;
    const unsigned prev = __shfl_up_sync(0xffffffffu, key, 1), next = __shfl_down_sync(0xffffffffu, key, 1);
    const unsigned starts = __ballot_sync(0xffffffffu, lane == 0 || prev != key);
    const unsigned ends = __ballot_sync(0xffffffffu, lane == 31 || next != key);
    const int start = 31 - __clz(starts & (0xffffffffu >> (31 - lane)));
    const int end = __ffs(ends & (0xffffffffu << lane)) - 1;
    scratch[v[b] & 31u] = (lane - start) | (lane == start ? end - start + 1 : 0) << 8;
    __syncwarp();
    const int w = scratch[lane];
    __syncwarp();
    rank[b] = w & 0xFF;
    count[b] = w >> 8;
  }
}

// RouteParams (abi.cuh). One CTA of kRouteThreads threads, with route_smem_bytes(experts) bytes of
// dynamic shared memory (humming_spec::abi::route_smem_bytes). Warp w takes the choices of one
// contiguous range, in order: it counts them per expert, a scan over the warps gives each warp its
// first place among each expert's slots, and the warp places its choices in the same order. Four CTA
// barriers in all, whatever the number of choices.
__device__ __forceinline__ void moe_route(const RouteParams& p) {
  constexpr int kWarps = kRouteThreads / 32;
  extern __shared__ int route_smem[];
  __shared__ int warp_sums[kWarps];
  __shared__ int peer_scratch[kWarps][32];
  __shared__ int total;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int experts = min(max(p.experts, 0), kMaxRouteExperts);
  const int bm = max(p.block_m, 1);
  int* per_warp = route_smem;                   // [kWarps][experts]: counts, then each warp's next place
  int* first = route_smem + kWarps * experts;   // [experts]: the expert's first slot
  int* mine = per_warp + warp * experts;
  const int span = (p.ids + kWarps * 32 - 1) / (kWarps * 32) * 32;
  const int lo = min(warp * span, p.ids), hi = min(lo + span, p.ids);
  grid_dependency_wait();  // topk_ids may come from the previous kernel
  for (int i = tid; i < kWarps * experts; i += kRouteThreads) per_warp[i] = 0;
  __syncthreads();
  for (int base = lo; base < hi; base += 32 * kRouteBatch) {
    int es[kRouteBatch], rank[kRouteBatch], count[kRouteBatch];
    load_choices(p, base, hi, lane, es);
#pragma unroll
    for (int b = 0; b < kRouteBatch; ++b) es[b] = es[b] >= 0 && es[b] < experts ? es[b] : -1;
    warp_peers(es, lane, peer_scratch[warp], rank, count);
#pragma unroll
    for (int b = 0; b < kRouteBatch; ++b) {
      if (es[b] >= 0 && count[b] > 0) mine[es[b]] += count[b];
      __syncwarp();
    }
  }
  __syncthreads();
  // Thread x: expert x's choices, each warp's first place among them, its padded slot count.
  int padded = 0;
  if (tid < experts) {
    int run = 0;
    for (int w = 0; w < kWarps; ++w) {
      const int c = per_warp[w * experts + tid];
      per_warp[w * experts + tid] = run;
      run += c;
    }
    padded = (run + bm - 1) / bm * bm;
  }
  // Exclusive prefix of the padded counts over the experts (experts <= kRouteThreads).
  int incl = padded;
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const int v = __shfl_up_sync(0xffffffffu, incl, d);
    if (lane >= d) incl += v;
  }
  if (lane == 31) warp_sums[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    int sum = warp_sums[lane];
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const int v = __shfl_up_sync(0xffffffffu, sum, d);
      if (lane >= d) sum += v;
    }
    warp_sums[lane] = sum;  // inclusive
    if (lane == 31) total = sum;
  }
  __syncthreads();
  if (tid < experts) first[tid] = incl - padded + (warp > 0 ? warp_sums[warp - 1] : 0);
  const int used = min(total, p.capacity / bm * bm);
  for (int s = tid; s < p.capacity; s += kRouteThreads) p.sorted_ids[s] = p.ids;
  for (int b = tid; b < p.capacity / bm; b += kRouteThreads) p.expert_ids[b] = -1;
  if (tid == 0) *p.slots_used = used;
  __syncthreads();
  if (tid < experts) {
    for (int b = first[tid] / bm; b < (first[tid] + padded) / bm && b * bm < used; ++b) p.expert_ids[b] = tid;
  }
  for (int base = lo; base < hi; base += 32 * kRouteBatch) {
    int es[kRouteBatch], rank[kRouteBatch], count[kRouteBatch];
    load_choices(p, base, hi, lane, es);
#pragma unroll
    for (int b = 0; b < kRouteBatch; ++b) es[b] = es[b] >= 0 && es[b] < experts ? es[b] : -1;
    warp_peers(es, lane, peer_scratch[warp], rank, count);
#pragma unroll
    for (int b = 0; b < kRouteBatch; ++b) {
      const int e = es[b];
      if (e >= 0) {
        const int s = first[e] + mine[e] + rank[b];
        if (s < used) p.sorted_ids[s] = base + b * 32 + lane;
      }
      __syncwarp();
      if (e >= 0 && count[b] > 0) mine[e] += count[b];
      __syncwarp();
    }
  }
}

// CombineParams (abi.cuh). Grid (ceil(n / 8 / blockDim.x), tokens): 8 columns per thread.
template <class T>
__device__ __forceinline__ void moe_combine(const CombineParams& p) {
  using H = Half2<T>;
  grid_dependency_wait();
  const int t = blockIdx.y;
  const int col = (blockIdx.x * blockDim.x + threadIdx.x) * 8;
  if (t >= p.tokens || col >= p.n) return;
  float sum[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  for (int j = 0; j < p.top_k; ++j) {
    const long long slot = static_cast<long long>(t) * p.top_k + j;
    const int e = p.topk_ids[slot];
    if (e < 0 || e >= p.experts) continue;
    const float w = p.weights != nullptr ? p.weights[slot] : 1.0f;
    const uint4 v = *reinterpret_cast<const uint4*>(static_cast<const u16*>(p.y) + slot * p.n + col);
    const u32 pairs[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      sum[2 * q] += w * H::to_float(static_cast<u16>(pairs[q] & 0xFFFFu));
      sum[2 * q + 1] += w * H::to_float(static_cast<u16>(pairs[q] >> 16));
    }
  }
  uint4 out;
  out.x = H::from_floats(sum[0], sum[1]);
  out.y = H::from_floats(sum[2], sum[3]);
  out.z = H::from_floats(sum[4], sum[5]);
  out.w = H::from_floats(sum[6], sum[7]);
  *reinterpret_cast<uint4*>(static_cast<u16*>(p.out) + static_cast<long long>(t) * p.n + col) = out;
}

}  // namespace humming
