// Decode attention on the tensor cores (mma.sync m16n8k16, fp32 accumulation), for the shapes of
// the exact CUDA-core kernels: GQA groups 1, 2, 4 and 8 at head_dim 64 and 128, bf16 or fp8
// caches, block sizes from 16.
//
// Why: the CUDA-core kernels (decode_attention.cu) stream a bf16 cache near copy bandwidth at
// Qwen3's group 2, but at group 4 (Llama) and over fp8 caches each key costs a dependent chain
// (conversions, a product per q head and dim, shuffle rounds, an exp per q head) that keeps them
// at 53-80% of it (KERNEL_NOTES.md). Here a warp takes 16 keys at a time: q.k is one mma per 8
// keys and 16 dims, the CTA's q heads being the rows (padded to 16 with zeros), and p.v one mma
// per 8 output dims. The shuffles are per 16 keys, not per key.
//
// Grid (splits, kv heads, seqs), the split plan, the PDL prologue and the end of a CTA
// (decode_finish.cuh) are the CUDA-core kernels'. Fragments come straight from global memory in
// layouts chosen so that each thread loads contiguous runs of a key row and a warp whole rows
// (mma_sync.cuh has the fragment layouts; g = lane / 4, t = lane % 4):
// - q.k: the mma's k index is a permutation of the head dims. Thread (g, t) owns dims
//   [t * D/4, (t + 1) * D/4) of q head g and of keys g and g + 8, four dims per k-step: its
//   a[0] / b0 are the first two, a[2] / b1 the other two. The same permutation on both sides
//   leaves the dot products unchanged.
// - p.v: the n index of an 8-dim block is a permutation too: column n of n-block j is dim
//   n * D/8 + j. Thread (g, t) loads dims [g * D/8, (g + 1) * D/8) of keys 2t, 2t + 1, 2t + 8 and
//   2t + 9 (its b0 / b1 rows) and pairs them per n-block with byte permutes. Its accumulators
//   c[0] / c[1] of n-block j are then dims t * D/4 + j and t * D/4 + D/8 + j of head g.
// - p goes from the q.k accumulators to the p.v A fragment in registers (the flash-attention
//   identity: the C fragment of two n8 blocks is the A fragment of one k16 step).
// fp8: e4m3 converts to f16 exactly (cvt.rn.f16x2.e4m3x2, two elements an instruction), so the
// mma runs in f16. q goes to f16 with a power-of-two scale per head (its largest element just
// under 2^15: no overflow, no subnormals), undone in the score scale. A key's k scale multiplies
// its finished score. Its v scale multiplies p relative to the largest v scale the warp has seen,
// so p * scale stays in (0, 1] for f16; when that largest scale grows, the accumulators are
// rescaled with the softmax correction, in the same multiply.
#include <cfloat>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/decode_finish.cuh"
#include "backend/cuda/decode_policy.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/fp8_kv.cuh"
#include "backend/cuda/mma_sync.cuh"
#include "backend/cuda/pdl_launch.h"

namespace minivllm::cuda {
namespace {

constexpr int kMmaWarps = 4;
constexpr int kMmaThreads = kMmaWarps * 32;
constexpr int kTileKeys = 16;  // a warp's keys per tile: two n8 blocks of q.k, one k16 step of p.v
constexpr float kLog2e = 1.4426950408889634f;

// Warp tiles loaded before any is used: about 8 KB of k and v in flight per warp.
constexpr int mma_tiles(int head_dim, bool fp8) {
  const int tile_bytes = kTileKeys * 2 * head_dim * (fp8 ? 1 : 2);
  const int tiles = 8192 / tile_bytes;
  return tiles < 1 ? 1 : tiles > 4 ? 4 : tiles;
}

// n 32-bit words from p (16-byte aligned when n is a multiple of 4, else 8-byte aligned).
template <int kWords>
__device__ __forceinline__ void load_words(const void* p, uint32_t (&w)[kWords]) {
  if constexpr (kWords % 4 == 0) {
#pragma unroll
    for (int i = 0; i < kWords / 4; ++i) {
      const uint4 u = __ldg(static_cast<const uint4*>(p) + i);
      w[4 * i] = u.x, w[4 * i + 1] = u.y, w[4 * i + 2] = u.z, w[4 * i + 3] = u.w;
    }
  } else {
    static_assert(kWords % 2 == 0, "8-byte runs at least");
#pragma unroll
    for (int i = 0; i < kWords / 2; ++i) {
      const uint2 u = __ldg(static_cast<const uint2*>(p) + i);
      w[2 * i] = u.x, w[2 * i + 1] = u.y;
    }
  }
}

template <int kWords>
__device__ __forceinline__ void zero_words(uint32_t (&w)[kWords]) {
#pragma unroll
  for (int i = 0; i < kWords; ++i) w[i] = 0u;
}

// Two e4m3 bytes (the lower one first) to f16x2, exactly.
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t pair) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair & 0xFFFFu), __NV_E4M3);
  return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
}

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

