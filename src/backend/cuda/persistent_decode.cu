// The persistent decode kernel (issue 50): every layer of a decode step of 1-8 sequences in one
// launch. One CTA per SM, for the whole step:
// - a producer warp streams the CTA's share of every linear's weights, layer after layer, through
//   a ring of shared-memory tiles (bulk copies completing on mbarriers). Weights depend on nothing
//   the step computes, so it runs ahead across layer boundaries, bounded only by the ring: while
//   the consumers wait at a barrier or attend, the next linears' tiles are already arriving.
// - eight consumer warps walk the step's phases: per layer, the qkv gemv (its input the
//   RMSNormed residual), attention (q/k norms, rope, the new k and v into the paged cache, keys
//   split over warps of every CTA), the o gemv (added into the residual), the gate/up gemv (its
//   activation in the epilogue) and the down gemv (added into the residual). A grid barrier
//   (persistent_schedule.cuh) separates phases that read what others wrote.
// A gemv tile is 8 weight rows x up to 1024 columns. Each consumer warp multiplies its eighth of
// the columns with mma.m16n8k16, x (the batch, at most 8 rows) as the A operand and the weight rows
// as B, so a batch of 8 costs the tensor cores what one sequence does; the 8 warps' sums are added
// in a fixed order, so results do not depend on timing.
#include "backend/cuda/persistent_decode.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>

#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/mma_sync.cuh"
#include "backend/cuda/persistent_schedule.cuh"
#include "backend/cuda/rope_math.cuh"
#include "common/activation.h"

namespace minivllm::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int W = kPdConsumerWarps;
constexpr int kConsumerThreads = W * 32;
constexpr int kThreads = kConsumerThreads + 32;
constexpr int kBarConsumers = 1;  // named barrier of the consumer warps (0 is __syncthreads')
constexpr int kRedFloats = W * 64;
constexpr size_t kSlotBytes = static_cast<size_t>(kPdTileRows) * (kPdMaxChunk + 8) * sizeof(bf16);

enum PdOp { kQkv = 0, kO = 1, kGateUp = 2, kDown = 3 };

struct LinearView {
  const bf16* w;
  int tiles, cols, chunk;
};

__device__ __forceinline__ LinearView linear_view(const PdParams& p, const PdLayer& L, int op) {
  const int hd = p.head_dim, nq = p.num_q_heads, nkv = p.num_kv_heads;
  switch (op) {
    case kQkv:
      return {static_cast<const bf16*>(L.qkv), (nq + 2 * nkv) * hd / kPdTileRows, p.hidden, p.chunk_hidden};
    case kO:
      return {static_cast<const bf16*>(L.o), p.hidden / kPdTileRows, nq * hd, p.chunk_attn};
    case kGateUp:  // a tile is 4 gate rows and the 4 up rows of the same outputs
      return {static_cast<const bf16*>(L.gate_up), p.inter / 4, p.hidden, p.chunk_hidden};
    default:
      return {static_cast<const bf16*>(L.down), p.hidden / kPdTileRows, p.inter, p.chunk_inter};
  }
}

// The weight row that row i (0..7) of tile t holds.
__device__ __forceinline__ int tile_row(int op, int t, int i, int inter) {
  if (op == kGateUp) return i < 4 ? 4 * t + i : inter + 4 * t + (i - 4);
  return kPdTileRows * t + i;
}

__device__ __forceinline__ int smem_row_bytes(int chunk) { return (chunk + 8) * static_cast<int>(sizeof(bf16)); }

struct Smem {
  uint64_t* full;   // [ring_slots]: the tile landed
  uint64_t* empty;  // [ring_slots]: every consumer warp is done with it
  float* red;       // [2][W][64]: each warp's partial sums of a tile
  float* ss;        // [W][kPdMaxBatch]: each warp's share of the residual rows' sums of squares
  float* q;         // [W][group][hd]: each warp's rotated queries
  bf16* x;          // [batch][widest_k + 8]: the linear's input
  uint8_t* ring;    // [ring_slots][kSlotBytes]
};

