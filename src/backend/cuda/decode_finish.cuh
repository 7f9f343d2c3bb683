// The end of a decode CTA, shared by the CUDA-core kernels (decode_attention.cu) and the
// tensor-core ones (decode_attention_mma.cu): kRows partial softmax states (m, l, acc) of the CTA's
// q heads are in shared memory. It merges them and writes either the output (a sequence whose keys
// all fall in its first split) or this split's partial (o, lse); then the last CTA of the
// (sequence, kv head) merges the splits (threadFenceReduction pattern: no combine kernel).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/cuda_kernels.h"

namespace minivllm::cuda {

// The sequence a decode CTA serves: blockIdx.z in batch order, or the z-th of a.seq_order (the
// runner's longest-context-first order). The block scheduler starts CTAs in blockIdx order, so the
// long sequences' CTAs start in the first waves and the short ones fill in behind them, instead of
// a long one starting last and running on while the other SMs have nothing left. A step input,
// uploaded before the graph: safe to read before griddepcontrol.wait. One sequence needs no load (an
// order of one is the identity), and the CTA's next loads depend on this one.
__device__ __forceinline__ int decode_cta_seq(const AttentionArgs& a) {
  return a.seq_order != nullptr && gridDim.z > 1 ? __ldg(a.seq_order + blockIdx.z) : static_cast<int>(blockIdx.z);
}

// The first key a decode query over ctx keys sees: 0, or the first of a sliding window's.
__device__ __forceinline__ int decode_first_key(const AttentionArgs& a, int ctx) {
  return a.window > 0 ? max(0, ctx - a.window) : 0;
}
// Where a sequence's splits start: its first key rounded down to kDecodeKeyAlign keys (or to its
// block, when blocks are smaller), so that the tensor-core kernel's 16-key tiles never straddle a
// block, no split reads a block wholly before the window, and fewer keys than any partition lie
// before the first one: every split that starts before the context's end holds a key it sees (a
// split of masked keys only would merge as NaN).
__device__ __forceinline__ int decode_key_origin(const AttentionArgs& a, int first_key) {
  const int align = min(kDecodeKeyAlign, 1 << a.block_size_log2);
  return first_key & ~(align - 1);
}

// A split's first block-table entry, loaded beside the context length instead of after it: with no
// window the splits start at key 0 (decode_key_origin), so split * partition keys in is where the
// split starts, context or not. A CTA often becomes resident only as its predecessor ends, so each
// dependent load before its copies is on the step's critical path (PERFORMANCE.md, "Stop 80").
struct SplitBlockGuess {
  int col;        // the guessed column
  bool on;        // false: no guess (a window, or past the table)
  int32_t block;  // table[col] where on
  // The block of table column c (c < the table's columns): the guess's load where it is that column.
  __device__ int32_t block_of(const int32_t* table, int c) const { return on && c == col ? block : table[c]; }
};
__device__ __forceinline__ SplitBlockGuess guess_split_block(const AttentionArgs& a, const int32_t* table, int split,
                                                             int partition) {
  SplitBlockGuess g;
  g.col = (split * partition) >> a.block_size_log2;
  g.on = a.window == 0 && g.col < a.table_cols;
  g.block = g.on ? table[g.col] : -1;
  return g;
}

// head0: the CTA's first q head (it writes heads head0 .. head0 + heads - 1). counter_index: this
// CTA's (sequence, kv head or head tile) counter. ctx: the sequence's keys from the splits' origin
// (decode_key_origin); partition: keys per split.
template <int kHeadDim, int kGroup, int kRows, int kCtaThreads>
__device__ __forceinline__ void decode_finish_cta(const AttentionArgs& a, const DecodeScratch& scratch,
                                                  const float (&sm_m)[kRows][kGroup], const float (&sm_l)[kRows][kGroup],
                                                  const float (&sm_acc)[kRows][kGroup][kHeadDim], int seq, int head0,
                                                  int heads, int split, int num_splits, int partition, int ctx,
                                                  int64_t counter_index) {
  __syncthreads();
  // Splits that hold keys. With one (a context within the first partition) this CTA has every key:
  // it writes the output itself, with no partials, fence, counter or merge.
  const int used = min(num_splits, (ctx + partition - 1) / partition);
  const bool direct = used == 1;
  for (int idx = threadIdx.x; idx < heads * kHeadDim; idx += kCtaThreads) {
    const int g = idx / kHeadDim;
    const int d = idx % kHeadDim;
    float mx = -INFINITY;
#pragma unroll
    for (int r = 0; r < kRows; ++r) mx = fmaxf(mx, sm_m[r][g]);
    float sum = 0.0f, o = 0.0f;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float w = exp2f(sm_m[r][g] - mx);  // 0 for a group that saw no key
      sum += sm_l[r][g] * w;
      o += sm_acc[r][g][d] * w;
    }
    const int h = head0 + g;
    if (direct) {
      __nv_bfloat16* out = static_cast<__nv_bfloat16*>(a.out) +
                           static_cast<int64_t>(seq) * a.num_q_heads * kHeadDim + static_cast<int64_t>(h) * kHeadDim;
      out[d] = __float2bfloat16(o / sum);
    } else {
      const int64_t row = (static_cast<int64_t>(seq) * a.num_q_heads + h) * num_splits + split;
      scratch.partial_o[row * kHeadDim + d] = o / sum;
      if (d == 0) scratch.partial_lse[row] = mx + log2f(sum);
    }
  }
  if (direct) return;

