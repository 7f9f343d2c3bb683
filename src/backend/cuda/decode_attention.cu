// Decode attention, split-KV (flash-decoding), GQA-aware.
//
// Grid (num_splits, num_kv_heads, num_seqs), 128 threads. One CTA reads the keys of ONE kv head in
// one partition of one sequence and serves all the q heads of that kv head, so every KV byte is
// read once per step. Inside the CTA, a "lane group" of head_dim / 8 lanes owns one key at a
// time (16-byte loads of k and v, each lane 8 dims); the groups of a warp read consecutive keys,
// and each group keeps its own online softmax (max, sum, 8 accumulators per q head) with no
// shared memory or barrier in the main loop. kUnroll keys per group are loaded before any use,
// so several 16-byte loads per thread are in flight. The groups merge through shared memory at
// the end (log-sum-exp), and a second kernel merges the splits when there is more than one.
//
// num_splits / partition are computed on the host from graph-constant values (num_seqs,
// max_num_blocks), never from context_lens, so the launch shape is fixed inside a CUDA graph;
// CTAs whose partition starts past the sequence's length return at once.
#include <cfloat>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/device_utils.cuh"

namespace minivllm::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kUnroll = 4;
constexpr float kLog2e = 1.4426950408889634f;

template <int kHeadDim>
struct DecodeShape {
  static constexpr int kLanes = kHeadDim / 8;           // lanes per key
  static constexpr int kKeysPerWarp = 32 / kLanes;
  static constexpr int kGroups = kWarps * kKeysPerWarp;  // keys in flight per CTA per unroll step
  static constexpr int kStep = kGroups * kUnroll;        // keys per loop iteration
};

template <int kHeadDim, int kGroup>
__global__ __launch_bounds__(kThreads) void decode_split_kernel(AttentionArgs a, int partition, int num_splits,
                                                                float* partial_o, float* partial_lse) {
  pdl_launch_dependents();  // without splits the o projection's gemv comes next
  using S = DecodeShape<kHeadDim>;
  const int split = blockIdx.x;
  const int kvh = blockIdx.y;
  const int seq = blockIdx.z;
  const int ctx = a.context_lens[seq];
  const int start = split * partition;
  if (start >= ctx) return;  // past this sequence: the combine kernel skips this split
  const int end = min(ctx, start + partition);

  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int dl = lane % S::kLanes;                         // this lane's 8 dims: dl * 8 ..
  const int group = warp * S::kKeysPerWarp + lane / S::kLanes;
  const int64_t qkv_stride = static_cast<int64_t>(a.num_q_heads + 2 * a.num_kv_heads) * kHeadDim;
  const float qscale = a.scale * kLog2e;

  float q[kGroup][8];
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    const __nv_bfloat16* qp = static_cast<const __nv_bfloat16*>(a.qkv) + seq * qkv_stride +
                              static_cast<int64_t>(kvh * kGroup + g) * kHeadDim + dl * 8;
    bf16x8_to_f32(*reinterpret_cast<const uint4*>(qp), q[g]);
#pragma unroll
    for (int i = 0; i < 8; ++i) q[g][i] *= qscale;
  }
  float m[kGroup], l[kGroup], acc[kGroup][8];
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[g][i] = 0.0f;
  }

  const int32_t* table = a.block_tables + static_cast<int64_t>(seq) * a.table_cols;
  const int bs_mask = (1 << a.block_size_log2) - 1;
  const uint4* k_base = static_cast<const uint4*>(a.k_cache);
  const uint4* v_base = static_cast<const uint4*>(a.v_cache);
  constexpr int kChunks = kHeadDim / 8;

  for (int base = start; base < end; base += S::kStep) {
    uint4 kr[kUnroll], vr[kUnroll];
    bool valid[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = base + u * S::kGroups + group;
      valid[u] = j < end;
      if (valid[u]) {
        const int64_t block = table[j >> a.block_size_log2];
        const int64_t row = ((block * a.num_kv_heads + kvh) << a.block_size_log2) + (j & bs_mask);
        kr[u] = __ldg(k_base + row * kChunks + dl);
        vr[u] = __ldg(v_base + row * kChunks + dl);
      } else {
        kr[u] = make_uint4(0, 0, 0, 0);
        vr[u] = make_uint4(0, 0, 0, 0);
      }
    }
    float s[kUnroll][kGroup];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float k[8];
      bf16x8_to_f32(kr[u], k);
#pragma unroll
      for (int g = 0; g < kGroup; ++g) {
        float d = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i) d = fmaf(q[g][i], k[i], d);
#pragma unroll
        for (int o = S::kLanes / 2; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
        s[u][g] = valid[u] ? d : -INFINITY;
      }
    }
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      float mx = m[g];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) mx = fmaxf(mx, s[u][g]);
      if (mx == -INFINITY) continue;  // no key of this group yet
      const float corr = exp2f(m[g] - mx);
      l[g] *= corr;
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[g][i] *= corr;
      m[g] = mx;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float v[8];
      bf16x8_to_f32(vr[u], v);