__device__ __forceinline__ Smem carve(uint8_t* base, const PdParams& p, int group, int widest_k) {
  Smem s;
  s.full = reinterpret_cast<uint64_t*>(base);
  s.empty = s.full + p.ring_slots;
  uint8_t* q = base + 2 * 8 * static_cast<size_t>(p.ring_slots);
  q = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(q) + 127) & ~uintptr_t{127});
  s.red = reinterpret_cast<float*>(q);
  s.ss = s.red + 2 * kRedFloats;
  s.q = s.ss + W * kPdMaxBatch;
  s.x = reinterpret_cast<bf16*>(s.q + W * group * p.head_dim);
  uint8_t* ring = reinterpret_cast<uint8_t*>(s.x + static_cast<size_t>(p.batch) * (widest_k + 8));
  s.ring = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(ring) + 127) & ~uintptr_t{127});
  return s;
}

// ---- the producer: every tile this CTA multiplies, in the consumers' order ----
__device__ void produce(const PdParams& p, const Smem& s, int lane) {
  uint32_t seq = 0;
  for (int l = 0; l < p.num_layers; ++l) {
    for (int op = kQkv; op <= kDown; ++op) {
      const LinearView v = linear_view(p, p.layers[l], op);
      int t0, t1;
      pd_tile_range(v.tiles, blockIdx.x, gridDim.x, t0, t1);
      const int chunks = v.cols / v.chunk;
      const uint32_t bytes = static_cast<uint32_t>(v.chunk) * sizeof(bf16);
      for (int t = t0; t < t1; ++t) {
        for (int c = 0; c < chunks; ++c, ++seq) {
          const int slot = static_cast<int>(seq % p.ring_slots);
          const uint32_t use = seq / p.ring_slots;
          if (use > 0) mbar_wait(smem_addr(&s.empty[slot]), (use - 1) & 1);
          const uint32_t full = smem_addr(&s.full[slot]);
          if (lane == 0) mbar_expect_tx(full, bytes * kPdTileRows);
          __syncwarp();
          if (lane < kPdTileRows) {
            const int row = tile_row(op, t, lane, p.inter);
            const bf16* src = v.w + static_cast<int64_t>(row) * v.cols + static_cast<int64_t>(c) * v.chunk;
            uint8_t* dst = s.ring + static_cast<size_t>(slot) * kSlotBytes + lane * smem_row_bytes(v.chunk);
            bulk_copy_to_smem(smem_addr(dst), src, bytes, full);
          }
        }
      }
    }
  }
}

// ---- the consumers' inputs ----
// The prologues below run on the critical path right after a grid barrier, so each thread issues
// kInFlight loads before it uses any: a loop that waited on each load in turn cost one L2 round
// trip per iteration, which made the kernel latency-bound.
constexpr int kInFlight = 8;

