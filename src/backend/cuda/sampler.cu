// The sampler on the GPU: one CTA of 1024 threads per row, the semantics of sampling/sampler.h.
//
// Relative probabilities q_i = exp((l_i - max l) / T) (q_max = 1, so min_p's threshold is min_p).
// The top_k and top_p thresholds are found by one radix select on the bit patterns of q (positive
// floats order like their bits), four passes of 8 bits, weighted by count (top_k: the largest v
// with #{q >= v} >= k) or by mass (top_p: the largest v with mass{q >= v, q >= t_k} >= top_p *
// mass{q >= t_k}). The inverse CDF runs in id order: each thread owns a contiguous slice of the
// vocabulary, a block scan gives each slice its starting mass, and the first crossing wins.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <algorithm>
#include <climits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/device_utils.cuh"

namespace minivllm::cuda {
namespace {

constexpr int kThreads = 1024;

struct ArgMax {
  float v;
  int i;
};
struct ArgMaxOp {
  __device__ ArgMax operator()(const ArgMax& a, const ArgMax& b) const {
    return (b.v > a.v || (b.v == a.v && b.i < a.i)) ? b : a;
  }
};

template <typename W>
struct SelectSmem {
  W hist[256];
  uint32_t prefix;
  W above;
  int found;
};

// The largest key v (bit pattern of a q value) such that the weight of {i : q_i >= v} is at least
// `target`; 0 when the total weight falls short. weight(q) may be 0 (element not counted).
template <typename W, typename Q, typename Weight>
__device__ float radix_select(int64_t vocab, W target, Q qof, Weight weight, SelectSmem<W>& sm) {
  uint32_t prefix = 0, mask = 0;
  W above = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) sm.hist[i] = 0;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
      const float q = qof(i);
      const uint32_t bits = __float_as_uint(q);
      if ((bits & mask) != prefix) continue;
      const W w = weight(q);
      if (w > 0) atomicAdd(&sm.hist[(bits >> shift) & 255u], w);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int chosen = -1, lowest_nonzero = -1;
      W acc = above;
      for (int d = 255; d >= 0; --d) {
        if (sm.hist[d] > 0) lowest_nonzero = d;
        if (acc + sm.hist[d] >= target && sm.hist[d] > 0) {
          chosen = d;
          break;
        }
        acc += sm.hist[d];
      }
      // Float sums regrouped by a finer digit may fall a rounding short: keep the lowest digit.
      if (chosen < 0 && shift != 24) chosen = lowest_nonzero;
      sm.found = chosen >= 0;
      sm.prefix = prefix | (static_cast<uint32_t>(chosen < 0 ? 0 : chosen) << shift);
      sm.above = acc;
    }
    __syncthreads();
    if (!sm.found) return 0.0f;
    prefix = sm.prefix;
    above = sm.above;
    mask |= 255u << shift;
  }
  return __uint_as_float(prefix);
}

