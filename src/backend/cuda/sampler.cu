// The sampler on the GPU: one CTA of 1024 threads per row, the semantics of sampling/sampler.h.
//
// Relative probabilities q_i = exp((l_i - max l) / T) (q_max = 1, so min_p's threshold is min_p).
// The top_k and top_p thresholds are found by one radix select on the bit patterns of q (positive
// floats order like their bits), four passes of 8 bits, weighted by count (top_k: the largest v
// with #{q >= v} >= k) or by mass (top_p: the largest v with mass{q >= v, q >= t_k} >= top_p *
// mass{q >= t_k}). The inverse CDF runs in id order (inverse_cdf): warps sum contiguous pieces,
// the piece holding the crossing is cut again, and one warp finds the first crossing in the last.
// Rows with a temperature and no filter take one online pass for the max and the piece masses.
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
constexpr float kLog2e = 1.4426950408889634f;

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

constexpr int kWarps = kThreads / 32;

// Inclusive prefix sum across a warp.
__device__ __forceinline__ float warp_inclusive_sum(float v) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const float u = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += u;
  }
  return v;
}

// Shared state of the inverse CDF: one mass per warp, the crossing found so far.
struct CdfSmem {
  float mass[kWarps];
  float before;  // kept mass of the ids before the range being searched
  float total;   // the row's kept mass, summed in piece order
  int64_t lo, hi;
  int first, last;
};

// Ids [lo, hi) cut into kWarps contiguous pieces of whole 32-id steps; warp w owns piece w.
__device__ __forceinline__ void warp_piece(int64_t lo, int64_t hi, int w, int64_t* b, int64_t* e) {
  const int64_t per = ((hi - lo + kWarps - 1) / kWarps + 31) / 32 * 32;
  *b = min(hi, lo + w * per);
  *e = min(hi, *b + per);
}

// After every warp stored its piece's mass in sm.mass: warp 0 finds the piece in which the running
// kept mass (from sm.before) first exceeds target, and narrows [sm.lo, sm.hi) to it (sm.before
// advanced to its start). A piece of zero mass never wins; when rounding leaves target unreached,
// the last piece with mass wins (its last kept id is then the answer).
__device__ void narrow_to_crossing(CdfSmem& sm, float target) {
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    const float m = sm.mass[lane];
    const float incl = warp_inclusive_sum(m);
    const float before = sm.before + incl - m;
    const unsigned crossing = __ballot_sync(0xffffffffu, m > 0.0f && before + m > target);
    const unsigned nonzero = __ballot_sync(0xffffffffu, m > 0.0f);
    const int w = crossing != 0 ? __ffs(crossing) - 1 : (nonzero != 0 ? 31 - __clz(nonzero) : -1);
    const float start = __shfl_sync(0xffffffffu, before, w < 0 ? 0 : w);
    if (lane == 0) {
      if (w < 0) {
        sm.hi = sm.lo;  // nothing kept: the caller falls back
      } else {
        int64_t b, e;
        warp_piece(sm.lo, sm.hi, w, &b, &e);
        sm.lo = b;
        sm.hi = e;
        sm.before = start;
      }
    }
  }
  __syncthreads();
}