#pragma unroll
      for (int g = 0; g < kGroup; ++g) {
        const float p = valid[u] ? exp2f(s[u][g] - m[g]) : 0.0f;
        l[g] += p;
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[g][i] = fmaf(p, v[i], acc[g][i]);
      }
    }
  }

  // Merge the lane groups of the CTA.
  __shared__ float sm_m[S::kGroups][kGroup];
  __shared__ float sm_l[S::kGroups][kGroup];
  __shared__ float sm_acc[S::kGroups][kGroup][kHeadDim];
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
#pragma unroll
    for (int i = 0; i < 8; ++i) sm_acc[group][g][dl * 8 + i] = acc[g][i];
    if (dl == 0) {
      sm_m[group][g] = m[g];
      sm_l[group][g] = l[g];
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < kGroup * kHeadDim; idx += kThreads) {
    const int g = idx / kHeadDim;
    const int d = idx % kHeadDim;
    float mx = -INFINITY;
#pragma unroll
    for (int r = 0; r < S::kGroups; ++r) mx = fmaxf(mx, sm_m[r][g]);
    float sum = 0.0f, o = 0.0f;
#pragma unroll
    for (int r = 0; r < S::kGroups; ++r) {
      const float w = exp2f(sm_m[r][g] - mx);  // 0 for a group that saw no key
      sum += sm_l[r][g] * w;
      o += sm_acc[r][g][d] * w;
    }
    const int h = kvh * kGroup + g;
    if (num_splits == 1) {
      __nv_bfloat16* out = static_cast<__nv_bfloat16*>(a.out) +
                           static_cast<int64_t>(seq) * a.num_q_heads * kHeadDim + static_cast<int64_t>(h) * kHeadDim;
      out[d] = __float2bfloat16(o / sum);
    } else {
      const int64_t row = (static_cast<int64_t>(seq) * a.num_q_heads + h) * num_splits + split;
      partial_o[row * kHeadDim + d] = o / sum;
      if (d == 0) partial_lse[row] = mx + log2f(sum);
    }
  }
}

// One CTA of head_dim threads per (sequence, q head): weights 2^(lse_i - max lse) over the splits
// that hold keys of this sequence.
__global__ void decode_combine_kernel(AttentionArgs a, int partition, int num_splits, const float* partial_o,
                                      const float* partial_lse) {
  pdl_launch_dependents();  // the o projection's gemv may start streaming its weights now
  const int row = blockIdx.x;  // seq * nq + h
  const int seq = row / a.num_q_heads;
  const int d = threadIdx.x;
  const int used = min(num_splits, (a.context_lens[seq] + partition - 1) / partition);
  const float* lse = partial_lse + static_cast<int64_t>(row) * num_splits;
  float mx = -INFINITY;
  for (int i = 0; i < used; ++i) mx = fmaxf(mx, lse[i]);
  float sum = 0.0f, o = 0.0f;
  for (int i = 0; i < used; ++i) {
    const float w = exp2f(lse[i] - mx);
    sum += w;
    o += w * partial_o[(static_cast<int64_t>(row) * num_splits + i) * a.head_dim + d];
  }
  __nv_bfloat16* out = static_cast<__nv_bfloat16*>(a.out) + static_cast<int64_t>(row) * a.head_dim;
  out[d] = __float2bfloat16(used > 0 ? o / sum : 0.0f);
}

template <int kHeadDim, int kGroup>
void launch_split(const AttentionArgs& a, int num_splits, int partition, float* po, float* plse, cudaStream_t st) {
  const dim3 grid(num_splits, a.num_kv_heads, a.num_seqs);
  decode_split_kernel<kHeadDim, kGroup><<<grid, kThreads, 0, st>>>(a, partition, num_splits, po, plse);
  CUDA_CHECK_LAUNCH();
}

template <int kHeadDim>
void dispatch_group(const AttentionArgs& a, int num_splits, int partition, float* po, float* plse, cudaStream_t st) {
  switch (a.num_q_heads / a.num_kv_heads) {
    case 1: return launch_split<kHeadDim, 1>(a, num_splits, partition, po, plse, st);
    case 2: return launch_split<kHeadDim, 2>(a, num_splits, partition, po, plse, st);
    case 4: return launch_split<kHeadDim, 4>(a, num_splits, partition, po, plse, st);
    case 8: return launch_split<kHeadDim, 8>(a, num_splits, partition, po, plse, st);
    default: MINIVLLM_FAIL() << "decode attention: GQA group " << a.num_q_heads / a.num_kv_heads
                             << " not supported (1, 2, 4, 8)";
  }
}

}  // namespace

int decode_partition_granule(int head_dim) {
  return head_dim == 64 ? DecodeShape<64>::kStep : DecodeShape<128>::kStep;
}

void launch_decode_attention(const AttentionArgs& a, int num_splits, int partition, float* partial_o,
                             float* partial_lse, cudaStream_t stream) {
  if (a.num_seqs == 0) return;
  if (a.head_dim == 64) {
    dispatch_group<64>(a, num_splits, partition, partial_o, partial_lse, stream);
  } else if (a.head_dim == 128) {
    dispatch_group<128>(a, num_splits, partition, partial_o, partial_lse, stream);
  } else {
    MINIVLLM_FAIL() << "decode attention: head_dim " << a.head_dim << " not supported (64, 128)";
  }
  if (num_splits > 1) {
    decode_combine_kernel<<<a.num_seqs * a.num_q_heads, a.head_dim, 0, stream>>>(a, partition, num_splits, partial_o,
                                                                                 partial_lse);
    CUDA_CHECK_LAUNCH();
  }
}

}  // namespace minivllm::cuda