  // Last CTA of this (sequence, kv head) merges the splits that hold keys (threadFenceReduction
  // pattern).
  __shared__ bool is_last;
  __threadfence();  // this CTA's partials are visible before its arrival is counted
  __syncthreads();
  if (threadIdx.x == 0) {
    int* counter = scratch.counters + counter_index;
    is_last = atomicAdd(counter, 1) == used - 1;
    if (is_last) *counter = 0;  // every other split has arrived: ready for the next step
  }
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  // The weights 2^(lse_i - max) of the splits, per q head, and the partials, by how many splits hold
  // keys and how many outputs a thread merges (kIters):
  // - up to 8 splits (a small batch at a short context, the latency-bound case):
  //   - at most two outputs a thread (groups up to 2 at head_dim 128 and 4-warp CTAs), or more
  //     than eight: the thread loads each split's lse and partial at once, one L2 round trip per
  //     two outputs, no barrier;
  //   - three to eight (groups 4 and 8 at head_dim 128): every partial the thread merges is loaded
  //     into registers first, all at once, then the lse values go through shared memory (one load
  //     a (head, split)) while they are in flight. Per output, group 8's batch-1 attention spent
  //     more in this merge than in its keys (PERFORMANCE.md, "The split merge in one round trip");
  // - 9 to 64 splits: the lse values through shared memory, the partials from L2;
  // - more: lse and partials from L2 per thread.
  constexpr int kRegSplits = 8;
  constexpr int kMaxSmemSplits = 64;
  constexpr int kIters = (kGroup * kHeadDim + kCtaThreads - 1) / kCtaThreads;  // outputs a thread merges
  __shared__ float sm_w[kGroup][kMaxSmemSplits];
  __shared__ float sm_inv[kGroup];
  constexpr bool kRegPath = kIters > 2 && kIters * kRegSplits <= 64;
  constexpr int kRegIters = kRegPath ? kIters : 1;  // the register path's outputs a thread (1: unused)
  const bool in_regs = kRegPath && used <= kRegSplits;
  const bool per_thread = !kRegPath && used <= kRegSplits;
  const bool in_smem = !per_thread && used <= kMaxSmemSplits;  // uniform over the CTA
  const int outputs = heads * kHeadDim;
  float po[kRegIters][kRegSplits];
  if (in_regs) {
#pragma unroll
    for (int it = 0; it < kRegIters; ++it) {
      const int idx = threadIdx.x + it * kCtaThreads;
      const int64_t row0 = (static_cast<int64_t>(seq) * a.num_q_heads + head0 + idx / kHeadDim) * num_splits;
#pragma unroll
      for (int i = 0; i < kRegSplits; ++i) {
        po[it][i] = idx < outputs && i < used ? __ldcg(scratch.partial_o + (row0 + i) * kHeadDim + idx % kHeadDim)
                                              : 0.0f;
      }
    }
  }
  if (in_smem) {
    for (int idx = threadIdx.x; idx < heads * used; idx += kCtaThreads) {
      const int g = idx / used, i = idx % used;
      const int64_t row0 = (static_cast<int64_t>(seq) * a.num_q_heads + head0 + g) * num_splits;
      sm_w[g][i] = __ldcg(scratch.partial_lse + row0 + i);
    }
    __syncthreads();
    if (threadIdx.x < heads) {
      const int g = threadIdx.x;
      float mx = -INFINITY, sum = 0.0f;
      for (int i = 0; i < used; ++i) mx = fmaxf(mx, sm_w[g][i]);
      for (int i = 0; i < used; ++i) {
        sm_w[g][i] = exp2f(sm_w[g][i] - mx);
        sum += sm_w[g][i];
      }
      for (int i = used; i < kRegSplits; ++i) sm_w[g][i] = 0.0f;  // the register path's unused slots
      sm_inv[g] = 1.0f / sum;
    }
    __syncthreads();
  }
  const int64_t out0 = static_cast<int64_t>(seq) * a.num_q_heads * kHeadDim + static_cast<int64_t>(head0) * kHeadDim;
  __nv_bfloat16* out = static_cast<__nv_bfloat16*>(a.out) + out0;
  if (in_regs) {
#pragma unroll
    for (int it = 0; it < kRegIters; ++it) {
      const int idx = threadIdx.x + it * kCtaThreads;
      if (idx >= outputs) break;
      const int g = idx / kHeadDim;
      float o = 0.0f;
#pragma unroll
      for (int i = 0; i < kRegSplits; ++i) o = fmaf(sm_w[g][i], po[it][i], o);
      out[idx] = __float2bfloat16(o * sm_inv[g]);
    }
    return;
  }
#pragma unroll 2
  for (int idx = threadIdx.x; idx < outputs; idx += kCtaThreads) {
    const int g = idx / kHeadDim;
    const int d = idx % kHeadDim;
    const int64_t row0 = (static_cast<int64_t>(seq) * a.num_q_heads + head0 + g) * num_splits;
    float o = 0.0f, sum = 0.0f;
    if (per_thread) {
      float lse[kRegSplits], po[kRegSplits];
#pragma unroll
      for (int i = 0; i < kRegSplits; ++i) {
        lse[i] = i < used ? __ldcg(scratch.partial_lse + row0 + i) : -INFINITY;
        po[i] = i < used ? __ldcg(scratch.partial_o + (row0 + i) * kHeadDim + d) : 0.0f;
      }
      float mx = -INFINITY;
#pragma unroll
      for (int i = 0; i < kRegSplits; ++i) mx = fmaxf(mx, lse[i]);
#pragma unroll
      for (int i = 0; i < kRegSplits; ++i) {
        const float w = i < used ? exp2f(lse[i] - mx) : 0.0f;
        sum += w;
        o = fmaf(w, po[i], o);
      }
    } else if (in_smem) {
      for (int i = 0; i < used; ++i) o += sm_w[g][i] * __ldcg(scratch.partial_o + (row0 + i) * kHeadDim + d);
      o *= sm_inv[g];
      sum = 1.0f;
    } else {
      float mx = -INFINITY;
      for (int i = 0; i < used; ++i) mx = fmaxf(mx, __ldcg(scratch.partial_lse + row0 + i));
      for (int i = 0; i < used; ++i) {
        const float w = exp2f(__ldcg(scratch.partial_lse + row0 + i) - mx);
        sum += w;
        o += w * __ldcg(scratch.partial_o + (row0 + i) * kHeadDim + d);
      }
    }
    out[idx] = __float2bfloat16(o / sum);
  }
}

}  // namespace minivllm::cuda