// The inverse CDF in id order over the kept ids (q >= t), coalesced: every warp sums a contiguous
// piece of the row, the piece holding the crossing is cut again into kWarps pieces, and one warp
// walks the last piece 32 ids at a time with a warp scan. The first id whose running kept mass
// exceeds target wins; when rounding leaves target unreached, the last kept id of that piece with
// a weight above zero (sampler.h would take the row's last kept id, weightless or not). Each full pass
// reads the row once, in 128-byte warp loads (a thread per contiguous slice of ids read 32 rows'
// worth of cache lines per load, and the sampler was several times slower; measured: PERFORMANCE.md,
// "H100: the seeds' throughput workload", the 2026-11-23 row of the coalesced sampler).
template <typename Q>
__device__ int inverse_cdf(int64_t vocab, Q qof, float t, float u, CdfSmem& sm, const float* first_masses) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  if (threadIdx.x == 0) {
    sm.lo = 0;
    sm.hi = vocab;
    sm.before = 0.0f;
    sm.first = INT_MAX;
    sm.last = -1;
  }
  __syncthreads();
  // The first level's masses: given (plain rows, from the online pass) or summed here.
  for (int level = 0; level < 2; ++level) {
    const int64_t lo = sm.lo, hi = sm.hi;
    if (hi <= lo) break;
    if (level == 0 && first_masses != nullptr) {
      if (threadIdx.x < kWarps) sm.mass[threadIdx.x] = first_masses[threadIdx.x];
    } else {
      int64_t b, e;
      warp_piece(lo, hi, warp, &b, &e);
      float m = 0.0f;
#pragma unroll 4
      for (int64_t i = b + lane; i < e; i += 32) {
        const float q = qof(i);
        m += q >= t ? q : 0.0f;
      }
      m = warp_sum(m);
      if (lane == 0) sm.mass[warp] = m;
    }
    __syncthreads();
    if (level == 0) {
      if (threadIdx.x < 32) {
        const float total = warp_sum(sm.mass[threadIdx.x]);
        if (threadIdx.x == 0) sm.total = total;
      }
      __syncthreads();
    }
    narrow_to_crossing(sm, u * sm.total);
  }
  // One warp walks the last piece.
  if (warp == 0 && sm.hi > sm.lo) {
    const float target = u * sm.total;
    float run = sm.before;
    int last = -1;
    for (int64_t i0 = sm.lo; i0 < sm.hi; i0 += 32) {
      const int64_t i = i0 + lane;
      float q = i < sm.hi ? qof(i) : 0.0f;
      const bool kept = i < sm.hi && q >= t && q > 0.0f;  // a weightless id (-inf logit) is never drawn
      if (!kept) q = 0.0f;
      const float incl = warp_inclusive_sum(q);
      const unsigned crossing = __ballot_sync(0xffffffffu, kept && run + incl > target);
      const unsigned kept_mask = __ballot_sync(0xffffffffu, kept);
      if (kept_mask != 0) last = static_cast<int>(i0) + 31 - __clz(kept_mask);
      if (crossing != 0) {
        if (lane == 0) sm.first = static_cast<int>(i0) + __ffs(crossing) - 1;
        break;
      }
      run += __shfl_sync(0xffffffffu, incl, 31);
    }
    if (lane == 0) sm.last = last;
  }
  __syncthreads();
  return sm.first != INT_MAX ? sm.first : max(sm.last, 0);
}

// The plain-row pass (temperature, no filter) over a row or a vocabulary slice of n ids, z = l * k
// (k = log2(e) / T): per warp piece an online (max, sum), no max pass first; returns the z max and
// leaves each piece's mass, scaled to it, in s_mass. -inf, NaN and +inf logits weigh nothing.
// sample_kernel's plain rows and both stages of the vocabulary-parallel sampler run this code, so
// the rank that picks a token finds the mass its stats reported.
// With best (the vocabulary-parallel stats): the thread's first largest raw logit as well, from the
// same loads (ids rise per thread; NaN never wins, +inf does), for a block-wide ArgMaxOp reduce.
__device__ float slice_masses(const float* x, int64_t n, float k, float* s_wmax, float* s_wsum, float* s_mass,
                              ArgMax* best = nullptr) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  int64_t b, e;
  warp_piece(0, n, warp, &b, &e);
  float m = -INFINITY, sum = 0.0f;
#pragma unroll 4
  for (int64_t i = b + lane; i < e; i += 32) {
    const float v = x[i];
    if (best != nullptr && v > best->v) *best = {v, static_cast<int>(i)};
    const float z = v * k;
    if (!(z > -INFINITY) || z == INFINITY) continue;  // -inf, NaN and +inf weigh nothing
    if (z > m) {
      sum = sum * exp2f(m - z) + 1.0f;
      m = z;
    } else {
      sum += exp2f(z - m);
    }
  }
  const float wm = warp_max(m);
  sum = wm == -INFINITY ? 0.0f : sum * exp2f(m - wm);
  sum = warp_sum(sum);
  if (lane == 0) {
    s_wmax[warp] = wm;
    s_wsum[warp] = sum;
  }
  __syncthreads();
  float zmax = -INFINITY;
  for (int w = 0; w < kWarps; ++w) zmax = fmaxf(zmax, s_wmax[w]);
  if (threadIdx.x < kWarps) {
    const float wmx = s_wmax[threadIdx.x];
    s_mass[threadIdx.x] = wmx == -INFINITY ? 0.0f : s_wsum[threadIdx.x] * exp2f(wmx - zmax);
  }
  __syncthreads();
  return zmax;
}

