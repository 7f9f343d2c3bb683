// Penalties, logit biases and logprobs on the GPU (logits_kernels.h). They run after the decode graph, on rank 0,
// only for batches that ask, so the graph and the plain sampler stay as they are.
//
// logprobs: one CTA per row. The row's max, then the sum of exp(l - max) (fp32, block-reduced),
// give log Z. For the top k each thread keeps its own k best (value desc, id asc) while it walks
// its ids in increasing order, so a tie keeps the lower id; k rounds then pick the best head among
// the threads' sorted lists (a block arg-max per round) and advance the winner's list.
#include <cub/block/block_reduce.cuh>

#include <algorithm>
#include <climits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/logits_kernels.h"

namespace minivllm::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void reset_counts_kernel(int32_t* counts, int64_t vocab, const int32_t* slots) {
  int32_t* row = counts + static_cast<int64_t>(slots[blockIdx.y]) * vocab;
  for (int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < vocab;
       v += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    row[v] = 0;
  }
}

__global__ void count_tokens_kernel(int32_t* counts, int64_t vocab, const int32_t* slots, const int32_t* tokens,
                                    const uint8_t* in_prompt, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int32_t* c = counts + static_cast<int64_t>(slots[i]) * vocab + tokens[i];
  if (in_prompt[i] != 0) {
    atomicOr(c, 1);  // kPromptCountBit
  } else {
    atomicAdd(c, 2);  // kGeneratedCountStep
  }
}

__global__ void apply_penalties_kernel(float* logits, int64_t vocab, const int32_t* counts, const int32_t* slots,
                                       const float* presence, const float* frequency, const float* repetition) {
  const int r = blockIdx.y;
  const int32_t slot = slots[r];
  if (slot < 0) return;
  const int32_t* c = counts + static_cast<int64_t>(slot) * vocab;
  float* x = logits + static_cast<int64_t>(r) * vocab;
  const float pres = presence[r], freq = frequency[r], rep = repetition[r];
  for (int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < vocab;
       v += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int32_t n = c[v];
    if (n == 0) continue;
    float l = x[v];
    if (rep != 1.0f) l = l > 0.0f ? __fdiv_rn(l, rep) : __fmul_rn(l, rep);
    const int32_t generated = n / 2;
    if (generated > 0) l = __fsub_rn(l, fmaf(freq, static_cast<float>(generated), pres));
    x[v] = l;
  }
}

// One CTA per row; its threads take the row's entries (distinct ids, so no two threads write one
// logit). A plain add, as apply_bias_row: -inf + a finite logit is -inf, a ban.
__global__ void apply_logit_bias_kernel(float* logits, int64_t vocab, const int32_t* offsets, const int32_t* ids,
                                        const float* values) {
  float* x = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  for (int32_t i = offsets[blockIdx.x] + static_cast<int32_t>(threadIdx.x); i < offsets[blockIdx.x + 1];
       i += static_cast<int32_t>(blockDim.x)) {
    x[ids[i]] += values[i];
  }
}

// A thread per logit; a CTA's 256 logits read 8 words of the row's mask (cached, shared by the warp).
__global__ void apply_token_bitmask_kernel(float* logits, int64_t vocab, const int32_t* bitmask, int words) {
  const int32_t* row_mask = bitmask + static_cast<int64_t>(blockIdx.y) * words;
  float* x = logits + static_cast<int64_t>(blockIdx.y) * vocab;
  for (int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < vocab;
       v += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (((static_cast<uint32_t>(__ldg(row_mask + v / 32)) >> (v % 32)) & 1u) == 0) x[v] = -INFINITY;
  }
}

struct Cand {
  float v;
  int i;
};
struct BetterOp {
  __device__ Cand operator()(const Cand& a, const Cand& b) const {
    return (b.v > a.v || (b.v == a.v && b.i < a.i)) ? b : a;
  }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

__global__ __launch_bounds__(kThreads) void logprobs_kernel(const float* logits, int64_t vocab, const int32_t* tokens,
                                                            int k, float* chosen, int32_t* top_ids,
                                                            float* top_logprobs) {
  using FloatReduce = cub::BlockReduce<float, kThreads>;
  using CandReduce = cub::BlockReduce<Cand, kThreads>;
  __shared__ union {
    typename FloatReduce::TempStorage f;
    typename CandReduce::TempStorage c;
  } tmp;
  __shared__ float s_value;
  __shared__ Cand s_best;
  const int row = blockIdx.x;
  const float* x = logits + static_cast<int64_t>(row) * vocab;

  float mx = -INFINITY;
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) mx = fmaxf(mx, x[i]);
  mx = FloatReduce(tmp.f).Reduce(mx, MaxOp());
  if (threadIdx.x == 0) s_value = mx;
  __syncthreads();
  mx = s_value;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) sum += expf(x[i] - mx);
  __syncthreads();
  sum = FloatReduce(tmp.f).Sum(sum);
  if (threadIdx.x == 0) s_value = mx + logf(sum);
  __syncthreads();
  const float log_z = s_value;
  if (threadIdx.x == 0) chosen[row] = x[tokens[row]] - log_z;
  if (k == 0) return;

  float val[kMaxTopLogprobs];
  int ids[kMaxTopLogprobs];
