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
// (decode_finish.cuh) are the CUDA-core kernels'. Two kernels share the math (mma_consume) and
// differ in how fragments arrive (decode_policy.h: decode_mma_ring): bf16 caches load them straight
// from global memory into registers; fp8 ones stream each warp's tiles through a cp.async ring in
// shared memory. The layouts are chosen so that each thread reads contiguous runs of a key row and
// a warp whole rows (mma_sync.cuh has the fragment layouts; g = lane / 4, t = lane % 4):
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
#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/decode_finish.cuh"
#include "backend/cuda/decode_policy.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/fp8_kv.cuh"
#include "backend/cuda/mma_sync.cuh"
#include "backend/cuda/pdl_launch.h"
#include "backend/cuda/tma_map.h"

namespace minivllm::cuda {
namespace {

constexpr int kMmaWarps = 4;
constexpr int kMmaThreads = kMmaWarps * 32;
constexpr int kTileKeys = 16;  // a warp's keys per tile: two n8 blocks of q.k, one k16 step of p.v
constexpr float kLog2e = 1.4426950408889634f;

// How many tiles of tile_bytes fit a byte budget, within [lo, hi].
constexpr int tiles_in(int budget, int tile_bytes, int lo, int hi) {
  const int n = budget / tile_bytes;
  return n < lo ? lo : n > hi ? hi : n;
}

// Warp tiles loaded before any is used: about 8 KB of k and v in flight per warp; 16 KB (two tiles)
// for bf16 at head_dim 128, groups 2 to 8. A warp holding one 8 KB tile had nothing in flight while
// it computed; two take 254 registers with no spill, still two CTAs an SM (group 1 would spill).
// On the Qwen3-0.6B workload two tiles beat one (MINIVLLM_DECODE_MMA_TILES=1) and one pipelined (two
// register sets, MINIVLLM_DECODE_MMA_PIPE=1). No setting helps head_dim 64 (Llama) (measured:
// PERFORMANCE.md, "Two tiles a warp in the bf16 tensor-core decode kernel").
constexpr int mma_tiles(int head_dim, bool fp8, int group) {
  const int budget = !fp8 && head_dim == 128 && group >= 2 ? 16384 : 8192;
  return tiles_in(budget, kTileKeys * 2 * head_dim * (fp8 ? 1 : 2), 1, 4);
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

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

__device__ __forceinline__ uint32_t pack_f16x2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// The sizes of one (head_dim, cache type) instantiation, per thread and per key.
template <int kHeadDim, bool kFp8>
struct MmaShape {
  static constexpr int D = kHeadDim;
  static constexpr int kKSteps = D / 16;  // q.k k-steps
  static constexpr int kNBlocks = D / 8;  // p.v n-blocks
  static constexpr int kKElems = D / 4;   // a thread's dims of a key for q.k
  static constexpr int kVElems = D / 8;   // and for p.v
  static constexpr int kEsz = kFp8 ? 1 : 2;
  static constexpr int kKWords = kKElems * kEsz / 4;
  static constexpr int kVWords = kVElems * kEsz / 4;
  static constexpr int kRowBytes = D * kEsz;
  using T = std::conditional_t<kFp8, uint8_t, __nv_bfloat16>;
};

// A warp's running softmax for q head g (the rows of its quad): the p.v accumulators (o[j][0] and
// o[j][1] are dims t * D/4 + j and t * D/4 + D/8 + j; o[j][2..3] the padding rows), the max score m,
// the thread's partial sum l, and (fp8) the largest v scale seen, the accumulators' unit.
template <int kNBlocks>
struct MmaState {
  float o[kNBlocks][4] = {};
  float m = -INFINITY, l = 0.0f, vref = 0.0f;
};

// The context of one CTA: its sequence, kv head and split, and the keys [start, end) it reads; a
// sliding window's first key (0: none) and the block-aligned origin of the splits
// (decode_finish.cuh: decode_key_origin). Keys in [start, first) are read but masked.
struct MmaCta {
  int split, kvh, seq, lane, warp, g, t, start, ctx, end, first, origin;
  const int32_t* table;
  // The CTA's sequence and block table, and this thread's place in the mma fragments.
  __device__ void place(const AttentionArgs& a) {
    seq = decode_cta_seq(a);
    lane = threadIdx.x & 31;
    warp = threadIdx.x >> 5;
    g = lane >> 2;
    t = lane & 3;
    table = a.block_tables + static_cast<int64_t>(seq) * a.table_cols;
  }
  // Cache row of the first key of the tile at key0 (a tile is 16-aligned and blocks hold >= 16
  // keys, so all of a tile's keys share one block).
  __device__ int64_t tile_row(const AttentionArgs& a, int key0) const {
    const int64_t block = table[key0 >> a.block_size_log2];
    return ((block * a.num_kv_heads + kvh) << a.block_size_log2) + (key0 & ((1 << a.block_size_log2) - 1));
  }
};

// Before the wait: prefetch the warp's first tiles into L2 (the block table is a step input, older
// keys are not rewritten, and the newest key's write lands in L2). A CTA past its sequence returns
// false (a padded row's first split writes zeros). Then griddepcontrol.wait.
// partition: the plan's keys a split; with a.held_splits it grows to cover this sequence's keys in
// at most that many splits (every CTA of the sequence computes the same length from the same
// context, and the merge counts the splits by it: decode_finish.cuh); a sequence of at most
// a.one_split_keys keys is held by one. The grid launches min(plan's splits, held splits) CTAs along
// the splits (grid_splits), which is every split that can hold keys.
template <int kHeadDim, int kGroup, bool kFp8, int kFirstTiles>
__device__ __forceinline__ bool mma_prologue(const AttentionArgs& a, int& partition, MmaCta& c) {
  using S = MmaShape<kHeadDim, kFp8>;
  c.split = blockIdx.x;
  c.kvh = blockIdx.y;
  c.place(a);
  c.ctx = a.context_lens[c.seq];
  c.first = decode_first_key(a, c.ctx);
  c.origin = decode_key_origin(a, c.first);
  const int keys = c.ctx - c.origin;
  const int held = a.one_split_keys > 0 && keys <= a.one_split_keys ? 1 : a.held_splits;
  if (held > 0) {
    const int per_split = (keys + held - 1) / held;
    partition = max(partition, (per_split + kDecodeMmaGranule - 1) / kDecodeMmaGranule * kDecodeMmaGranule);
  }
  c.start = c.origin + c.split * partition;
  const typename S::T* kc = static_cast<const typename S::T*>(a.k_cache);
  const typename S::T* vc = static_cast<const typename S::T*>(a.v_cache);
  // A warp's tile: 16 rows of 2 x 128 bytes (the lanes' halves) of K and of V.
  const auto prefetch_tile = [&](int key0) {
    const int64_t row0 = c.tile_row(a, key0);
    const int64_t e = (row0 + (c.lane & 15)) * kHeadDim + (c.lane >> 4) * (kHeadDim / 2);
    asm volatile("prefetch.global.L2 [%0];" ::"l"(kc + e));
    asm volatile("prefetch.global.L2 [%0];" ::"l"(vc + e));
  };
  const int end = min(c.ctx, c.start + partition);
  if (a.prefetch_split) {  // one sequence: its whole split (the CTAs are few, L2 holds them)
    const int last = min(end, c.start + kDecodePrefetchMaxKeys);
    for (int key0 = c.start + c.warp * kTileKeys; key0 < last; key0 += kMmaWarps * kTileKeys) prefetch_tile(key0);
  } else {
#pragma unroll
    for (int u = 0; u < kFirstTiles; ++u) {
      const int key0 = c.start + (u * kMmaWarps + c.warp) * kTileKeys;
      if (key0 < end) prefetch_tile(key0);
    }
  }
  if (c.start >= c.ctx) {  // past this sequence: the merge counts only the splits that hold keys
    if (c.ctx <= 0 && c.split == 0) {  // no keys at all (a padded row): zeros, never garbage
      pdl_wait();  // an earlier kernel may still read out
      __nv_bfloat16* out = static_cast<__nv_bfloat16*>(a.out) +
                           static_cast<int64_t>(c.seq) * a.num_q_heads * kHeadDim +
                           static_cast<int64_t>(c.kvh) * kGroup * kHeadDim;
      for (int i = threadIdx.x; i < kGroup * kHeadDim; i += kMmaThreads) out[i] = __float2bfloat16(0.0f);
    }
    return false;
  }
  c.end = min(c.ctx, c.start + partition);
  pdl_wait();
  return true;
}

// q head g's A fragments (rows g + 8 are zero: a[1] = a[3] = 0); returns the factor that takes its
// raw scores to the log2 domain.
template <int kHeadDim, int kGroup, bool kFp8>
__device__ __forceinline__ float load_q_fragments(const AttentionArgs& a, const MmaCta& c,
                                                  uint32_t (&qa)[kHeadDim / 16][4]) {
  using S = MmaShape<kHeadDim, kFp8>;
  const bool real_head = c.g < kGroup;
  float qmul = a.scale * kLog2e;
  const int64_t qkv_stride = static_cast<int64_t>(a.num_q_heads + 2 * a.num_kv_heads) * kHeadDim;
  const __nv_bfloat16* qp = static_cast<const __nv_bfloat16*>(a.qkv) + c.seq * qkv_stride +
                            static_cast<int64_t>(c.kvh * kGroup + (real_head ? c.g : 0)) * kHeadDim + c.t * S::kKElems;
  uint32_t qw[S::kKElems / 2];  // bf16 pairs
  load_words(qp, qw);
  if (!real_head) zero_words(qw);
  if constexpr (!kFp8) {
#pragma unroll
    for (int s = 0; s < S::kKSteps; ++s) {
      qa[s][0] = qw[2 * s];
      qa[s][2] = qw[2 * s + 1];
    }
  } else {
    float qf[S::kKElems];
    float amax = 0.0f;
#pragma unroll
    for (int i = 0; i < S::kKElems / 2; ++i) {
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
    for (int s = 0; s < S::kKSteps; ++s) {
      qa[s][0] = pack_f16x2(qf[4 * s] * up, qf[4 * s + 1] * up);
      qa[s][2] = pack_f16x2(qf[4 * s + 2] * up, qf[4 * s + 3] * up);
    }
  }
#pragma unroll
  for (int s = 0; s < S::kKSteps; ++s) qa[s][1] = qa[s][3] = 0u;
  return qmul;
}

// One step of a warp over kTiles tiles of 16 keys, whose first keys are key0[u]: kw holds keys g and
// g + 8 of each (its q.k B fragments), vw keys 2t, 2t + 1, 2t + 8, 2t + 9 (the p.v ones), ks / vs
// (fp8) the scales of those four keys, the ones whose scores this thread holds. Keys at or past
// `end` must come as zeros (a row past the context may hold anything, NaN included); keys before
// `begin` (a sliding window's, in its first block: finite) are masked.
template <int kHeadDim, bool kFp8, int kTiles>
__device__ __forceinline__ void mma_consume(MmaState<kHeadDim / 8>& st, const uint32_t (&qa)[kHeadDim / 16][4],
                                            float qmul,
                                            const uint32_t (&kw)[kTiles][2][MmaShape<kHeadDim, kFp8>::kKWords],
                                            const uint32_t (&vw)[kTiles][4][MmaShape<kHeadDim, kFp8>::kVWords],
                                            const float (&ks)[kTiles][4], const float (&vs)[kTiles][4],
                                            const int (&key0)[kTiles], int begin, int end, int t) {
  using S = MmaShape<kHeadDim, kFp8>;
  const int col[4] = {2 * t, 2 * t + 1, 2 * t + 8, 2 * t + 9};
  // Scores of q head g against keys col[0..3] of each tile, log2 domain; -inf past the context.
  float sc[kTiles][4];
  float mx = -INFINITY;
#pragma unroll
  for (int u = 0; u < kTiles; ++u) {
    float c[2][4] = {};
#pragma unroll
    for (int n = 0; n < 2; ++n) {
#pragma unroll
      for (int s = 0; s < S::kKSteps; ++s) {
        if constexpr (kFp8) {
          mma_f16(c[n], qa[s], e4m3x2_to_f16x2(kw[u][n][s]), e4m3x2_to_f16x2(kw[u][n][s] >> 16));
        } else {
          mma_bf16(c[n], qa[s], kw[u][n][2 * s], kw[u][n][2 * s + 1]);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float s = c[i >> 1][i & 1] * qmul;
      if constexpr (kFp8) s *= ks[u][i];
      const int key = key0[u] + col[i];
      sc[u][i] = key < end && key >= begin ? s : -INFINITY;
      mx = fmaxf(mx, sc[u][i]);
    }
  }
  // The lanes of a quad hold one row (q head) between them.
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
  const float m_new = fmaxf(st.m, mx);
  if (m_new == -INFINITY) return;  // no key of this warp yet (uniform: every row sees the same keys)
  const float corr = exp2f(st.m - m_new);
  st.m = m_new;
  float ocorr = corr;  // the accumulators' correction (fp8: also the change of v units)
  float vmul = 1.0f;   // fp8: a key's p.v weight is p * vs * vmul
  if constexpr (kFp8) {
    float vm = st.vref;
#pragma unroll
    for (int u = 0; u < kTiles; ++u) {
#pragma unroll
      for (int i = 0; i < 4; ++i) vm = fmaxf(vm, vs[u][i]);
    }
    vm = fmaxf(vm, __shfl_xor_sync(0xffffffffu, vm, 1));  // the quad covers the tile's 16 keys
    vm = fmaxf(vm, __shfl_xor_sync(0xffffffffu, vm, 2));
    ocorr *= vm > 0.0f ? st.vref / vm : 1.0f;
    vmul = vm > 0.0f ? 1.0f / vm : 0.0f;  // all-zero v rows so far: their p.v terms are 0
    st.vref = vm;
  }
  st.l *= corr;
#pragma unroll
  for (int j = 0; j < S::kNBlocks; ++j) {
    st.o[j][0] *= ocorr;
    st.o[j][1] *= ocorr;
  }
#pragma unroll
  for (int u = 0; u < kTiles; ++u) {
    float p[4], pv[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      p[i] = exp2f(sc[u][i] - st.m);  // 0 past the context
      st.l += p[i];
      pv[i] = kFp8 ? p[i] * (vs[u][i] * vmul) : p[i];
    }
    uint32_t pa[4];
    pa[0] = kFp8 ? pack_f16x2(pv[0], pv[1]) : pack_bf16x2(pv[0], pv[1]);
    pa[2] = kFp8 ? pack_f16x2(pv[2], pv[3]) : pack_bf16x2(pv[2], pv[3]);
    pa[1] = pa[3] = 0u;
#pragma unroll
    for (int j = 0; j < S::kNBlocks; ++j) {
      if constexpr (kFp8) {
        if (j % 2 == 1) continue;  // pairs of n-blocks share a permute
        // bytes j % 4 and j % 4 + 1 of the keys' words: (key a, key b) pairs for blocks j, j + 1
        const uint32_t sel = (j % 4 == 0) ? 0x5140u : 0x7362u;
        const uint32_t lo = prmt(vw[u][0][j / 4], vw[u][1][j / 4], sel);
        const uint32_t hi = prmt(vw[u][2][j / 4], vw[u][3][j / 4], sel);
        mma_f16(st.o[j], pa, e4m3x2_to_f16x2(lo), e4m3x2_to_f16x2(hi));
        mma_f16(st.o[j + 1], pa, e4m3x2_to_f16x2(lo >> 16), e4m3x2_to_f16x2(hi >> 16));
      } else {
        const uint32_t sel = (j % 2 == 0) ? 0x5410u : 0x7632u;  // the keys' low or high halves
        mma_bf16(st.o[j], pa, prmt(vw[u][0][j / 2], vw[u][1][j / 2], sel),
                 prmt(vw[u][2][j / 2], vw[u][3][j / 2], sel));
      }
    }
  }
}

// The warps' states into shared memory, then the CTA's end (decode_finish.cuh) for the q heads
// head0 .. head0 + heads - 1 (heads <= kGroup: the mma rows g < heads).
template <int kHeadDim, int kGroup, bool kFp8, int kWarps>
__device__ __forceinline__ void mma_finish_heads(MmaState<kHeadDim / 8>& st, const AttentionArgs& a, const MmaCta& c,
                                                 int head0, int heads, int partition, int num_splits,
                                                 const DecodeScratch& scratch, int64_t counter_index) {
  using S = MmaShape<kHeadDim, kFp8>;
  // The quad's partial sums of l.
  st.l += __shfl_xor_sync(0xffffffffu, st.l, 1);
  st.l += __shfl_xor_sync(0xffffffffu, st.l, 2);
  __shared__ float sm_m[kWarps][kGroup];
  __shared__ float sm_l[kWarps][kGroup];
  __shared__ float sm_acc[kWarps][kGroup][kHeadDim];
  if (c.g < heads) {
    const float back = kFp8 ? st.vref : 1.0f;  // fp8: the accumulators were in units of vref
#pragma unroll
    for (int j = 0; j < S::kNBlocks; ++j) {
      sm_acc[c.warp][c.g][c.t * S::kKElems + j] = st.o[j][0] * back;
      sm_acc[c.warp][c.g][c.t * S::kKElems + S::kVElems + j] = st.o[j][1] * back;
    }
    if (c.t == 0) {
      sm_m[c.warp][c.g] = st.m;
      sm_l[c.warp][c.g] = st.l;
    }
  }
  decode_finish_cta<kHeadDim, kGroup, kWarps, kWarps * 32>(a, scratch, sm_m, sm_l, sm_acc, c.seq, head0, heads,
                                                              c.split, num_splits, partition, c.ctx - c.origin,
                                                              counter_index);
}

// The same for a CTA of a whole group (the kv head's q heads).
template <int kHeadDim, int kGroup, bool kFp8, int kWarps = kMmaWarps>
__device__ __forceinline__ void mma_finish(MmaState<kHeadDim / 8>& st, const AttentionArgs& a, const MmaCta& c,
                                           int partition, int num_splits, const DecodeScratch& scratch) {
  mma_finish_heads<kHeadDim, kGroup, kFp8, kWarps>(st, a, c, c.kvh * kGroup, kGroup, partition, num_splits, scratch,
                                                   static_cast<int64_t>(c.seq) * a.num_kv_heads + c.kvh);
}

// A warp's kTiles tiles of the step at `base` (tile u's first key: base + (u * kMmaWarps + warp) * 16),
// loaded straight into registers in mma_consume's layout; keys at or past c.end as zeros.
template <int kHeadDim, bool kFp8, int kTiles>
struct MmaTiles {
  using S = MmaShape<kHeadDim, kFp8>;
  uint32_t kw[kTiles][2][S::kKWords];  // keys g and g + 8
  uint32_t vw[kTiles][4][S::kVWords];  // keys 2t, 2t + 1, 2t + 8, 2t + 9
  float ks[kTiles][4], vs[kTiles][4];  // fp8: their scales
  int key0[kTiles];

  __device__ __forceinline__ void load(const AttentionArgs& a, const MmaCta& c, int base) {
    const typename S::T* kc = static_cast<const typename S::T*>(a.k_cache);
    const typename S::T* vc = static_cast<const typename S::T*>(a.v_cache);
    const int col[4] = {2 * c.t, 2 * c.t + 1, 2 * c.t + 8, 2 * c.t + 9};
#pragma unroll
    for (int u = 0; u < kTiles; ++u) {
      key0[u] = base + (u * kMmaWarps + c.warp) * kTileKeys;
      if (key0[u] < c.end) {
        const int64_t row0 = c.tile_row(a, key0[u]);
#pragma unroll
        for (int n = 0; n < 2; ++n) {
          if (key0[u] + c.g + 8 * n < c.end) {
            load_words(kc + (row0 + c.g + 8 * n) * kHeadDim + c.t * S::kKElems, kw[u][n]);
          } else {
            zero_words(kw[u][n]);
          }
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const bool valid = key0[u] + col[i] < c.end;
          if (valid) {
            load_words(vc + (row0 + col[i]) * kHeadDim + c.g * S::kVElems, vw[u][i]);
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
  }
};

// Fragments loaded straight into registers, kTiles tiles per warp and step. Without kPipe a step's
// tiles are all loaded, then used, so nothing is in flight while a warp computes. With kPipe two
// register sets alternate: the next step's loads are issued before this step's math, so a warp
// always has a step in flight (the same registers as 2 x kTiles tiles loaded at once).
template <int kHeadDim, int kGroup, bool kFp8, int kTiles, bool kPipe>
__global__ __launch_bounds__(kMmaThreads, 2) void decode_mma_kernel(AttentionArgs a, int partition, int num_splits,
                                                                   DecodeScratch scratch) {
  using S = MmaShape<kHeadDim, kFp8>;
  constexpr int kStep = kMmaWarps * kTileKeys * kTiles;  // keys per CTA iteration
  static_assert(kGroup <= 8, "q heads are the rows g < 8 of the mma");
  pdl_launch_dependents();  // the o projection may start streaming its weights now
  MmaCta c;
  if (!mma_prologue<kHeadDim, kGroup, kFp8, kPipe ? 2 * kTiles : kTiles>(a, partition, c)) return;
  uint32_t qa[S::kKSteps][4];
  const float qmul = load_q_fragments<kHeadDim, kGroup, kFp8>(a, c, qa);
  MmaState<S::kNBlocks> st;
  using Tiles = MmaTiles<kHeadDim, kFp8, kTiles>;
  if constexpr (!kPipe) {
    for (int base = c.start; base < c.end; base += kStep) {
      Tiles f;
      f.load(a, c, base);
      mma_consume<kHeadDim, kFp8, kTiles>(st, qa, qmul, f.kw, f.vw, f.ks, f.vs, f.key0, c.first, c.end, c.t);
    }
  } else {
    Tiles f0, f1;
    f0.load(a, c, c.start);
    for (int base = c.start; base < c.end; base += 2 * kStep) {
      f1.load(a, c, base + kStep);  // zeros (no loads) past the end
      mma_consume<kHeadDim, kFp8, kTiles>(st, qa, qmul, f0.kw, f0.vw, f0.ks, f0.vs, f0.key0, c.first, c.end, c.t);
      if (base + kStep >= c.end) break;
      f0.load(a, c, base + 2 * kStep);
      mma_consume<kHeadDim, kFp8, kTiles>(st, qa, qmul, f1.kw, f1.vw, f1.ks, f1.vs, f1.key0, c.first, c.end, c.t);
    }
  }
  mma_finish<kHeadDim, kGroup, kFp8>(st, a, c, partition, num_splits, scratch);
}

// Fragments through shared memory: each warp streams its tiles with cp.async into a ring of
// kStages tiles of its own (no CTA barrier), kStages - 1 tiles in flight while it computes one, and
// reads its fragments from the ring. Rows are 16-byte chunks XOR-swizzled by the row so that a
// quarter warp's fragment reads fall in distinct banks.
template <int kHeadDim, bool kFp8>
struct MmaRing {
  static constexpr int kRowBytes = MmaShape<kHeadDim, kFp8>::kRowBytes;
  static constexpr int kChunks = kRowBytes / 16;
  static constexpr int kScaleBytes = kFp8 ? 2 * kTileKeys * 4 : 0;
  static constexpr int kStageBytes = 2 * kTileKeys * kRowBytes + kScaleBytes;  // k rows, v rows, scales
  static constexpr int kStages = tiles_in(16384, kStageBytes, 2, 8);
  static constexpr int kCtaBytes = kMmaWarps * kStages * kStageBytes;
  // Byte offset of chunk ch of tile row r (0..31: k rows, then v rows).
  __device__ static int offset(int r, int ch) {
    constexpr int kMask = (kChunks < 8 ? kChunks : 8) - 1;
    return r * kRowBytes + ((ch ^ (r & kMask)) << 4);
  }
};

// n words at byte `off` of ring row r (16-byte pieces, or one 8-byte piece).
template <int kHeadDim, bool kFp8, int kWords>
__device__ __forceinline__ void ring_words(const uint8_t* stage, int r, int off, uint32_t (&w)[kWords]) {
  using R = MmaRing<kHeadDim, kFp8>;
  if constexpr (kWords % 4 == 0) {
#pragma unroll
    for (int i = 0; i < kWords / 4; ++i) {
      const uint4 u = *reinterpret_cast<const uint4*>(stage + R::offset(r, off / 16 + i));
      w[4 * i] = u.x, w[4 * i + 1] = u.y, w[4 * i + 2] = u.z, w[4 * i + 3] = u.w;
    }
  } else {
    static_assert(kWords == 2, "8 or 16-byte multiples");
    const uint2 u = *reinterpret_cast<const uint2*>(stage + R::offset(r, off / 16) + off % 16);
    w[0] = u.x, w[1] = u.y;
  }
}

template <int kHeadDim, int kGroup, bool kFp8>
__global__ __launch_bounds__(kMmaThreads, 3) void decode_mma_ring_kernel(AttentionArgs a, int partition,
                                                                        int num_splits, DecodeScratch scratch) {
  using S = MmaShape<kHeadDim, kFp8>;
  using R = MmaRing<kHeadDim, kFp8>;
  static_assert(kGroup <= 8, "q heads are the rows g < 8 of the mma");
  extern __shared__ __align__(16) uint8_t ring_smem[];
  pdl_launch_dependents();  // the o projection may start streaming its weights now
  MmaCta c;
  if (!mma_prologue<kHeadDim, kGroup, kFp8, 1>(a, partition, c)) return;
  uint8_t* ring = ring_smem + c.warp * R::kStages * R::kStageBytes;
  const uint8_t* kb = static_cast<const uint8_t*>(a.k_cache);
  const uint8_t* vb = static_cast<const uint8_t*>(a.v_cache);
  const int tiles = (c.end - c.start + kTileKeys - 1) / kTileKeys;
  const int mine = tiles > c.warp ? (tiles - c.warp + kMmaWarps - 1) / kMmaWarps : 0;  // this warp's tiles
  // Tile i of this warp into ring stage i % kStages; rows past the context are zero-filled.
  auto issue = [&](int i) {
    const int key0 = c.start + (i * kMmaWarps + c.warp) * kTileKeys;
    const int64_t row0 = c.tile_row(a, key0);
    const int rows = min(kTileKeys, c.end - key0);
    uint8_t* stage = ring + (i % R::kStages) * R::kStageBytes;
#pragma unroll
    for (int idx = c.lane; idx < 2 * kTileKeys * R::kChunks; idx += 32) {
      const int r = idx / R::kChunks, ch = idx % R::kChunks;  // r: k rows 0..15, v rows 16..31
      const int key = r % kTileKeys;
      const uint8_t* src = (r < kTileKeys ? kb : vb) + (row0 + key) * R::kRowBytes + ch * 16;
      cp_async16(stage + R::offset(r, ch), src, key < rows ? 16 : 0);
    }
    if constexpr (kFp8) {
      if (c.lane < 8) {  // 4 chunks of 4 scales for k, then for v
        const int j = c.lane & 3;
        const float* src = (c.lane < 4 ? a.k_scale : a.v_scale) + row0 + 4 * j;
        const int n = min(4, max(0, rows - 4 * j));
        cp_async16(stage + 2 * kTileKeys * R::kRowBytes + c.lane * 16, src, 4 * n);
      }
    }
  };
#pragma unroll
  for (int i = 0; i < R::kStages - 1; ++i) {
    if (i < mine) issue(i);
    cp_async_commit();
  }
  uint32_t qa[S::kKSteps][4];
  const float qmul = load_q_fragments<kHeadDim, kGroup, kFp8>(a, c, qa);
  MmaState<S::kNBlocks> st;
  const int col[4] = {2 * c.t, 2 * c.t + 1, 2 * c.t + 8, 2 * c.t + 9};
  for (int i = 0; i < mine; ++i) {
    if (i + R::kStages - 1 < mine) issue(i + R::kStages - 1);  // into the stage freed last iteration
    cp_async_commit();
    cp_async_wait<R::kStages - 1>();  // tile i has landed (this lane's copies)
    __syncwarp();                      // and every lane's
    const uint8_t* stage = ring + (i % R::kStages) * R::kStageBytes;
    uint32_t kw[1][2][S::kKWords];
    uint32_t vw[1][4][S::kVWords];
    float ks[1][4], vs[1][4];
#pragma unroll
    for (int n = 0; n < 2; ++n) ring_words<kHeadDim, kFp8>(stage, c.g + 8 * n, c.t * S::kKWords * 4, kw[0][n]);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      ring_words<kHeadDim, kFp8>(stage, kTileKeys + col[k], c.g * S::kVWords * 4, vw[0][k]);
      if constexpr (kFp8) {
        const float* sc = reinterpret_cast<const float*>(stage + 2 * kTileKeys * R::kRowBytes);
        ks[0][k] = sc[col[k]];
        vs[0][k] = sc[kTileKeys + col[k]];
      }
    }
    const int key0[1] = {c.start + (i * kMmaWarps + c.warp) * kTileKeys};
    mma_consume<kHeadDim, kFp8, 1>(st, qa, qmul, kw, vw, ks, vs, key0, c.first, c.end, c.t);
    __syncwarp();  // every lane is done with the stage before it is refilled
  }
  mma_finish<kHeadDim, kGroup, kFp8>(st, a, c, partition, num_splits, scratch);
}

// The register kernel with kTiles tiles a step, pipelined or not, where it does not spill: within
// 16 KB of bf16 tiles a warp (two register sets of a head_dim-128 tile take 250 registers), 8 KB of
// fp8 ones (whose conversions take registers too: 16 KB at head_dim 128 spills 150-340 bytes).
// The CTAs along the splits. With held splits at most that many hold a sequence's keys
// (mma_prologue lengthens a split to make it so, and the merge counts only those), so only they are
// launched: at small batches the plan's splits for the table's capacity were mostly CTAs that
// returned at once. num_splits stays the partials' row stride.
unsigned grid_splits(const AttentionArgs& a, int num_splits) {
  return static_cast<unsigned>(a.held_splits > 0 ? std::min(num_splits, a.held_splits) : num_splits);
}

template <int kHeadDim, int kGroup, bool kFp8, int kTiles, bool kPipe>
bool launch_loads(const AttentionArgs& a, int num_splits, int partition, const DecodeMmaLoads& loads,
                  const DecodeScratch& sc, cudaStream_t st) {
  constexpr int kTileBytes = kTileKeys * 2 * kHeadDim * (kFp8 ? 1 : 2);
  if constexpr (kTiles * (kPipe ? 2 : 1) * kTileBytes > (kFp8 ? 8192 : 16384)) {
    return false;
  } else {
    if (loads.tiles != kTiles || loads.pipe != kPipe) return false;
    const dim3 grid(grid_splits(a, num_splits), a.num_kv_heads, a.num_seqs);
    launch_with_pdl(decode_mma_kernel<kHeadDim, kGroup, kFp8, kTiles, kPipe>, grid, dim3(kMmaThreads), 0, st, a,
                    partition, num_splits, sc);
    return true;
  }
}

template <int kHeadDim, int kGroup, bool kFp8>
void launch_group(const AttentionArgs& a, int num_splits, int partition, bool ring, const DecodeMmaLoads& loads,
                  const DecodeScratch& sc, cudaStream_t st) {
  const dim3 grid(grid_splits(a, num_splits), a.num_kv_heads, a.num_seqs);
  if (ring) {
    constexpr int kBytes = MmaRing<kHeadDim, kFp8>::kCtaBytes;
    allow_dynamic_smem<decode_mma_ring_kernel<kHeadDim, kGroup, kFp8>>(kBytes);  // past 48 KB
    launch_with_pdl(decode_mma_ring_kernel<kHeadDim, kGroup, kFp8>, grid, dim3(kMmaThreads), kBytes, st, a, partition,
                    num_splits, sc);
    return;
  }
  constexpr int kDefault = mma_tiles(kHeadDim, kFp8, kGroup);
  if constexpr (kGroup == 2 || kGroup == 4) {
    DecodeMmaLoads l = loads;
    if (l.tiles == 0) l.tiles = kDefault;
    if (l.tiles != kDefault || l.pipe) {
      const bool launched = launch_loads<kHeadDim, kGroup, kFp8, 1, false>(a, num_splits, partition, l, sc, st) ||
                            launch_loads<kHeadDim, kGroup, kFp8, 1, true>(a, num_splits, partition, l, sc, st) ||
                            launch_loads<kHeadDim, kGroup, kFp8, 2, false>(a, num_splits, partition, l, sc, st) ||
                            launch_loads<kHeadDim, kGroup, kFp8, 2, true>(a, num_splits, partition, l, sc, st) ||
                            launch_loads<kHeadDim, kGroup, kFp8, 4, false>(a, num_splits, partition, l, sc, st);
      MINIVLLM_CHECK(launched) << "decode attention (tensor cores): no register kernel of " << l.tiles
                               << " tiles a step" << (l.pipe ? ", pipelined," : "") << " at head_dim " << kHeadDim;
      return;
    }
  }
  launch_with_pdl(decode_mma_kernel<kHeadDim, kGroup, kFp8, kDefault, false>, grid, dim3(kMmaThreads), 0, st, a,
                  partition, num_splits, sc);
}

template <int kHeadDim, bool kFp8>
void launch_mma(const AttentionArgs& a, int group, int num_splits, int partition, bool ring,
                const DecodeMmaLoads& loads, const DecodeScratch& sc, cudaStream_t st) {
  switch (group) {
    case 1: return launch_group<kHeadDim, 1, kFp8>(a, num_splits, partition, ring, loads, sc, st);
    case 2: return launch_group<kHeadDim, 2, kFp8>(a, num_splits, partition, ring, loads, sc, st);
    case 4: return launch_group<kHeadDim, 4, kFp8>(a, num_splits, partition, ring, loads, sc, st);
    default: return launch_group<kHeadDim, 8, kFp8>(a, num_splits, partition, ring, loads, sc, st);
  }
}


// ---- staged: a small batch's split in shared memory before the wait (MINIVLLM_DECODE_WIDE_MMA) ----
//
// At small batches a CTA becomes resident about when its predecessor ends, and the CUDA-core wide
// kernels then spend ~3 us on 256 keys of one SM's shuffles and exps; on the tensor cores the same
// keys take ~1.6 us (PERFORMANCE.md, "Stop 80"). 8 warps take a split's 16-key tiles round robin
// (mma_consume). Each CTA serves a few q heads of a kv head (at most 128 of their dims:
// decode_wide_mma_heads; one CTA merging a group of 8 took 7-8 us). Before griddepcontrol.wait warp 0's lanes issue a TMA box
// a tile and 64 dims (the prefill kernel's 128-byte-swizzled maps of the cache), which is a few
// dozen requests a CTA: 32 cp.async a thread, or a bulk copy a key row, were slower to issue than
// the key loop they fed (Stop 81). The newest key's rows are this step's (the rope kernel writes
// them): the tile's warp loads them after the wait and writes them over what the box brought, and
// zeroes the rows past the context (a cache row there may hold anything, NaN included).
//
// The fragment loads meet no bank conflict in that layout (a 16-byte piece c of row r sits at
// piece c ^ (r & 7) of its 128 bytes). q.k: thread (g, t) takes the pieces 2t + (p & 1) + 8 (p >> 1)
// of keys g and g + 8 (a permutation of the mma's k index that q's fragments follow too): a quarter
// warp's two rows then read pieces of opposite parity. p.v keeps the register kernel's layout (dims
// g * D/8 .. of keys 2t, 2t + 1, ...); at head_dim 128 (two pieces a key) odd g read theirs in the
// other order, for the same reason.
template <int kHeadDim>
struct StagedLayout {
  static constexpr int kRowBytes = kHeadDim * 2;
  static constexpr int kKeyBytes = 2 * kRowBytes;  // k and v
  static constexpr int kDBlocks = kHeadDim / 64;   // 128-byte column blocks, one TMA box wide each
  static constexpr int kBoxBytes = 16 * 128;       // a tile's rows of one column block
  // Byte offset of 16-byte piece pc of row r in a region of `rows` rows (k or v).
  __device__ static int offset(int rows, int r, int pc) {
    return (pc >> 3) * rows * 128 + r * 128 + (((pc & 7) ^ (r & 7)) << 4);
  }
  // The k pieces' order: thread t's p-th piece.
  __device__ static int k_piece(int t, int p) { return 2 * t + (p & 1) + 8 * (p >> 1); }
};

struct StagedMaps {
  CUtensorMap k, v;  // the caches as [blocks x kv heads x block rows, head_dim], boxes of 16 x 64
};

constexpr int kStagedWarps = 8;
constexpr int kStagedThreads = kStagedWarps * 32;
constexpr int kStagedAlign = 1024;  // the 128-byte swizzle repeats every 1024 bytes
constexpr int kStagedMaxRounds = 8;

template <int kHeadDim>
constexpr int staged_key_cap() {
  return static_cast<int>((kMaxDecodeStagedSmemBytes - kStagedAlign) / StagedLayout<kHeadDim>::kKeyBytes) /
         kDecodeMmaStagedGranule * kDecodeMmaStagedGranule;
}

// q heads head0 + g (g < heads; the other rows zero) as A fragments in the staged kernel's k order:
// words 4p .. 4p + 3 are piece k_piece(t, p) of the head (8 dims).
template <int kHeadDim>
__device__ __forceinline__ float staged_q_fragments(const AttentionArgs& a, const MmaCta& c, int head0, int heads,
                                                    uint32_t (&qa)[kHeadDim / 16][4]) {
  using S = MmaShape<kHeadDim, false>;
  using L = StagedLayout<kHeadDim>;
  const bool real_head = c.g < heads;
  const int64_t qkv_stride = static_cast<int64_t>(a.num_q_heads + 2 * a.num_kv_heads) * kHeadDim;
  const uint4* qp = reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(a.qkv) + c.seq * qkv_stride +
                                                   static_cast<int64_t>(head0 + (real_head ? c.g : 0)) * kHeadDim);
  uint32_t qw[S::kKElems / 2];
#pragma unroll
  for (int p = 0; p < S::kKElems / 8; ++p) {
    const uint4 u = real_head ? __ldg(qp + L::k_piece(c.t, p)) : make_uint4(0, 0, 0, 0);
    qw[4 * p] = u.x, qw[4 * p + 1] = u.y, qw[4 * p + 2] = u.z, qw[4 * p + 3] = u.w;
  }
#pragma unroll
  for (int st = 0; st < S::kKSteps; ++st) {
    qa[st][0] = qw[2 * st];
    qa[st][2] = qw[2 * st + 1];
    qa[st][1] = qa[st][3] = 0u;
  }
  return a.scale * kLog2e;
}

// launch_heads: the q heads a CTA of the grid stands for (grid.x: num_q_heads / launch_heads); a CTA
// serves up to kMaxHeads (below).
template <int kHeadDim, int kMaxHeads>
__global__ __launch_bounds__(kStagedThreads, 1) void decode_mma_staged_kernel(AttentionArgs a, int launch_heads,
                                                                            int partition, int num_splits,
                                                                            DecodeScratch scratch,
                                                                            const __grid_constant__ StagedMaps maps) {
  using S = MmaShape<kHeadDim, false>;
  using L = StagedLayout<kHeadDim>;
  static_assert(kMaxHeads <= 8, "q heads are the rows g < 8 of the mma");
  extern __shared__ __align__(128) uint8_t staged_raw[];  // aligned up: [partition] k rows, then v rows
  __shared__ __align__(8) uint64_t bar;
  pdl_launch_dependents();  // the o projection may start streaming its weights now
  const uint32_t bar_addr = smem_addr(&bar);
  if (threadIdx.x == 0) {
    mbar_init(bar_addr, 1);
    mbar_init_fence();
  }
  const int group = a.num_q_heads / a.num_kv_heads;
  MmaCta c;
  // grid.x the head CTAs, grid.y the splits: the CTAs of the splits that hold keys (the first ones)
  // come first in the launch order, ahead of those past the context.
  c.split = blockIdx.y;
  const int head0 = static_cast<int>(blockIdx.x) * launch_heads;  // among the sequence's q heads
  c.kvh = head0 / group;
  c.place(a);
  const SplitBlockGuess guess = guess_split_block(a, c.table, c.split, partition);
  c.ctx = a.context_lens[c.seq];
  __syncthreads();  // the barrier is initialised before anyone uses it
  c.first = decode_first_key(a, c.ctx);
  c.origin = decode_key_origin(a, c.first);
  // A sequence whose splits would take more CTAs than a wave (AttentionArgs::wide_wave_ctas) first
  // takes CTAs of twice the heads (up to kMaxHeads and the group: the others return at once), then
  // splits of 2, 4 or 8 rounds of `partition` keys, each staged in turn, the first before the wait.
  // Every CTA of the sequence decides alike, and the merge counts splits of that length.
  int heads = launch_heads, rounds = 1;
  if (a.wide_wave_ctas > 0) {
    const int keys = c.ctx - c.origin;
    const int64_t seqs = gridDim.z;
    const int64_t splits = (keys + partition - 1) / partition;
    while (heads < min(kMaxHeads, group) && splits * (a.num_q_heads / heads) * seqs > a.wide_wave_ctas) heads *= 2;
    while (rounds < kStagedMaxRounds &&
           (keys + rounds * partition - 1) / (rounds * partition) * (a.num_q_heads / heads) * seqs > a.wide_wave_ctas) {
      rounds *= 2;
    }
  }
  if (head0 % heads != 0) return;  // the CTA of the heads before serves these
  const int span = rounds * partition;
  c.start = c.origin + c.split * span;
  if (c.start >= c.ctx) {  // past this sequence: the merge counts only the splits that hold keys
    if (c.ctx <= 0 && c.split == 0) {  // no keys at all (a padded row): zeros, never garbage
      pdl_wait();  // an earlier kernel may still read out
      __nv_bfloat16* out = static_cast<__nv_bfloat16*>(a.out) +
                           static_cast<int64_t>(c.seq) * a.num_q_heads * kHeadDim + static_cast<int64_t>(head0) * kHeadDim;
      for (int i = threadIdx.x; i < heads * kHeadDim; i += kStagedThreads) out[i] = __float2bfloat16(0.0f);
    }
    return;
  }
  c.end = min(c.ctx, c.start + span);
  const int my_rounds = (c.end - c.start + partition - 1) / partition;
  const uint32_t kbase = (smem_addr(staged_raw) + kStagedAlign - 1) & ~static_cast<uint32_t>(kStagedAlign - 1);
  uint8_t* kst = staged_raw + (kbase - smem_addr(staged_raw));
  uint8_t* vst = kst + partition * L::kRowBytes;
  // Cache row of a key (its block from the table, the guessed one for the split's first).
  const int bs_mask = (1 << a.block_size_log2) - 1;
  auto cache_row = [&](int key) {
    const int64_t block = guess.block_of(c.table, key >> a.block_size_log2);
    return ((block * a.num_kv_heads + c.kvh) << a.block_size_log2) + (key & bs_mask);
  };
  // Warp 0: round r's tiles, a TMA box a tile and 64 dims, on the barrier's phase r & 1.
  auto issue_round = [&](int r) {
    const int rs = c.start + r * partition;
    const int tiles = (min(c.end, rs + partition) - rs + kTileKeys - 1) / kTileKeys;
    if (c.lane == 0) mbar_expect_tx(bar_addr, static_cast<uint32_t>(tiles * L::kDBlocks * 2 * L::kBoxBytes));
    __syncwarp();
    for (int i = c.lane; i < tiles; i += 32) {
      const int row = static_cast<int>(cache_row(rs + i * kTileKeys));
#pragma unroll
      for (int d = 0; d < L::kDBlocks; ++d) {
        const uint32_t off = d * partition * 128 + i * L::kBoxBytes;
        tma_load_2d(kbase + off, &maps.k, bar_addr, d * 64, row);
        tma_load_2d(kbase + partition * L::kRowBytes + off, &maps.v, bar_addr, d * 64, row);
      }
    }
  };
  if (c.warp == 0) issue_round(0);
  // The last round's last tile's warp: the newest key's rows (this step's) once the rope kernel is
  // done, and the rows past the context.
  const int last_start = c.start + (my_rounds - 1) * partition;
  const int last_rows = c.end - last_start;
  const int last_warp = ((last_rows + kTileKeys - 1) / kTileKeys - 1) % kStagedWarps;
  const bool has_newest = c.end == c.ctx;  // the last split of its sequence
  uint4 fresh = make_uint4(0, 0, 0, 0);
  const int fresh_piece = c.lane % (kHeadDim / 8);
  const bool fresh_v = c.lane >= kHeadDim / 8;
  int64_t fresh_row = 0;
  if (c.warp == last_warp && has_newest) fresh_row = cache_row(c.ctx - 1);
  pdl_wait();
  if (c.warp == last_warp && has_newest && c.lane < kHeadDim / 4) {
    const uint4* src = reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(fresh_v ? a.v_cache : a.k_cache) +
                                                      fresh_row * L::kRowBytes);
    fresh = src[fresh_piece];
  }
  uint32_t qa[S::kKSteps][4];
  const float qmul = staged_q_fragments<kHeadDim>(a, c, head0, heads, qa);
  MmaState<S::kNBlocks> st;
  const int col[4] = {2 * c.t, 2 * c.t + 1, 2 * c.t + 8, 2 * c.t + 9};
  constexpr int kKPieces = S::kKWords / 4, kVPieces = S::kVWords / 4;
  for (int round = 0; round < my_rounds; ++round) {
    if (round > 0) {
      __syncthreads();  // every warp is done with the last round's rows
      if (c.warp == 0) {
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic reads -> the boxes' writes
        issue_round(round);
      }
    }
    mbar_wait(bar_addr, round & 1);
    const int rs = c.start + round * partition;
    const int rows = min(c.end, rs + partition) - rs;
    const int tiles = (rows + kTileKeys - 1) / kTileKeys;
    if (round == my_rounds - 1 && c.warp == last_warp) {
      if (has_newest && c.lane < kHeadDim / 4) {
        *reinterpret_cast<uint4*>((fresh_v ? vst : kst) + L::offset(partition, rows - 1, fresh_piece)) = fresh;
      }
      for (int i = c.lane; i < (tiles * kTileKeys - rows) * (kHeadDim / 8); i += 32) {
        const int r = rows + i / (kHeadDim / 8), pc = i % (kHeadDim / 8);
        *reinterpret_cast<uint4*>(kst + L::offset(partition, r, pc)) = make_uint4(0, 0, 0, 0);
        *reinterpret_cast<uint4*>(vst + L::offset(partition, r, pc)) = make_uint4(0, 0, 0, 0);
      }
      __syncwarp();
    }
    for (int i = c.warp; i < tiles; i += kStagedWarps) {
      uint32_t kw[1][2][S::kKWords];
      uint32_t vw[1][4][S::kVWords];
      float ks[1][4] = {}, vs[1][4] = {};
#pragma unroll
      for (int n = 0; n < 2; ++n) {
        const int r = i * kTileKeys + c.g + 8 * n;  // rows of this round
#pragma unroll
        for (int p = 0; p < kKPieces; ++p) {
          const uint4 u = *reinterpret_cast<const uint4*>(kst + L::offset(partition, r, L::k_piece(c.t, p)));
          kw[0][n][4 * p] = u.x, kw[0][n][4 * p + 1] = u.y, kw[0][n][4 * p + 2] = u.z, kw[0][n][4 * p + 3] = u.w;
        }
      }
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int r = i * kTileKeys + col[k];
        if constexpr (kVPieces == 2) {  // odd g read their two pieces in the other order
          const int swap = c.g & 1;
          const uint4 u0 = *reinterpret_cast<const uint4*>(vst + L::offset(partition, r, 2 * c.g + swap));
          const uint4 u1 = *reinterpret_cast<const uint4*>(vst + L::offset(partition, r, 2 * c.g + 1 - swap));
          const uint4 lo = swap ? u1 : u0, hi = swap ? u0 : u1;
          vw[0][k][0] = lo.x, vw[0][k][1] = lo.y, vw[0][k][2] = lo.z, vw[0][k][3] = lo.w;
          vw[0][k][4] = hi.x, vw[0][k][5] = hi.y, vw[0][k][6] = hi.z, vw[0][k][7] = hi.w;
        } else {
          static_assert(kVPieces == 1, "head_dim 64 or 128");
          const uint4 u = *reinterpret_cast<const uint4*>(vst + L::offset(partition, r, c.g));
          vw[0][k][0] = u.x, vw[0][k][1] = u.y, vw[0][k][2] = u.z, vw[0][k][3] = u.w;
        }
      }
      const int key0[1] = {rs + i * kTileKeys};
      mma_consume<kHeadDim, false, 1>(st, qa, qmul, kw, vw, ks, vs, key0, c.first, c.end, c.t);
    }
  }
  mma_finish_heads<kHeadDim, kMaxHeads, false, kStagedWarps>(st, a, c, head0, heads, span, num_splits, scratch,
                                                            static_cast<int64_t>(c.seq) * gridDim.x + blockIdx.x);
}

// A grid of `heads` q heads a CTA, whose CTAs may take up to kMaxHeads.
template <int kHeadDim, int kMaxHeads>
void launch_staged_heads(const AttentionArgs& a, int heads, int num_splits, int partition, const DecodeScratch& sc,
                         cudaStream_t st) {
  allow_dynamic_smem<decode_mma_staged_kernel<kHeadDim, kMaxHeads>>(static_cast<int>(kMaxDecodeStagedSmemBytes));
  const size_t bytes = static_cast<size_t>(partition) * StagedLayout<kHeadDim>::kKeyBytes + kStagedAlign;
  const int64_t cache_rows = static_cast<int64_t>(a.num_blocks) * a.num_kv_heads * (int64_t{1} << a.block_size_log2);
  StagedMaps maps;
  maps.k = make_bf16_tma_map(a.k_cache, cache_rows, kHeadDim, kHeadDim, kTileKeys, "decode attention (staged)");
  maps.v = make_bf16_tma_map(a.v_cache, cache_rows, kHeadDim, kHeadDim, kTileKeys, "decode attention (staged)");
  launch_with_pdl(decode_mma_staged_kernel<kHeadDim, kMaxHeads>, dim3(a.num_q_heads / heads, num_splits, a.num_seqs),
                  dim3(kStagedThreads), bytes, st, a, heads, partition, num_splits, sc, maps);
}

template <int kHeadDim>
void launch_staged_head_dim(const AttentionArgs& a, int heads, int num_splits, int partition, const DecodeScratch& sc,
                            cudaStream_t st) {
  switch (heads) {  // CTAs of up to twice the grid's heads where a wave asks for them
    case 1: return launch_staged_heads<kHeadDim, 2>(a, 1, num_splits, partition, sc, st);
    case 2: return launch_staged_heads<kHeadDim, 4>(a, 2, num_splits, partition, sc, st);
    case 4: return launch_staged_heads<kHeadDim, 8>(a, 4, num_splits, partition, sc, st);
    default: return launch_staged_heads<kHeadDim, 8>(a, 8, num_splits, partition, sc, st);
  }
}

}  // namespace

bool decode_mma_fits(int head_dim, int group, int block_size) {
  return (head_dim == 64 || head_dim == 128) && (group == 1 || group == 2 || group == 4 || group == 8) &&
         block_size >= kTileKeys;
}

void launch_decode_attention_mma(const AttentionArgs& a, int num_splits, int partition, bool ring,
                                 const DecodeMmaLoads& loads, const DecodeScratch& scratch, cudaStream_t stream) {
  if (a.num_seqs == 0) return;
  const int group = a.num_q_heads / a.num_kv_heads;
  MINIVLLM_CHECK(decode_mma_fits(a.head_dim, group, 1 << a.block_size_log2) && partition % kTileKeys == 0)
      << "decode attention (tensor cores): no kernel for head_dim " << a.head_dim << ", group " << group
      << ", block size " << (1 << a.block_size_log2) << ", partition " << partition;
  if (a.kv_fp8) {
    if (a.head_dim == 64) return launch_mma<64, true>(a, group, num_splits, partition, ring, loads, scratch, stream);
    return launch_mma<128, true>(a, group, num_splits, partition, ring, loads, scratch, stream);
  }
  if (a.head_dim == 64) return launch_mma<64, false>(a, group, num_splits, partition, ring, loads, scratch, stream);
  launch_mma<128, false>(a, group, num_splits, partition, ring, loads, scratch, stream);
}

int decode_mma_staged_keys(int head_dim) {
  return head_dim == 64 ? staged_key_cap<64>() : staged_key_cap<128>();
}

int decode_mma_staged_heads(int group, int max_heads) {
  int heads = 1;
  while (heads * 2 <= std::min(group, max_heads)) heads *= 2;
  return heads;
}

void launch_decode_attention_mma_staged(const AttentionArgs& a, int heads, int num_splits, int partition,
                                        const DecodeScratch& scratch, cudaStream_t stream) {
  if (a.num_seqs == 0) return;
  const int group = a.num_q_heads / a.num_kv_heads;
  MINIVLLM_CHECK(!a.kv_fp8 && decode_mma_fits(a.head_dim, group, 1 << a.block_size_log2) &&
                 partition % kTileKeys == 0 && partition <= decode_mma_staged_keys(a.head_dim) &&
                 (heads == 1 || heads == 2 || heads == 4 || heads == 8) && group % heads == 0)
      << "decode attention (staged, tensor cores): no kernel for head_dim " << a.head_dim << ", group " << group
      << ", block size " << (1 << a.block_size_log2) << ", partition " << partition << ", " << heads
      << " heads a CTA" << (a.kv_fp8 ? ", fp8" : "");
  if (a.head_dim == 64) return launch_staged_head_dim<64>(a, heads, num_splits, partition, scratch, stream);
  launch_staged_head_dim<128>(a, heads, num_splits, partition, scratch, stream);
}

}  // namespace minivllm::cuda