__global__ __launch_bounds__(kThreads) void sample_kernel(const float* logits, int64_t vocab, SampleParamsDevice p,
                                                          int32_t* out) {
  using ArgReduce = cub::BlockReduce<ArgMax, kThreads>;
  using SumReduce = cub::BlockReduce<float, kThreads>;
  __shared__ union {
    typename ArgReduce::TempStorage arg;
    typename SumReduce::TempStorage sum;
    SelectSmem<unsigned> count;
    SelectSmem<float> mass;
  } tmp;
  __shared__ CdfSmem cdf;
  __shared__ float s_bcast, s_wmax[kWarps], s_wsum[kWarps], s_mass[kWarps];
  __shared__ int s_first;

  const int row = blockIdx.x;
  const float* x = logits + static_cast<int64_t>(row) * vocab;
  const float temperature = p.temperature[row];
  const int top_k = p.top_k[row];
  const float top_p = p.top_p[row];
  const float min_p = p.min_p[row];
  const bool filtered = (top_k >= 1 && top_k < vocab) || top_p < 1.0f || min_p > 0.0f;

  if (temperature > 0.0f && !filtered) {
    // Plain temperature sampling: q_i = 2^(z_i - max z), z = logit * log2(e) / T, from one online
    // pass (slice_masses); the crossing search then re-reads only the piece that holds it. Every
    // id is kept (t = 0), as in sampler.h.
    const float k = kLog2e / temperature;
    const float zmax = slice_masses(x, vocab, k, s_wmax, s_wsum, s_mass);
    auto qof = [=](int64_t i) {
      const float z = x[i] * k;
      return z == INFINITY ? 0.0f : exp2f(z - zmax);
    };
    const int tok = inverse_cdf(vocab, qof, 0.0f, p.uniform[row], cdf, s_mass);
    if (threadIdx.x == 0) out[row] = tok;
    return;
  }

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
  if (temperature == 0.0f) {
    if (threadIdx.x == 0) out[row] = s_first;
    return;
  }
  const float max_logit = s_bcast;
  const float inv_t = 1.0f / temperature;
  auto qof = [=](int64_t i) { return expf((x[i] - max_logit) * inv_t); };

  float t_k = 0.0f;
  if (top_k >= 1 && top_k < vocab) {
    t_k = radix_select<unsigned>(vocab, static_cast<unsigned>(top_k), qof, [](float) { return 1u; }, tmp.count);
  }
  float t = fmaxf(t_k, min_p);
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
  const int tok = inverse_cdf(vocab, qof, t, p.uniform[row], cdf, nullptr);
  if (threadIdx.x == 0) out[row] = tok;
}

// ---- The vocabulary-parallel sampler's stages (sampling/shard_sampler.h states the semantics;
// the host reference computes in fp64, these in fp32 as sample_kernel does). Logits of a slice are
// in log2 units, z = l * log2(e) / T, so mass_r = sum 2^(z_i - z_max) is sample_kernel's plain-row
// mass and stats keep the raw max logit (z_max = max l * k exactly: k > 0 keeps the order).

// pieces[row] = (zmax, the kWarps warp-piece masses) of a temperature row, as slice_masses left
// them (kShardPieceFloats a row): the pick kernel's first level, so that it reads only the piece
// that holds the draw.
static_assert(kShardPieceFloats == 1 + kWarps, "cuda_kernels.h sizes a row's pieces for this CTA");
static_assert(kWarps == 32, "the pick sums the piece masses with one warp, a lane each");