__device__ __forceinline__ uint32_t pack_f16x2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

template <int kHeadDim, int kGroup, bool kFp8>
__global__ __launch_bounds__(kMmaThreads, 2) void decode_mma_kernel(AttentionArgs a, int partition, int num_splits,
                                                                   DecodeScratch scratch) {
  constexpr int D = kHeadDim;
  constexpr int kKSteps = D / 16;          // q.k k-steps
  constexpr int kNBlocks = D / 8;          // p.v n-blocks
  constexpr int kKElems = D / 4;           // a thread's dims of a key for q.k
  constexpr int kVElems = D / 8;           // and for p.v
  constexpr int kEsz = kFp8 ? 1 : 2;
  constexpr int kKWords = kKElems * kEsz / 4;
  constexpr int kVWords = kVElems * kEsz / 4;
  constexpr int kTiles = mma_tiles(D, kFp8);
  constexpr int kStep = kMmaWarps * kTileKeys * kTiles;  // keys per CTA iteration
  static_assert(kGroup <= 8, "q heads are the rows g < 8 of the mma");
  using T = std::conditional_t<kFp8, uint8_t, __nv_bfloat16>;
  pdl_launch_dependents();  // the o projection may start streaming its weights now

  const int split = blockIdx.x;
  const int kvh = blockIdx.y;
  const int seq = blockIdx.z;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int32_t* table = a.block_tables + static_cast<int64_t>(seq) * a.table_cols;
  const int start = split * partition;
  const int ctx = a.context_lens[seq];
  const int bs_log2 = a.block_size_log2;
  const int bs_mask = (1 << bs_log2) - 1;
  const T* kc = static_cast<const T*>(a.k_cache);
  const T* vc = static_cast<const T*>(a.v_cache);
  // Cache row of the first key of the tile at key0 (a tile is 16-aligned and blocks hold >= 16
  // keys, so all of a tile's keys share one block).
  auto tile_row = [&](int key0) {
    const int64_t block = table[key0 >> bs_log2];
    return ((block * a.num_kv_heads + kvh) << bs_log2) + (key0 & bs_mask);
  };
  // Prefetch this warp's first tiles into L2 while the rope kernel runs: the block table is a step
  // input, older keys are not rewritten, and the newest key's write lands in L2.
#pragma unroll
  for (int u = 0; u < kTiles; ++u) {
    const int key0 = start + (u * kMmaWarps + warp) * kTileKeys;
    if (key0 < ctx && key0 < start + partition) {
      const int64_t row0 = tile_row(key0);
      asm volatile("prefetch.global.L2 [%0];" ::"l"(kc + (row0 + (lane & 15)) * D + (lane >> 4) * (D / 2)));
      asm volatile("prefetch.global.L2 [%0];" ::"l"(vc + (row0 + (lane & 15)) * D + (lane >> 4) * (D / 2)));
    }
  }
  if (start >= ctx) {  // past this sequence: the merge counts only the splits that hold keys
    if (ctx <= 0 && split == 0) {  // no keys at all (a padded row): zeros, never garbage
      pdl_wait();  // an earlier kernel may still read out
      __nv_bfloat16* out = static_cast<__nv_bfloat16*>(a.out) + static_cast<int64_t>(seq) * a.num_q_heads * D +
                           static_cast<int64_t>(kvh) * kGroup * D;
      for (int i = threadIdx.x; i < kGroup * D; i += kMmaThreads) out[i] = __float2bfloat16(0.0f);
    }
    return;
  }
  const int end = min(ctx, start + partition);
  pdl_wait();

  // q head g's A fragments (rows g + 8 are zero: a[1] = a[3] = 0), and the factor that takes its
  // raw scores to the log2 domain.
  const bool real_head = g < kGroup;
  uint32_t qa[kKSteps][4];
  float qmul = a.scale * kLog2e;
  {
    const int64_t qkv_stride = static_cast<int64_t>(a.num_q_heads + 2 * a.num_kv_heads) * D;
    const __nv_bfloat16* qp = static_cast<const __nv_bfloat16*>(a.qkv) + seq * qkv_stride +
                              static_cast<int64_t>(kvh * kGroup + (real_head ? g : 0)) * D + t * kKElems;
    uint32_t qw[kKElems / 2];  // bf16 pairs
    load_words(qp, qw);
    if (!real_head) zero_words(qw);
    if constexpr (!kFp8) {
#pragma unroll
      for (int s = 0; s < kKSteps; ++s) {
        qa[s][0] = qw[2 * s];
        qa[s][2] = qw[2 * s + 1];
      }
    } else {
      float qf[kKElems];
      float amax = 0.0f;
#pragma unroll
      for (int i = 0; i < kKElems / 2; ++i) {
        const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&qw[i]));
        qf[2 * i] = f.x, qf[2 * i + 1] = f.y;
        amax = fmaxf(amax, fmaxf(fabsf(f.x), fabsf(f.y)));
      }
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
      int e = 0;
      if (amax > 0.0f) frexpf(amax, &e);  // amax < 2^e
      const float up = exp2f(static_cast<float>(15 - e));
      qmul *= exp2f(static_cast<float>(e - 15));
#pragma unroll
      for (int s = 0; s < kKSteps; ++s) {
        qa[s][0] = pack_f16x2(qf[4 * s] * up, qf[4 * s + 1] * up);
        qa[s][2] = pack_f16x2(qf[4 * s + 2] * up, qf[4 * s + 3] * up);
      }
    }