#pragma unroll
  for (int j = 0; j < kMaxTopLogprobs; ++j) {
    val[j] = -INFINITY;
    ids[j] = INT_MAX;
  }
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
    const float v = x[i];
    // Ids rise per thread: a later equal value never displaces an earlier one.
    if (!(v > val[k - 1] || (v == val[k - 1] && ids[k - 1] == INT_MAX))) continue;
    int j = k - 1;
    while (j > 0 && (v > val[j - 1] || (v == val[j - 1] && ids[j - 1] == INT_MAX))) {
      val[j] = val[j - 1];
      ids[j] = ids[j - 1];
      --j;
    }
    val[j] = v;
    ids[j] = static_cast<int>(i);
  }
  int head = 0;
  for (int round = 0; round < k; ++round) {
    Cand mine{-INFINITY, INT_MAX};
    if (head < k) mine = {val[0], ids[0]};
    __syncthreads();
    const Cand best = CandReduce(tmp.c).Reduce(mine, BetterOp());
    if (threadIdx.x == 0) {
      s_best = best;
      top_ids[static_cast<int64_t>(row) * k + round] = best.i;
      top_logprobs[static_cast<int64_t>(row) * k + round] = best.v - log_z;
    }
    __syncthreads();
    if (head < k && s_best.i == ids[0]) {  // ids are unique: only the winner advances
      ++head;
#pragma unroll
      for (int j = 0; j + 1 < kMaxTopLogprobs; ++j) {
        val[j] = val[j + 1];
        ids[j] = ids[j + 1];
      }
      val[kMaxTopLogprobs - 1] = -INFINITY;
      ids[kMaxTopLogprobs - 1] = INT_MAX;
    }
  }
}

unsigned blocks_for(int64_t vocab) {
  return static_cast<unsigned>(std::min<int64_t>((vocab + kThreads - 1) / kThreads, 64));
}

}  // namespace

void launch_reset_token_counts(int32_t* counts, int64_t vocab, const int32_t* slots, int num_slots,
                               cudaStream_t stream) {
  if (num_slots == 0) return;
  reset_counts_kernel<<<dim3(blocks_for(vocab), static_cast<unsigned>(num_slots)), kThreads, 0, stream>>>(
      counts, vocab, slots);
  CUDA_CHECK_LAUNCH();
}

void launch_count_tokens(int32_t* counts, int64_t vocab, const int32_t* slots, const int32_t* tokens,
                         const uint8_t* in_prompt, int n, cudaStream_t stream) {
  if (n == 0) return;
  count_tokens_kernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      counts, vocab, slots, tokens, in_prompt, n);
  CUDA_CHECK_LAUNCH();
}

void launch_apply_penalties(float* logits, int64_t rows, int64_t vocab, const int32_t* counts, const int32_t* slots,
                            const float* presence, const float* frequency, const float* repetition,
                            cudaStream_t stream) {
  if (rows == 0) return;
  apply_penalties_kernel<<<dim3(blocks_for(vocab), static_cast<unsigned>(rows)), kThreads, 0, stream>>>(
      logits, vocab, counts, slots, presence, frequency, repetition);
  CUDA_CHECK_LAUNCH();
}

void launch_apply_logit_bias(float* logits, int64_t rows, int64_t vocab, const int32_t* offsets, const int32_t* ids,
                             const float* values, cudaStream_t stream) {
  if (rows == 0) return;
  apply_logit_bias_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, vocab, offsets, ids, values);
  CUDA_CHECK_LAUNCH();
}

void launch_apply_token_bitmask(float* logits, int64_t rows, int64_t vocab, const int32_t* bitmask, int words,
                                cudaStream_t stream) {
  if (rows == 0) return;
  apply_token_bitmask_kernel<<<dim3(blocks_for(vocab), static_cast<unsigned>(rows)), kThreads, 0, stream>>>(
      logits, vocab, bitmask, words);
  CUDA_CHECK_LAUNCH();
}

void launch_logprobs(const float* logits, int64_t rows, int64_t vocab, const int32_t* tokens, int k, float* chosen,
                     int32_t* top_ids, float* top_logprobs, cudaStream_t stream) {
  if (rows == 0) return;
  logprobs_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, vocab, tokens, k, chosen, top_ids,
                                                                       top_logprobs);
  CUDA_CHECK_LAUNCH();
}

}  // namespace minivllm::cuda