// One CTA per row: stats[row] = (max logit, lowest id of it, mass, 0), and pieces[row].
__global__ __launch_bounds__(kThreads) void shard_stats_kernel(const float* logits, int64_t n, const float* params,
                                                               int64_t vocab_start, float4* stats, float* pieces) {
  using ArgReduce = cub::BlockReduce<ArgMax, kThreads>;
  __shared__ typename ArgReduce::TempStorage tmp;
  __shared__ float s_wmax[kWarps], s_wsum[kWarps], s_mass[kWarps];
  const int row = blockIdx.x;
  const float* x = logits + static_cast<int64_t>(row) * n;
  const float temperature = params[2 * row];
  ArgMax best{-INFINITY, INT_MAX};
  float mass = 0.0f;
  if (temperature > 0.0f) {  // one pass over the slice for the mass and the argmax (half the loads)
    const float zmax = slice_masses(x, n, kLog2e / temperature, s_wmax, s_wsum, s_mass, &best);
    if (threadIdx.x < 32) mass = warp_sum(s_mass[threadIdx.x]);
    float* own = pieces + static_cast<int64_t>(row) * kShardPieceFloats;
    if (threadIdx.x == 0) own[0] = zmax;
    if (threadIdx.x < kWarps) own[1 + threadIdx.x] = s_mass[threadIdx.x];
  } else {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const float v = x[i];
      if (v > best.v) best = {v, static_cast<int>(i)};  // ids rise per thread: first max kept
    }
  }
  best = ArgReduce(tmp).Reduce(best, ArgMaxOp());
  if (threadIdx.x == 0) {
    const int id = best.i == INT_MAX ? 0 : best.i;
    stats[row] = make_float4(best.v, static_cast<float>(vocab_start + id), mass, 0.0f);
  }
}

// One CTA per row: where the draw falls (every thread computes it from the ranks' stats), and the
// token when it falls in this rank's slice.
__global__ __launch_bounds__(kThreads) void shard_pick_kernel(const float* logits, int64_t n, const float* params,
                                                              int64_t vocab_start, int rank, int world,
                                                              const float4* all_stats, const float* pieces, int rows,
                                                              int32_t* picks) {
  __shared__ CdfSmem cdf;
  __shared__ float s_mass[kWarps], s_total;
  const int row = blockIdx.x;
  const float temperature = params[2 * row], uniform = params[2 * row + 1];
  int top = 0;
  for (int r = 1; r < world; ++r) {
    if (all_stats[r * rows + row].x > all_stats[top * rows + row].x) top = r;  // lower ranks: lower ids
  }
  const float big_m = all_stats[top * rows + row].x;
  if (temperature == 0.0f || !(big_m > -INFINITY)) {
    if (threadIdx.x == 0) picks[row] = top == rank ? static_cast<int>(all_stats[top * rows + row].y) : -1;
    return;
  }
  const float k = kLog2e / temperature, big_z = big_m * k;
  float total = 0.0f;
  for (int r = 0; r < world; ++r) {
    const float4 st = all_stats[r * rows + row];
    if (st.z > 0.0f) total += st.z * exp2f(st.x * k - big_z);
  }
  const float target = uniform * total;
  float run = 0.0f, local = INFINITY;
  int chosen = -1, last = top;
  for (int r = 0; r < world && chosen < 0; ++r) {
    const float4 st = all_stats[r * rows + row];
    if (!(st.z > 0.0f)) continue;
    const float scale = exp2f(st.x * k - big_z), w = st.z * scale;
    if (run + w > target) {
      chosen = r;
      local = (target - run) / scale;
    }
    run += w;
    last = r;
  }
  if (chosen < 0) chosen = last;  // rounding: the last id with weight (local stays +inf)
  if (chosen != rank) {
    if (threadIdx.x == 0) picks[row] = -1;
    return;
  }
  const float* x = logits + static_cast<int64_t>(row) * n;
  // The stats kernel's own zmax and piece masses of this row (the same slice_masses, bit for bit):
  // no second pass over the slice.
  const float* own = pieces + static_cast<int64_t>(row) * kShardPieceFloats;
  const float zmax = own[0];
  float mass = 0.0f;
  if (threadIdx.x < 32) mass = warp_sum(own[1 + threadIdx.x]);
  if (threadIdx.x < kWarps) s_mass[threadIdx.x] = own[1 + threadIdx.x];
  if (threadIdx.x == 0) s_total = mass;
  __syncthreads();
  // inverse_cdf draws at u * (its own sum of s_mass): the fraction of this slice's mass.
  const float u = s_total > 0.0f ? fminf(local / s_total, 1.0f) : 1.0f;
  auto qof = [=](int64_t i) {
    const float z = x[i] * k;
    return z == INFINITY ? 0.0f : exp2f(z - zmax);
  };
  const int tok = inverse_cdf(n, qof, 0.0f, u, cdf, s_mass);
  if (threadIdx.x == 0) picks[row] = static_cast<int>(vocab_start) + tok;
}