#pragma unroll
    for (int s = 0; s < kKSteps; ++s) qa[s][1] = qa[s][3] = 0u;
  }

  float o[kNBlocks][4];
#pragma unroll
  for (int j = 0; j < kNBlocks; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  float vref = 0.0f;  // fp8: the largest v scale this warp has seen
  // The tile's keys this thread scores (and whose p it holds): 2t, 2t + 1, 2t + 8, 2t + 9; they
  // are also the keys of its p.v B fragments.
  const int col[4] = {2 * t, 2 * t + 1, 2 * t + 8, 2 * t + 9};

  for (int base = start; base < end; base += kStep) {
    uint32_t kw[kTiles][2][kKWords];  // keys g and g + 8
    uint32_t vw[kTiles][4][kVWords];  // keys col[0..3]
    float ks[kTiles][4], vs[kTiles][4];
#pragma unroll
    for (int u = 0; u < kTiles; ++u) {
      const int key0 = base + (u * kMmaWarps + warp) * kTileKeys;
      if (key0 < end) {
        const int64_t row0 = tile_row(key0);
#pragma unroll
        for (int n = 0; n < 2; ++n) {
          if (key0 + g + 8 * n < end) {
            load_words(kc + (row0 + g + 8 * n) * D + t * kKElems, kw[u][n]);
          } else {
            zero_words(kw[u][n]);
          }
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const bool valid = key0 + col[i] < end;
          if (valid) {
            load_words(vc + (row0 + col[i]) * D + g * kVElems, vw[u][i]);
          } else {
            zero_words(vw[u][i]);  // a row past the context may hold anything, NaN included
          }
          if constexpr (kFp8) {
            ks[u][i] = valid ? __ldg(a.k_scale + row0 + col[i]) : 0.0f;
            vs[u][i] = valid ? __ldg(a.v_scale + row0 + col[i]) : 0.0f;
          }
        }
      } else {
#pragma unroll
        for (int n = 0; n < 2; ++n) zero_words(kw[u][n]);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          zero_words(vw[u][i]);
          if constexpr (kFp8) ks[u][i] = vs[u][i] = 0.0f;
        }
      }
    }
    // Scores of q head g against keys col[0..3] of each tile, log2 domain; -inf past the context.
    float sc[kTiles][4];
    float mx = -INFINITY;
#pragma unroll
    for (int u = 0; u < kTiles; ++u) {
      float c[2][4] = {};
#pragma unroll
      for (int n = 0; n < 2; ++n) {
#pragma unroll
        for (int s = 0; s < kKSteps; ++s) {
          if constexpr (kFp8) {
            mma_f16(c[n], qa[s], e4m3x2_to_f16x2(kw[u][n][s]), e4m3x2_to_f16x2(kw[u][n][s] >> 16));
          } else {
            mma_bf16(c[n], qa[s], kw[u][n][2 * s], kw[u][n][2 * s + 1]);
          }
        }
      }
      const int key0 = base + (u * kMmaWarps + warp) * kTileKeys;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float s = c[i >> 1][i & 1] * qmul;
        if constexpr (kFp8) s *= ks[u][i];
        sc[u][i] = key0 + col[i] < end ? s : -INFINITY;
        mx = fmaxf(mx, sc[u][i]);
      }
    }
    // The lanes of a quad hold one row (q head) between them.
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(m, mx);
    if (m_new == -INFINITY) continue;  // no key of this warp yet (uniform: every row sees the same keys)
    const float corr = exp2f(m - m_new);
    m = m_new;
    float ocorr = corr;  // the accumulators' correction (fp8: also the change of v units)
    float vmul = 1.0f;   // fp8: a key's p.v weight is p * vs * vmul
    if constexpr (kFp8) {
      float vm = vref;
#pragma unroll
      for (int u = 0; u < kTiles; ++u) {
#pragma unroll
        for (int i = 0; i < 4; ++i) vm = fmaxf(vm, vs[u][i]);
      }
      vm = fmaxf(vm, __shfl_xor_sync(0xffffffffu, vm, 1));  // the quad covers the tile's 16 keys
      vm = fmaxf(vm, __shfl_xor_sync(0xffffffffu, vm, 2));
      ocorr *= vm > 0.0f ? vref / vm : 1.0f;
      vmul = vm > 0.0f ? 1.0f / vm : 0.0f;  // all-zero v rows so far: their p.v terms are 0
      vref = vm;
    }
    l *= corr;