// RMSNorm of every residual row into x (bf16), spread over every consumer thread: each warp's
// share of the rows' sums of squares into s.ss (a warp's 32 float4 lie in one row: hidden is a
// multiple of 128), added in warp order so that the result does not depend on timing; then each
// element scaled.
__device__ void prep_norm(const PdParams& p, const Smem& s, const bf16* w, int ctid) {
  const int q4 = p.hidden / 4, total = p.batch * q4, xs = p.hidden + 8;
  const int warp = ctid >> 5, lane = ctid & 31;
  if (ctid < W * kPdMaxBatch) s.ss[ctid] = 0.f;
  named_bar_sync(kBarConsumers, kConsumerThreads);
  for (int base = ctid; base < total; base += kConsumerThreads * kInFlight) {
    float4 v[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int i = base + u * kConsumerThreads;
      v[u] = i < total ? __ldcg(reinterpret_cast<const float4*>(p.residual) + i) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int i = base + u * kConsumerThreads;  // the same row for the whole warp, or past the end
      const float sq = warp_sum(v[u].x * v[u].x + v[u].y * v[u].y + v[u].z * v[u].z + v[u].w * v[u].w);
      if (lane == 0 && i < total) s.ss[warp * kPdMaxBatch + i / q4] += sq;
    }
  }
  named_bar_sync(kBarConsumers, kConsumerThreads);
  for (int base = ctid; base < total; base += kConsumerThreads * kInFlight) {
    float4 v[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int i = base + u * kConsumerThreads;
      v[u] = i < total ? __ldcg(reinterpret_cast<const float4*>(p.residual) + i) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int i = base + u * kConsumerThreads;
      if (i >= total) continue;
      const int b = i / q4, c = (i - b * q4) * 4;
      float ss = 0.f;
#pragma unroll
      for (int k = 0; k < W; ++k) ss += s.ss[k * kPdMaxBatch + b];
      const float inv = rsqrtf(ss / static_cast<float>(p.hidden) + p.eps);
      const float e[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
      for (int j = 0; j < 4; ++j) s.x[b * xs + c + j] = __float2bfloat16(e[j] * inv * __bfloat162float(w[c + j]));
    }
  }
}

// bf16 rows [batch, cols] written by other CTAs into x.
__device__ void prep_copy(const PdParams& p, const bf16* src, int cols, bf16* x, int ctid) {
  const int per_row = cols / 8, xs = cols + 8, total = p.batch * per_row;
  for (int base = ctid; base < total; base += kConsumerThreads * kInFlight) {
    uint4 v[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int i = base + u * kConsumerThreads;
      const int b = i / per_row, c = (i - b * per_row) * 8;
      v[u] = i < total ? __ldcg(reinterpret_cast<const uint4*>(src + static_cast<int64_t>(b) * cols + c))
                       : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int i = base + u * kConsumerThreads;
      const int b = i / per_row, c = (i - b * per_row) * 8;
      if (i < total) *reinterpret_cast<uint4*>(x + b * xs + c) = v[u];
    }
  }
}

// ---- a linear: this CTA's tiles times x, then the op's epilogue ----
__device__ void consume_linear(const PdParams& p, const Smem& s, int l, int op, uint32_t& seq, int warp, int lane) {
  const LinearView v = linear_view(p, p.layers[l], op);
  int t0, t1;
  pd_tile_range(v.tiles, blockIdx.x, gridDim.x, t0, t1);
  const int chunks = v.cols / v.chunk;
  const int g = lane >> 2, t4 = lane & 3;
  const int wcols = v.chunk / W;  // this warp's columns of each tile, a multiple of 16
  const bf16* xrow = s.x + min(g, p.batch - 1) * (v.cols + 8) + warp * wcols + 2 * t4;
  const int rb = smem_row_bytes(v.chunk);
  const int ctid = warp * 32 + lane;
  for (int t = t0; t < t1; ++t) {
    float c[4] = {0.f, 0.f, 0.f, 0.f};
    for (int ch = 0; ch < chunks; ++ch, ++seq) {
      const int slot = static_cast<int>(seq % p.ring_slots);
      mbar_wait(smem_addr(&s.full[slot]), (seq / p.ring_slots) & 1);
      const uint8_t* wrow = s.ring + static_cast<size_t>(slot) * kSlotBytes + g * rb + (warp * wcols + 2 * t4) * 2;
      const bf16* xk = xrow + ch * v.chunk;
#pragma unroll 4
      for (int k = 0; k < wcols; k += 16) {
        // A rows g (the sequence; rows 8-15 unused, zero), B column g (weight row g of the tile).
        const uint32_t a[4] = {*reinterpret_cast<const uint32_t*>(xk + k), 0u,
                               *reinterpret_cast<const uint32_t*>(xk + k + 8), 0u};
        const uint32_t b0 = *reinterpret_cast<const uint32_t*>(wrow + k * 2);
        const uint32_t b1 = *reinterpret_cast<const uint32_t*>(wrow + (k + 8) * 2);
        mma_bf16(c, a, b0, b1);
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(smem_addr(&s.empty[slot]));
    }
    // c[0], c[1]: sequence g, tile rows 2 t4 and 2 t4 + 1, over this warp's columns.
    float* red = s.red + ((t - t0) & 1) * kRedFloats;
    if (g < p.batch) {
      red[warp * 64 + g * 8 + 2 * t4] = c[0];
      red[warp * 64 + g * 8 + 2 * t4 + 1] = c[1];
    }
    // The o and down linears add into the residual: its value is fetched before the barrier.
    float* res = nullptr;
    float res_v = 0.f;
    if ((op == kO || op == kDown) && ctid < p.batch * 8) {
      res = p.residual + static_cast<int64_t>(ctid >> 3) * p.hidden + kPdTileRows * t + (ctid & 7);
      res_v = __ldcg(res);
    }
    named_bar_sync(kBarConsumers, kConsumerThreads);
    if (op == kGateUp) {
      if (ctid < p.batch * 4) {
        const int b = ctid >> 2, j = ctid & 3;
        float gate = 0.f, up = 0.f;
        for (int w = 0; w < W; ++w) {
          gate += red[w * 64 + b * 8 + j];
          up += red[w * 64 + b * 8 + 4 + j];
        }
        const float a = gate_act(gate, static_cast<Activation>(p.activation)) * up;
        static_cast<bf16*>(p.act_out)[static_cast<int64_t>(b) * p.inter + 4 * t + j] = __float2bfloat16(a);
      }
    } else if (ctid < p.batch * 8) {
      const int b = ctid >> 3, n = ctid & 7;
      float y = 0.f;
      for (int w = 0; w < W; ++w) y += red[w * 64 + b * 8 + n];
      const int row = kPdTileRows * t + n;
      if (op == kQkv) {
        p.qkv[static_cast<int64_t>(b) * (p.num_q_heads + 2 * p.num_kv_heads) * p.head_dim + row] = y;
      } else {  // this CTA owns the row in both the o and the down linear
        *res = res_v + y;
      }
    }
    // The next tile writes the other half of red; the barrier of the one after orders its reuse.
  }
}

// ---- attention ----
// One head's HD values (f32, from the qkv scratch): RMSNorm (norm_w non-null), rope at the row of
// cos_sin `cs`, times `mul`, into f32 `out` and / or bf16 `out_bf`.
template <int HD>
__device__ __forceinline__ void rope_head(const float* raw, const void* norm_w, float eps, const float* cs, float mul,
                                          float* out, bf16* out_bf, int lane) {
  constexpr int kPairs = HD / 64;  // rotary pairs per lane
  float lo[kPairs], hi[kPairs];
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < kPairs; ++i) {
    const int j = lane + 32 * i;
    lo[i] = __ldcg(raw + j);
    hi[i] = __ldcg(raw + j + HD / 2);
    ss += lo[i] * lo[i] + hi[i] * hi[i];
  }
  if (norm_w != nullptr) {
    const float inv = rsqrtf(warp_sum(ss) / HD + eps);
    const bf16* w = static_cast<const bf16*>(norm_w);
#pragma unroll
    for (int i = 0; i < kPairs; ++i) {
      const int j = lane + 32 * i;
      lo[i] *= inv * __bfloat162float(w[j]);
      hi[i] *= inv * __bfloat162float(w[j + HD / 2]);
    }
  }
#pragma unroll
  for (int i = 0; i < kPairs; ++i) {
    const int j = lane + 32 * i;
    float a, b;
    rotate_pair(lo[i], hi[i], cs[j], cs[HD / 2 + j], a, b);
    if (out != nullptr) {
      out[j] = a * mul;
      out[j + HD / 2] = b * mul;
    }
    if (out_bf != nullptr) {
      out_bf[j] = __float2bfloat16(a * mul);
      out_bf[j + HD / 2] = __float2bfloat16(b * mul);
    }
  }
}

// A lane's HD / 32 dims of one value row, packed: 4 bf16 (head_dim 128) or 2 (64).
template <int kDims>
struct ValuePack;
template <>
struct ValuePack<4> {
  using type = uint2;
  __device__ static void unpack(const uint2& u, float* f) {
    const __nv_bfloat162 a = *reinterpret_cast<const __nv_bfloat162*>(&u.x);
    const __nv_bfloat162 b = *reinterpret_cast<const __nv_bfloat162*>(&u.y);
    f[0] = __low2float(a);
    f[1] = __high2float(a);
    f[2] = __low2float(b);
    f[3] = __high2float(b);
  }
};
template <>
struct ValuePack<2> {
  using type = uint32_t;
  __device__ static void unpack(const uint32_t& u, float* f) {
    const __nv_bfloat162 a = *reinterpret_cast<const __nv_bfloat162*>(&u);
    f[0] = __low2float(a);
    f[1] = __high2float(a);
  }
};

__device__ __forceinline__ int pd_splits(const PdParams& p, int b) {
  return max(1, min(p.split_cap, (p.context_lens[b] + 31) / 32));
}

// Keys [k0, k1) of sequence b for kv head kvh and its GROUP query heads: 32 keys at a time, lane j
// scoring key j (its whole row), then every lane adding its HD / 32 dims of the values.
template <int HD, int GROUP>
__device__ void attend(const PdParams& p, const PdLayer& L, int b, int kvh, int split, int splits, float* qs,
                       int lane) {
  constexpr int kDims = HD / 32;  // value dims per lane
  constexpr unsigned kAll = 0xffffffffu;
  const int nq = p.num_q_heads, nkv = p.num_kv_heads;
  const int ctx = p.context_lens[b], pos = p.positions[b];
  const int kps = (ctx + splits - 1) / splits, k0 = split * kps, k1 = min(ctx, k0 + kps);
  const float* raw = p.qkv + static_cast<int64_t>(b) * (nq + 2 * nkv) * HD;
  const float* cs = p.cos_sin + static_cast<int64_t>(pos) * HD;
  bf16* kc = static_cast<bf16*>(L.k_cache);
  bf16* vc = static_cast<bf16*>(L.v_cache);
  __syncwarp();  // the warp's previous item is done reading qs
#pragma unroll
  for (int gq = 0; gq < GROUP; ++gq) {
    rope_head<HD>(raw + (kvh * GROUP + gq) * HD, L.q_norm, p.eps, cs, p.scale, qs + gq * HD, nullptr, lane);
  }
  // The split that holds the new token writes its k and v into the cache first, then reads it back
  // with the others (same warp: a block-scope fence orders the lanes' stores before their loads).
  if (split == (ctx - 1) / kps) {
    const int slot = p.slot_mapping[b];
    if (slot >= 0) {
      const int64_t row = kv_cache_row(slot, p.block_size, nkv, kvh) * HD;
      rope_head<HD>(raw + (nq + kvh) * HD, L.k_norm, p.eps, cs, 1.0f, nullptr, kc + row, lane);
      const float* v = raw + (nq + nkv + kvh) * HD;
      for (int d = lane; d < HD; d += 32) vc[row + d] = __float2bfloat16(__ldcg(v + d));
      __threadfence_block();
    }
  }
  __syncwarp();
  float m[GROUP], l[GROUP], acc[GROUP][kDims];
#pragma unroll
  for (int gq = 0; gq < GROUP; ++gq) {
    m[gq] = -INFINITY;
    l[gq] = 0.f;
#pragma unroll
    for (int d = 0; d < kDims; ++d) acc[gq][d] = 0.f;
  }
  const int32_t* table = p.block_tables + static_cast<int64_t>(b) * p.max_blocks;
  for (int c0 = k0; c0 < k1; c0 += 32) {
    const int j = c0 + lane, n = min(32, k1 - c0);
    const bool valid = lane < n;
    int64_t krow = 0;
    if (valid) {
      const int blk = table[j / p.block_size];
      krow = ((static_cast<int64_t>(blk) * nkv + kvh) * p.block_size + (j % p.block_size)) * HD;
    }
    uint4 k[HD / 8];
#pragma unroll
    for (int i = 0; i < HD / 8; ++i) {
      k[i] = valid ? *reinterpret_cast<const uint4*>(kc + krow + i * 8) : make_uint4(0, 0, 0, 0);
    }
    // This lane's dims of every key's value row, kept packed (issued before the scores need the keys).
    using VPack = typename ValuePack<kDims>::type;
    VPack vv[32];
#pragma unroll
    for (int jj = 0; jj < 32; ++jj) {
      const int64_t r = __shfl_sync(kAll, krow, jj);
      vv[jj] = jj < n ? *reinterpret_cast<const VPack*>(vc + r + lane * kDims) : VPack{};
    }
    float sc[GROUP];
#pragma unroll
    for (int gq = 0; gq < GROUP; ++gq) sc[gq] = 0.f;
#pragma unroll
    for (int i = 0; i < HD / 8; ++i) {
      float kf[8];
      bf16x8_to_f32(k[i], kf);
#pragma unroll
      for (int gq = 0; gq < GROUP; ++gq) {
        const float4 qa = *reinterpret_cast<const float4*>(qs + gq * HD + i * 8);
        const float4 qb = *reinterpret_cast<const float4*>(qs + gq * HD + i * 8 + 4);
        sc[gq] += kf[0] * qa.x + kf[1] * qa.y + kf[2] * qa.z + kf[3] * qa.w + kf[4] * qb.x + kf[5] * qb.y +
                  kf[6] * qb.z + kf[7] * qb.w;
      }
    }
#pragma unroll
    for (int gq = 0; gq < GROUP; ++gq) {
      const float s = valid ? sc[gq] : -INFINITY;
      const float mn = fmaxf(m[gq], warp_max(s));
      const float corr = __expf(m[gq] - mn);
      const float pr = valid ? __expf(s - mn) : 0.f;
      l[gq] = l[gq] * corr + warp_sum(pr);
      m[gq] = mn;
#pragma unroll
      for (int d = 0; d < kDims; ++d) acc[gq][d] *= corr;
#pragma unroll
      for (int jj = 0; jj < 32; ++jj) {
        const float pj = __shfl_sync(kAll, pr, jj);
        float vf[kDims];
        ValuePack<kDims>::unpack(vv[jj], vf);
#pragma unroll
        for (int d = 0; d < kDims; ++d) acc[gq][d] += pj * vf[d];
      }
    }
  }
  bf16* out = static_cast<bf16*>(p.attn_out) + static_cast<int64_t>(b) * nq * HD;
  const int qh0 = kvh * GROUP;
  if (splits == 1) {
#pragma unroll
    for (int gq = 0; gq < GROUP; ++gq) {
      const float inv = 1.0f / l[gq];
#pragma unroll
      for (int d = 0; d < kDims; ++d) out[(qh0 + gq) * HD + lane * kDims + d] = __float2bfloat16(acc[gq][d] * inv);
    }
    return;
  }
  // Several splits: each leaves (acc, m, l); the last to finish merges them in split order.
  const int stride = HD + 2;
  float* part = p.partials + (static_cast<int64_t>(b) * nq + qh0) * p.split_cap * stride;
#pragma unroll
  for (int gq = 0; gq < GROUP; ++gq) {
    float* pp = part + (static_cast<int64_t>(gq) * p.split_cap + split) * stride;
#pragma unroll
    for (int d = 0; d < kDims; ++d) pp[lane * kDims + d] = acc[gq][d];
    if (lane == 0) {
      pp[HD] = m[gq];
      pp[HD + 1] = l[gq];
    }
  }
  __threadfence();
  __syncwarp();
  unsigned* count = p.sync + 2 + b * nkv + kvh;
  unsigned old = 0;
  if (lane == 0) old = atomicAdd(count, 1u);
  old = __shfl_sync(kAll, old, 0);
  if (old != static_cast<unsigned>(splits - 1)) return;
  __threadfence();
#pragma unroll
  for (int gq = 0; gq < GROUP; ++gq) {
    const float* pp = part + static_cast<int64_t>(gq) * p.split_cap * stride;
    // Lane i holds splits i and i + 32 (kPdMaxSplits is 64).
    const float m0 = lane < splits ? __ldcg(pp + lane * stride + HD) : -INFINITY;
    const float m1 = lane + 32 < splits ? __ldcg(pp + (lane + 32) * stride + HD) : -INFINITY;
    const float l0 = lane < splits ? __ldcg(pp + lane * stride + HD + 1) : 0.f;
    const float l1 = lane + 32 < splits ? __ldcg(pp + (lane + 32) * stride + HD + 1) : 0.f;
    const float mx = warp_max(fmaxf(m0, m1));
    const float w0 = lane < splits ? __expf(m0 - mx) : 0.f;
    const float w1 = lane + 32 < splits ? __expf(m1 - mx) : 0.f;
    const float inv = 1.0f / warp_sum(w0 * l0 + w1 * l1);
    float o[kDims];
#pragma unroll
    for (int d = 0; d < kDims; ++d) o[d] = 0.f;
    for (int s0 = 0; s0 < splits; s0 += kInFlight) {
      float v[kInFlight][kDims];
#pragma unroll
      for (int u = 0; u < kInFlight; ++u) {
#pragma unroll
        for (int d = 0; d < kDims; ++d) {
          v[u][d] = s0 + u < splits ? __ldcg(pp + (s0 + u) * stride + lane * kDims + d) : 0.f;
        }
      }
#pragma unroll
      for (int u = 0; u < kInFlight; ++u) {
        const int sp = s0 + u;
        const float w = __shfl_sync(kAll, sp < 32 ? w0 : w1, sp & 31);
#pragma unroll
        for (int d = 0; d < kDims; ++d) o[d] += w * v[u][d];
      }
    }
#pragma unroll
    for (int d = 0; d < kDims; ++d) out[(qh0 + gq) * HD + lane * kDims + d] = __float2bfloat16(o[d] * inv);
  }
  if (lane == 0) *count = 0;  // for the next layer, two grid barriers away
}

// Every (sequence, kv head, key split) of the batch, spread over every consumer warp of the grid.
template <int HD, int GROUP>
__device__ void attention_phase(const PdParams& p, const PdLayer& L, float* qs, int warp, int lane) {
  const int nkv = p.num_kv_heads, nw = gridDim.x * W;
  for (int it = blockIdx.x * W + warp;; it += nw) {
    int b = 0, rem = it, splits = 1;
    for (; b < p.batch; ++b) {
      splits = pd_splits(p, b);
      if (rem < nkv * splits) break;
      rem -= nkv * splits;
    }
    if (b == p.batch) return;
    attend<HD, GROUP>(p, L, b, rem / splits, rem % splits, splits, qs, lane);
  }
}

__device__ __forceinline__ unsigned long long pd_clock() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

template <int HD, int GROUP>
__global__ void __launch_bounds__(kThreads, 1) persistent_decode_kernel(const __grid_constant__ PdParams p) {
  extern __shared__ __align__(128) uint8_t smem_base[];
  const int widest_k = max(p.hidden, max(p.num_q_heads * HD, p.inter));
  const Smem s = carve(smem_base, p, GROUP, widest_k);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int i = 0; i < p.ring_slots; ++i) {
      mbar_init(smem_addr(&s.full[i]), 1);
      mbar_init(smem_addr(&s.empty[i]), W);
    }
    mbar_init_fence();
  }
  __syncthreads();
  if (warp == W) {
    produce(p, s, lane);
    return;
  }
  const int ctid = threadIdx.x;
  float* qs = s.q + warp * GROUP * HD;
  uint32_t seq = 0;
  unsigned barriers = 0;
  const unsigned grid = gridDim.x;
  auto sync_grid = [&] { pd_grid_barrier(p.sync, ++barriers, grid, ctid, kBarConsumers, kConsumerThreads); };
  int ev = 0;  // profiling: a clock stamp at each phase boundary
  auto mark = [&] {
    if (p.trace != nullptr && ctid == 0 && ev < p.trace_events) {
      p.trace[static_cast<size_t>(blockIdx.x) * p.trace_events + ev] = pd_clock();
    }
    ++ev;
  };
  mark();
  for (int l = 0; l < p.num_layers; ++l) {
    const PdLayer& L = p.layers[l];
    if (l > 0) sync_grid();  // the residual, with the previous layer's down projection added
    mark();
    prep_norm(p, s, static_cast<const bf16*>(L.attn_norm), ctid);
    named_bar_sync(kBarConsumers, kConsumerThreads);
    mark();
    consume_linear(p, s, l, kQkv, seq, warp, lane);
    mark();
    sync_grid();
    mark();
    attention_phase<HD, GROUP>(p, L, qs, warp, lane);
    mark();
    sync_grid();
    mark();
    prep_copy(p, static_cast<const bf16*>(p.attn_out), p.num_q_heads * HD, s.x, ctid);
    named_bar_sync(kBarConsumers, kConsumerThreads);
    mark();
    consume_linear(p, s, l, kO, seq, warp, lane);
    mark();
    sync_grid();
    mark();
    prep_norm(p, s, static_cast<const bf16*>(L.ffn_norm), ctid);
    named_bar_sync(kBarConsumers, kConsumerThreads);
    mark();
    consume_linear(p, s, l, kGateUp, seq, warp, lane);
    mark();
    sync_grid();
    prep_copy(p, static_cast<const bf16*>(p.act_out), p.inter, s.x, ctid);
    named_bar_sync(kBarConsumers, kConsumerThreads);
    mark();
    consume_linear(p, s, l, kDown, seq, warp, lane);
    mark();
  }
  // The last CTA past its last barrier resets the counters for the next launch: every other CTA
  // has passed its own wait by then (it counted itself in sync[1] after it).
  named_bar_sync(kBarConsumers, kConsumerThreads);
  if (ctid == 0) {
    __threadfence();
    if (atomicAdd(p.sync + 1, 1u) == grid - 1) {
      p.sync[0] = 0;
      p.sync[1] = 0;
      __threadfence();
    }
  }
}