__global__ __launch_bounds__(kThreads) void sample_kernel(const float* logits, int64_t vocab, SampleParamsDevice p,
                                                          int32_t* out) {
  using ArgReduce = cub::BlockReduce<ArgMax, kThreads>;
  using SumReduce = cub::BlockReduce<float, kThreads>;
  using Scan = cub::BlockScan<float, kThreads>;
  __shared__ union {
    typename ArgReduce::TempStorage arg;
    typename SumReduce::TempStorage sum;
    typename Scan::TempStorage scan;
    SelectSmem<unsigned> count;
    SelectSmem<float> mass;
  } tmp;
  __shared__ float s_bcast;
  __shared__ int s_first, s_last;

  const int row = blockIdx.x;
  const float* x = logits + static_cast<int64_t>(row) * vocab;
  ArgMax best{-INFINITY, INT_MAX};
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float v = x[i];
    if (v > best.v) best = {v, static_cast<int>(i)};  // ids rise per thread: first max kept
  }
  best = ArgReduce(tmp.arg).Reduce(best, ArgMaxOp());
  if (threadIdx.x == 0) {
    s_first = best.i == INT_MAX ? 0 : best.i;
    s_bcast = best.v;
  }
  __syncthreads();
  const float temperature = p.temperature[row];
  if (temperature == 0.0f) {
    if (threadIdx.x == 0) out[row] = s_first;
    return;
  }
  const float max_logit = s_bcast;
  const float inv_t = 1.0f / temperature;
  auto qof = [=](int64_t i) { return expf((x[i] - max_logit) * inv_t); };

  const int top_k = p.top_k[row];
  float t_k = 0.0f;
  if (top_k >= 1 && top_k < vocab) {
    t_k = radix_select<unsigned>(vocab, static_cast<unsigned>(top_k), qof, [](float) { return 1u; }, tmp.count);
  }
  float t = fmaxf(t_k, p.min_p[row]);
  const float top_p = p.top_p[row];
  if (top_p < 1.0f) {
    float mass = 0.0f;
    for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
      const float q = qof(i);
      mass += q >= t_k ? q : 0.0f;
    }
    __syncthreads();
    mass = SumReduce(tmp.sum).Sum(mass);
    if (threadIdx.x == 0) s_bcast = mass;
    __syncthreads();
    const float target = top_p * s_bcast;
    const float t_p = radix_select<float>(vocab, target, qof, [=](float q) { return q >= t_k ? q : 0.0f; }, tmp.mass);
    t = fmaxf(t, t_p);
  }

  // Inverse CDF in id order over the kept tokens.
  const int64_t per = (vocab + blockDim.x - 1) / blockDim.x;
  const int64_t lo = min(vocab, threadIdx.x * per);
  const int64_t hi = min(vocab, lo + per);
  float own = 0.0f;
  int last = -1;
  for (int64_t i = lo; i < hi; ++i) {
    const float q = qof(i);
    if (q >= t) {
      own += q;
      last = static_cast<int>(i);
    }
  }
  float before = 0.0f, total = 0.0f;
  __syncthreads();
  Scan(tmp.scan).ExclusiveSum(own, before, total);
  if (threadIdx.x == 0) {
    s_first = INT_MAX;
    s_last = -1;
  }
  __syncthreads();
  const float target = p.uniform[row] * total;
  if (last >= 0) atomicMax(&s_last, last);
  if (own > 0.0f && before + own > target) {
    float run = before;
    for (int64_t i = lo; i < hi; ++i) {
      const float q = qof(i);
      if (q < t) continue;
      run += q;
      if (run > target) {
        atomicMin(&s_first, static_cast<int>(i));
        break;
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) out[row] = s_first != INT_MAX ? s_first : max(s_last, 0);
}

// Greedy batches: argmax alone, but over many CTAs. One 1024-thread CTA per row (sample_kernel)
// streams a 151,936-id row from one SM, ~60 us at batch 1; here kGreedyParts CTAs per row each
// reduce a contiguous slice to (max, lowest id) and a second kernel merges a row's slices with the
// same ArgMaxOp, so the result (largest value, lowest id on ties, 0 when no value beats -inf) is
// that of sample_kernel's greedy path.
constexpr int kGreedyThreads = 256;

__global__ __launch_bounds__(kGreedyThreads) void greedy_partial_kernel(const float* logits, int64_t vocab,
                                                                         int64_t slice, ArgMax* partial) {
  using Reduce = cub::BlockReduce<ArgMax, kGreedyThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  const int64_t begin = blockIdx.x * slice, end = min(vocab, begin + slice);
  const float* x = logits + static_cast<int64_t>(blockIdx.y) * vocab;
  ArgMax best{-INFINITY, INT_MAX};
#pragma unroll 4
  for (int64_t i = begin + threadIdx.x; i < end; i += kGreedyThreads) {
    const float v = x[i];
    if (v > best.v) best = {v, static_cast<int>(i)};  // ids rise per thread: first max kept
  }
  best = Reduce(tmp).Reduce(best, ArgMaxOp());
  if (threadIdx.x == 0) partial[blockIdx.y * gridDim.x + blockIdx.x] = best;
}

__global__ __launch_bounds__(kGreedyParts) void greedy_merge_kernel(const ArgMax* partial, int parts, int32_t* out) {
  using Reduce = cub::BlockReduce<ArgMax, kGreedyParts>;
  __shared__ typename Reduce::TempStorage tmp;
  ArgMax best{-INFINITY, INT_MAX};
  if (static_cast<int>(threadIdx.x) < parts) best = partial[blockIdx.x * parts + threadIdx.x];
  best = Reduce(tmp).Reduce(best, ArgMaxOp());
  if (threadIdx.x == 0) out[blockIdx.x] = best.i == INT_MAX ? 0 : best.i;
}

}  // namespace

void launch_greedy_sample(const float* logits, int64_t rows, int64_t vocab, void* scratch, int32_t* out_tokens,
                          cudaStream_t stream) {
  if (rows == 0) return;
  // Slices of >= 2048 ids (8 loads per thread), at most kGreedyParts per row.
  const int64_t parts = std::min<int64_t>(kGreedyParts, std::max<int64_t>(1, (vocab + 2047) / 2048));
  const int64_t slice = (vocab + parts - 1) / parts;
  auto* partial = static_cast<ArgMax*>(scratch);
  greedy_partial_kernel<<<dim3(static_cast<unsigned>(parts), static_cast<unsigned>(rows)), kGreedyThreads, 0,
                          stream>>>(logits, vocab, slice, partial);
  CUDA_CHECK_LAUNCH();
  greedy_merge_kernel<<<static_cast<unsigned>(rows), kGreedyParts, 0, stream>>>(partial, static_cast<int>(parts),
                                                                                 out_tokens);
  CUDA_CHECK_LAUNCH();
}

void launch_sample(const float* logits, int64_t rows, int64_t vocab, const SampleParamsDevice& p, int32_t* out_tokens,
                   cudaStream_t stream) {
  if (rows == 0) return;
  sample_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, vocab, p, out_tokens);
  CUDA_CHECK_LAUNCH();
}

}  // namespace minivllm::cuda