#pragma unroll
    for (int j = 0; j < kNBlocks; ++j) {
      o[j][0] *= ocorr;
      o[j][1] *= ocorr;
    }
#pragma unroll
    for (int u = 0; u < kTiles; ++u) {
      float p[4], pv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        p[i] = exp2f(sc[u][i] - m);  // 0 past the context
        l += p[i];
        pv[i] = kFp8 ? p[i] * (vs[u][i] * vmul) : p[i];
      }
      uint32_t pa[4];
      pa[0] = kFp8 ? pack_f16x2(pv[0], pv[1]) : pack_bf16x2(pv[0], pv[1]);
      pa[2] = kFp8 ? pack_f16x2(pv[2], pv[3]) : pack_bf16x2(pv[2], pv[3]);
      pa[1] = pa[3] = 0u;
#pragma unroll
      for (int j = 0; j < kNBlocks; ++j) {
        if constexpr (kFp8) {
          if (j % 2 == 1) continue;  // pairs of n-blocks share a permute
          // bytes j % 4 and j % 4 + 1 of the keys' words: (key a, key b) pairs for blocks j, j + 1
          const uint32_t sel = (j % 4 == 0) ? 0x5140u : 0x7362u;
          const uint32_t lo = prmt(vw[u][0][j / 4], vw[u][1][j / 4], sel);
          const uint32_t hi = prmt(vw[u][2][j / 4], vw[u][3][j / 4], sel);
          mma_f16(o[j], pa, e4m3x2_to_f16x2(lo), e4m3x2_to_f16x2(hi));
          mma_f16(o[j + 1], pa, e4m3x2_to_f16x2(lo >> 16), e4m3x2_to_f16x2(hi >> 16));
        } else {
          const uint32_t sel = (j % 2 == 0) ? 0x5410u : 0x7632u;  // the keys' low or high halves
          mma_bf16(o[j], pa, prmt(vw[u][0][j / 2], vw[u][1][j / 2], sel), prmt(vw[u][2][j / 2], vw[u][3][j / 2], sel));
        }
      }
    }
  }

  // The quad's partial sums of l; then each warp's state into one shared-memory row.
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);
  __shared__ float sm_m[kMmaWarps][kGroup];
  __shared__ float sm_l[kMmaWarps][kGroup];
  __shared__ float sm_acc[kMmaWarps][kGroup][D];
  if (real_head) {
    const float back = kFp8 ? vref : 1.0f;  // fp8: the accumulators were in units of vref
#pragma unroll
    for (int j = 0; j < kNBlocks; ++j) {
      sm_acc[warp][g][t * kKElems + j] = o[j][0] * back;
      sm_acc[warp][g][t * kKElems + kVElems + j] = o[j][1] * back;
    }
    if (t == 0) {
      sm_m[warp][g] = m;
      sm_l[warp][g] = l;
    }
  }
  decode_finish_cta<D, kGroup, kMmaWarps, kMmaThreads>(a, scratch, sm_m, sm_l, sm_acc, seq, kvh * kGroup, kGroup,
                                                        split, num_splits, partition, ctx,
                                                        static_cast<int64_t>(seq) * a.num_kv_heads + kvh);
}