template <int HD, int GROUP>
void launch(const PdParams& p, int grid, size_t smem, cudaStream_t stream) {
  auto* kernel = persistent_decode_kernel<HD, GROUP>;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(grid));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;  // the whole grid resident, or an error (no deadlock)
  attr[0].val.cooperative = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, p));
}

}  // namespace

int pd_chunk(int64_t k) {
  if (k <= 0 || k % 128 != 0) return 0;
  for (int c = kPdMaxChunk; c >= 128; c -= 128) {
    if (k % c == 0) return c;
  }
  return 0;
}

size_t pd_smem_bytes(int batch, int64_t widest_k, int head_dim, int group, int ring_slots) {
  size_t b = 2 * 8 * static_cast<size_t>(ring_slots) + 128;
  b += (2 * kRedFloats + W * kPdMaxBatch) * sizeof(float) + static_cast<size_t>(W) * group * head_dim * sizeof(float);
  b += static_cast<size_t>(batch) * (widest_k + 8) * sizeof(bf16) + 128;
  return b + static_cast<size_t>(ring_slots) * kSlotBytes;
}

int pd_ring_slots(int batch, int64_t widest_k, int head_dim, int group) {
  constexpr size_t kMaxSmem = 227 * 1024;  // sm_90's opt-in limit per block
  int slots = 0;
  while (slots < 32 && pd_smem_bytes(batch, widest_k, head_dim, group, slots + 1) <= kMaxSmem) ++slots;
  return slots >= kPdMinRingSlots ? slots : 0;
}

bool pd_supports(int head_dim, int group) {
  return (head_dim == 128 && (group == 2 || group == 4)) || (head_dim == 64 && group == 4);
}

void launch_persistent_decode(const PdParams& p, int grid, cudaStream_t stream) {
  const int group = p.num_q_heads / p.num_kv_heads;
  const int64_t widest = std::max<int64_t>(p.hidden, std::max<int64_t>(int64_t{p.num_q_heads} * p.head_dim, p.inter));
  const size_t smem = pd_smem_bytes(p.batch, widest, p.head_dim, group, p.ring_slots);
#define MINIVLLM_PD_CASE(HD, G)                    \
  if (p.head_dim == HD && group == G) {            \
    launch<HD, G>(p, grid, smem, stream);          \
    return;                                        \
  }
  MINIVLLM_PD_CASE(128, 2)  // Qwen3-0.6B
  MINIVLLM_PD_CASE(128, 4)  // Qwen3-8B, Llama-3.1-8B
  MINIVLLM_PD_CASE(64, 4)   // Llama-3.2-1B
#undef MINIVLLM_PD_CASE
}

}  // namespace minivllm::cuda