// tokens[r] = the largest of the ranks' picks of row r (the one that is not -1).
__global__ void shard_merge_kernel(const int32_t* all_picks, int world, int64_t per, int64_t rows, int32_t* tokens) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  int32_t best = -1;
  for (int q = 0; q < world; ++q) best = max(best, all_picks[q * per + r]);
  tokens[r] = best < 0 ? 0 : best;
}

// Greedy batches: argmax alone, but over many CTAs. One 1024-thread CTA per row (sample_kernel)
// streams a 151,936-id row from one SM, which is slow even at batch 1 (measured: PERFORMANCE.md,
// "Greedy argmax in one CTA"); here kGreedyParts CTAs per row each reduce a contiguous slice to
// (max, lowest id) and a second kernel merges a row's slices with the same ArgMaxOp, so the result
// (largest value, lowest id on ties, 0 when no value beats -inf) is that of sample_kernel's greedy
// path.
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

void launch_shard_sample_stats(const float* logits, int64_t rows, int64_t n, const float* params, int64_t vocab_start,
                               float* stats, float* pieces, cudaStream_t stream) {
  if (rows == 0) return;
  shard_stats_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, n, params, vocab_start,
                                                                           reinterpret_cast<float4*>(stats), pieces);
  CUDA_CHECK_LAUNCH();
}

void launch_shard_sample_pick(const float* logits, int64_t rows, int64_t n, const float* params, int64_t vocab_start,
                              int rank, int world, const float* all_stats, const float* pieces, int32_t* picks,
                              cudaStream_t stream) {
  if (rows == 0) return;
  shard_pick_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      logits, n, params, vocab_start, rank, world, reinterpret_cast<const float4*>(all_stats), pieces,
      static_cast<int>(rows), picks);
  CUDA_CHECK_LAUNCH();
}

void launch_shard_sample_merge(const int32_t* all_picks, int world, int64_t per, int64_t rows, int32_t* tokens,
                               cudaStream_t stream) {
  if (rows == 0) return;
  constexpr int kMergeThreads = 256;
  shard_merge_kernel<<<static_cast<unsigned>(ceil_div(rows, kMergeThreads)), kMergeThreads, 0, stream>>>(
      all_picks, world, per, rows, tokens);
  CUDA_CHECK_LAUNCH();
}

// A row past what was sampled cannot come from the engine; it reads token 0 rather than out of
// bounds (the host checks the rows before launching).
__global__ void resolve_pending_ids_kernel(int32_t* ids, int64_t n, const int32_t* sampled, int64_t num_sampled) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int32_t id = ids[i];
  if (id >= 0) return;
  const int64_t row = -static_cast<int64_t>(id) - 1;
  ids[i] = row < num_sampled ? sampled[row] : 0;
}

void launch_resolve_pending_ids(int32_t* ids, int64_t n, const int32_t* sampled, int64_t num_sampled,
                                cudaStream_t stream) {
  if (n == 0) return;
  constexpr int kThreads = 256;
  resolve_pending_ids_kernel<<<static_cast<unsigned>(ceil_div(n, kThreads)), kThreads, 0, stream>>>(ids, n, sampled,
                                                                                                   num_sampled);
  CUDA_CHECK_LAUNCH();
}

}  // namespace minivllm::cuda