template <int kHeadDim, bool kFp8>
void launch_mma(const AttentionArgs& a, int group, int num_splits, int partition, const DecodeScratch& sc,
                cudaStream_t st) {
  const dim3 grid(num_splits, a.num_kv_heads, a.num_seqs);
  switch (group) {
    case 1:
      return launch_with_pdl(decode_mma_kernel<kHeadDim, 1, kFp8>, grid, dim3(kMmaThreads), 0, st, a, partition,
                             num_splits, sc);
    case 2:
      return launch_with_pdl(decode_mma_kernel<kHeadDim, 2, kFp8>, grid, dim3(kMmaThreads), 0, st, a, partition,
                             num_splits, sc);
    case 4:
      return launch_with_pdl(decode_mma_kernel<kHeadDim, 4, kFp8>, grid, dim3(kMmaThreads), 0, st, a, partition,
                             num_splits, sc);
    default:
      return launch_with_pdl(decode_mma_kernel<kHeadDim, 8, kFp8>, grid, dim3(kMmaThreads), 0, st, a, partition,
                             num_splits, sc);
  }
}

}  // namespace

bool decode_mma_fits(int head_dim, int group, int block_size) {
  return (head_dim == 64 || head_dim == 128) && (group == 1 || group == 2 || group == 4 || group == 8) &&
         block_size >= kTileKeys;
}

void launch_decode_attention_mma(const AttentionArgs& a, int num_splits, int partition, const DecodeScratch& scratch,
                                 cudaStream_t stream) {
  if (a.num_seqs == 0) return;
  const int group = a.num_q_heads / a.num_kv_heads;
  MINIVLLM_CHECK(decode_mma_fits(a.head_dim, group, 1 << a.block_size_log2) && partition % kTileKeys == 0)
      << "decode attention (tensor cores): no kernel for head_dim " << a.head_dim << ", group " << group
      << ", block size " << (1 << a.block_size_log2) << ", partition " << partition;
  if (a.kv_fp8) {
    if (a.head_dim == 64) return launch_mma<64, true>(a, group, num_splits, partition, scratch, stream);
    return launch_mma<128, true>(a, group, num_splits, partition, scratch, stream);
  }
  if (a.head_dim == 64) return launch_mma<64, false>(a, group, num_splits, partition, scratch, stream);
  launch_mma<128, false>(a, group, num_splits, partition, scratch, stream);
}

}  // namespace minivllm::cuda
