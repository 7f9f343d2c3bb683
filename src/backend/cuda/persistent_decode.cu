// The persistent decode kernel (issue 50): every layer of a decode step of 1-8 sequences in one
// launch. One CTA per SM, for the whole step:
// - a producer warp streams the CTA's share of every linear's weights, layer after layer, through
//   a ring of shared-memory tiles (bulk copies completing on mbarriers). Weights depend on nothing
//   the step computes, so it runs ahead across layer boundaries, bounded only by the ring: while
//   the consumers wait at a barrier or attend, the next linears' tiles are already arriving.
// - eight consumer warps walk the step's phases: per layer, the qkv gemv (its input the
//   RMSNormed residual), attention (q/k norms, rope, the new k and v into the paged cache; one CTA
//   per (sequence, kv head), its keys split over the CTA's warps), the o gemv (added into the
//   residual), the gate/up gemv (its activation in the epilogue) and the down gemv (added into the
//   residual). A grid barrier (persistent_schedule.cuh) separates phases that read what others
//   wrote, except qkv and attention: an attention CTA waits only for its heads' qkv tiles.
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
#include "backend/cuda/pdl_launch.h"
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
  int* meta;        // [4][kPdMaxBatch]: each sequence's context length, position and cache slot (a
                    // fourth row keeps q 128-byte aligned)
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
  s.meta = reinterpret_cast<int*>(s.ss + W * kPdMaxBatch);
  s.q = reinterpret_cast<float*>(s.meta + 4 * kPdMaxBatch);
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
// kInFlight loads before it uses any: a loop that waits on each load in turn costs one L2 round
// trip per iteration.
constexpr int kInFlight = 8;

// RMSNorm of every residual row into x (bf16), spread over every consumer thread: each warp's
// share of the rows' sums of squares into s.ss (a warp's 32 float4 lie in one row: hidden is a
// multiple of 128), added in warp order so that the result does not depend on timing; then each
// element scaled.
__device__ void prep_norm(const PdParams& p, const Smem& s, const bf16* w, int ctid) {
  const int q4 = p.hidden / 4, total = p.batch * q4, xs = p.hidden + 8;
  const int warp = ctid >> 5, lane = ctid & 31;
  const float4* res = reinterpret_cast<const float4*>(p.residual);
  if (ctid < W * kPdMaxBatch) s.ss[ctid] = 0.f;
  float4 v[kInFlight];
  const auto load = [&](int base) {
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int i = base + u * kConsumerThreads;
      v[u] = i < total ? __ldcg(res + i) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  };
  // Most shapes fit one round (batch x hidden <= 8,192): the values stay in registers for the
  // second pass, one L2 round trip in all.
  const bool one_round = total <= kConsumerThreads * kInFlight;
  if (one_round) load(ctid);
  named_bar_sync(kBarConsumers, kConsumerThreads);  // s.ss zeroed
  for (int base = ctid; base < total; base += kConsumerThreads * kInFlight) {
    if (!one_round) load(base);
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int i = base + u * kConsumerThreads;  // the same row for the whole warp, or past the end
      const float sq = warp_sum(v[u].x * v[u].x + v[u].y * v[u].y + v[u].z * v[u].z + v[u].w * v[u].w);
      if (lane == 0 && i < total) s.ss[warp * kPdMaxBatch + i / q4] += sq;
    }
  }
  named_bar_sync(kBarConsumers, kConsumerThreads);
  for (int base = ctid; base < total; base += kConsumerThreads * kInFlight) {
    if (!one_round) load(base);
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

// The first element of key j's row (kv head kvh) in a layer's paged cache; table: its sequence's blocks.
template <int HD>
__device__ __forceinline__ int64_t key_row(const PdParams& p, const int32_t* table, int j, int kvh) {
  const int blk = table[j / p.block_size];
  return ((static_cast<int64_t>(blk) * p.num_kv_heads + kvh) * p.block_size + (j % p.block_size)) * HD;
}

// A float4 of shared memory at shared-space address a (ld.shared, not the generic LD that a pointer
// carved from the dynamic shared memory compiles to).
__device__ __forceinline__ float4 lds_f4(uint32_t a) {
  float4 v;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(a));
  return v;
}

__device__ __forceinline__ unsigned long long pd_clock() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Profiling: sub-stamps of one attention item (layer 3, warp 0), in the last 16 trace slots of each
// CTA: 0-7 its parts, 8-10 its first chunk of keys (start, scores done, values added).
__device__ __forceinline__ void pd_sub_mark(const PdParams& p, int layer, int k, int warp, int lane) {
  if (p.trace != nullptr && layer == 3 && warp == 0 && lane == 0) {
    p.trace[static_cast<size_t>(blockIdx.x + 1) * p.trace_events - 16 + k] = pd_clock();
  }
}

// The same once `dep` is computed (and so the loads it needs): a stamp under a branch on dep, never
// taken (slot 15 is otherwise unused), comes first, and volatile asm keeps its order.
__device__ __forceinline__ void pd_sub_mark_after(const PdParams& p, int layer, int k, int warp, int lane,
                                                  float dep) {
  if (dep == 12345.678f) pd_sub_mark(p, layer, 15, warp, lane);
  pd_sub_mark(p, layer, k, warp, lane);
}

// Sequence b's keys for kv head kvh and its GROUP query heads, on every consumer warp of this CTA:
// warp w takes the 32-key chunks w, w + W, ...; lane j scores key j of a chunk (its whole row), then
// every lane adds its HD / 32 dims of the values. The warps' (max, sum, values) meet in shared
// memory (each warp's values over its own queries, which it no longer needs; max and sum in red).
template <int HD, int GROUP>
__device__ void attend(const PdParams& p, const PdLayer& L, const Smem& s, int layer, int b, int kvh, int warp,
                       int lane) {
  constexpr int kDims = HD / 32;  // value dims per lane
  constexpr unsigned kAll = 0xffffffffu;
  const int nq = p.num_q_heads, nkv = p.num_kv_heads;
  const int ctx = s.meta[b], pos = s.meta[kPdMaxBatch + b], slot = s.meta[2 * kPdMaxBatch + b];
  const float* raw = p.qkv + static_cast<int64_t>(b) * (nq + 2 * nkv) * HD;
  const float* cs = p.cos_sin + static_cast<int64_t>(pos) * HD;
  bf16* kc = static_cast<bf16*>(L.k_cache);
  bf16* vc = static_cast<bf16*>(L.v_cache);
  float* qs = s.q + warp * GROUP * HD;
  pd_sub_mark(p, layer, 0, warp, lane);
#pragma unroll
  for (int gq = 0; gq < GROUP; ++gq) {
    rope_head<HD>(raw + (kvh * GROUP + gq) * HD, L.q_norm, p.eps, cs, p.scale, qs + gq * HD, nullptr, lane);
  }
  pd_sub_mark(p, layer, 1, warp, lane);
  // The warp whose chunk holds the new token writes its k and v into the cache first, then reads it
  // back with the other keys (a block-scope fence orders the lanes' stores before their loads).
  if (warp == ((ctx - 1) >> 5) % W && slot >= 0) {
    const int64_t row = kv_cache_row(slot, p.block_size, nkv, kvh) * HD;
    rope_head<HD>(raw + (nq + kvh) * HD, L.k_norm, p.eps, cs, 1.0f, nullptr, kc + row, lane);
    const float* v = raw + (nq + nkv + kvh) * HD;
    for (int d = lane; d < HD; d += 32) vc[row + d] = __float2bfloat16(__ldcg(v + d));
    __threadfence_block();
  }
  __syncwarp();
  pd_sub_mark(p, layer, 2, warp, lane);
  float m[GROUP], l[GROUP], acc[GROUP][kDims];
#pragma unroll
  for (int gq = 0; gq < GROUP; ++gq) {
    m[gq] = -INFINITY;
    l[gq] = 0.f;
#pragma unroll
    for (int d = 0; d < kDims; ++d) acc[gq][d] = 0.f;
  }
  const int32_t* table = p.block_tables + static_cast<int64_t>(b) * p.max_blocks;
  using VPack = typename ValuePack<kDims>::type;
  const uint32_t qs_s = smem_addr(qs);  // shared-space loads: a generic pointer here compiles to LD
  for (int c0 = warp * 32; c0 < ctx; c0 += W * 32) {
    const bool first = c0 == warp * 32;
    if (first) pd_sub_mark(p, layer, 8, warp, lane);
    const int j = c0 + lane, n = min(32, ctx - c0);
    const bool valid = lane < n;
    const int64_t krow = valid ? key_row<HD>(p, table, j, kvh) : 0;
    uint4 k[HD / 8];
#pragma unroll
    for (int i = 0; i < HD / 8; ++i) {
      k[i] = valid ? *reinterpret_cast<const uint4*>(kc + krow + i * 8) : make_uint4(0, 0, 0, 0);
    }
    // The value rows are loaded after the scores, 16 keys at a time: 32 of them held beside the keys
    // (64 + 64 registers at HD 128) spilled to local memory, which the key loop then waited on.
    float sc[GROUP];
#pragma unroll
    for (int gq = 0; gq < GROUP; ++gq) sc[gq] = 0.f;
#pragma unroll
    for (int i = 0; i < HD / 8; ++i) {
      float kf[8];
      bf16x8_to_f32(k[i], kf);
#pragma unroll
      for (int gq = 0; gq < GROUP; ++gq) {
        const float4 qa = lds_f4(qs_s + 4u * (gq * HD + i * 8));
        const float4 qb = lds_f4(qs_s + 4u * (gq * HD + i * 8 + 4));
        sc[gq] += kf[0] * qa.x + kf[1] * qa.y + kf[2] * qa.z + kf[3] * qa.w + kf[4] * qb.x + kf[5] * qb.y +
                  kf[6] * qb.z + kf[7] * qb.w;
      }
    }
    if (first) pd_sub_mark_after(p, layer, 9, warp, lane, sc[0]);  // the key rows loaded and scored
    float p_lane[GROUP];  // each query's weight of this lane's key
#pragma unroll
    for (int gq = 0; gq < GROUP; ++gq) {
      const float sv = valid ? sc[gq] : -INFINITY;
      const float mn = fmaxf(m[gq], warp_max(sv));
      const float corr = __expf(m[gq] - mn);
      const float pr = valid ? __expf(sv - mn) : 0.f;
      l[gq] = l[gq] * corr + warp_sum(pr);
      m[gq] = mn;
#pragma unroll
      for (int d = 0; d < kDims; ++d) acc[gq][d] *= corr;
      p_lane[gq] = pr;
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      // This lane's dims of 16 keys' value rows, packed, all loads issued before any is used.
      VPack vv[16];
#pragma unroll
      for (int jj = 0; jj < 16; ++jj) {
        const int key = 16 * half + jj;
        const int64_t r = __shfl_sync(kAll, krow, key);
        vv[jj] = key < n ? *reinterpret_cast<const VPack*>(vc + r + lane * kDims) : VPack{};
      }
#pragma unroll
      for (int gq = 0; gq < GROUP; ++gq) {
#pragma unroll
        for (int jj = 0; jj < 16; ++jj) {
          const float pj = __shfl_sync(kAll, p_lane[gq], 16 * half + jj);
          float vf[kDims];
          ValuePack<kDims>::unpack(vv[jj], vf);
#pragma unroll
          for (int d = 0; d < kDims; ++d) acc[gq][d] += pj * vf[d];
        }
      }
    }
    if (first) pd_sub_mark_after(p, layer, 10, warp, lane, acc[0][0]);  // the values added
  }
  __syncwarp();
  pd_sub_mark(p, layer, 3, warp, lane);
#pragma unroll
  for (int gq = 0; gq < GROUP; ++gq) {
#pragma unroll
    for (int d = 0; d < kDims; ++d) qs[gq * HD + lane * kDims + d] = acc[gq][d];
    if (lane == 0) {
      s.red[(warp * GROUP + gq) * 2] = m[gq];  // -inf for a warp with no keys: it weighs 0
      s.red[(warp * GROUP + gq) * 2 + 1] = l[gq];
    }
  }
  named_bar_sync(kBarConsumers, kConsumerThreads);
  pd_sub_mark(p, layer, 4, warp, lane);
  bf16* out = static_cast<bf16*>(p.attn_out) + static_cast<int64_t>(b) * nq * HD + kvh * GROUP * HD;
  for (int i = warp * 32 + lane; i < GROUP * HD; i += kConsumerThreads) {
    const int gq = i / HD, d = i - gq * HD;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < W; ++w) mx = fmaxf(mx, s.red[(w * GROUP + gq) * 2]);
    float sum = 0.f, o = 0.f;
#pragma unroll
    for (int w = 0; w < W; ++w) {
      const float e = __expf(s.red[(w * GROUP + gq) * 2] - mx);
      sum += e * s.red[(w * GROUP + gq) * 2 + 1];
      o += e * s.q[(w * GROUP + gq) * HD + d];
    }
    out[i] = __float2bfloat16(o / sum);
  }
  named_bar_sync(kBarConsumers, kConsumerThreads);  // before the next item overwrites qs and red
  pd_sub_mark(p, layer, 5, warp, lane);
}

// The key and value rows of sequence b's kv head kvh that attend() will have this warp read, into
// L2, before the wait for the heads' qkv tiles. Without it each of the key loop's dependent loads
// went to DRAM: ptxas (168 registers) spreads a lane's 16 key-row loads over the scoring, so a
// chunk of 32 keys paid several DRAM round trips in a row (PERFORMANCE.md, "Stop 67").
// The new token's row may be stale here; its write reaches L2 before it is read.
template <int HD>
__device__ __forceinline__ void prefetch_item_rows(const PdParams& p, const PdLayer& L, const Smem& s, int b, int kvh,
                                                   int warp, int lane) {
  constexpr int kLines = HD * static_cast<int>(sizeof(bf16)) / 128;  // 128-byte lines a row
  const int ctx = s.meta[b];
  const int32_t* table = p.block_tables + static_cast<int64_t>(b) * p.max_blocks;
  const bf16* kc = static_cast<const bf16*>(L.k_cache);
  const bf16* vc = static_cast<const bf16*>(L.v_cache);
  for (int j = warp * 32 + lane; j < ctx; j += W * 32) {  // this warp's chunks, a key a lane
    const int64_t row = key_row<HD>(p, table, j, kvh);
#pragma unroll
    for (int i = 0; i < kLines; ++i) {
      asm volatile("prefetch.global.L2 [%0];" ::"l"(kc + row + i * 64));
      asm volatile("prefetch.global.L2 [%0];" ::"l"(vc + row + i * 64));
    }
  }
}

// Every (sequence, kv head) of the batch, one per CTA: each starts once the qkv tiles of its heads
// are in (their CTAs count them in head_ready), not at a grid barrier.
template <int HD, int GROUP>
__device__ void attention_phase(const PdParams& p, const PdLayer& L, const Smem& s, int layer, int warp, int lane) {
  const int nq = p.num_q_heads, nkv = p.num_kv_heads, heads = nq + 2 * nkv;
  const unsigned tiles_per_head = HD / kPdTileRows;
  const unsigned* ready = p.head_ready + static_cast<int64_t>(layer) * heads;
  for (int it = blockIdx.x; it < p.batch * nkv; it += gridDim.x) {
    const int b = it / nkv, kvh = it - b * nkv;
    if (p.prefetch_kv) prefetch_item_rows<HD>(p, L, s, b, kvh, warp, lane);
    pd_sub_mark(p, layer, 7, warp, lane);
    if (warp == 0 && lane < GROUP + 2) {
      const int h = lane < GROUP ? kvh * GROUP + lane : (lane == GROUP ? nq + kvh : nq + nkv + kvh);
      while (pd_load_acquire(ready + h) < tiles_per_head) {
      }
    }
    pd_sub_mark(p, layer, 6, warp, lane);  // (before the wait: slot 7 - 6 is what the wait took)
    named_bar_sync(kBarConsumers, kConsumerThreads);
    attend<HD, GROUP>(p, L, s, layer, b, kvh, warp, lane);
  }
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
  if (threadIdx.x < p.batch) {  // read once: the step's metadata does not change during it
    s.meta[threadIdx.x] = p.context_lens[threadIdx.x];
    s.meta[kPdMaxBatch + threadIdx.x] = p.positions[threadIdx.x];
    s.meta[2 * kPdMaxBatch + threadIdx.x] = p.slot_mapping[threadIdx.x];
  }
  __syncthreads();
  if (warp == W) {
    produce(p, s, lane);
    return;
  }
  const int ctid = threadIdx.x;
  const int heads = p.num_q_heads + 2 * p.num_kv_heads;
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
    // Count this CTA's qkv tiles in their heads' head_ready (release: after every epilogue store).
    named_bar_sync(kBarConsumers, kConsumerThreads);
    if (ctid == 0) {
      int t0, t1;
      pd_tile_range(heads * HD / kPdTileRows, blockIdx.x, gridDim.x, t0, t1);
      constexpr int kTilesPerHead = HD / kPdTileRows;
      for (int t = t0; t < t1;) {
        const int h = t / kTilesPerHead, next = min(t1, (h + 1) * kTilesPerHead);
        unsigned* r = p.head_ready + static_cast<int64_t>(l) * heads + h;
        asm volatile("red.release.gpu.global.add.u32 [%0], %1;\n" ::"l"(r), "r"(next - t) : "memory");
        t = next;
      }
    }
    mark();
    attention_phase<HD, GROUP>(p, L, s, l, warp, lane);
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
  // has passed its own wait (and read its last head_ready) by then, as it counted itself in sync[1]
  // after it.
  named_bar_sync(kBarConsumers, kConsumerThreads);
  if (ctid == 0) {
    __threadfence();
    if (atomicAdd(p.sync + 1, 1u) == grid - 1) {
      for (int i = 0; i < p.num_layers * heads; ++i) p.head_ready[i] = 0;
      p.sync[0] = 0;
      p.sync[1] = 0;
      __threadfence();
    }
  }
}

template <int HD, int GROUP>
void launch(const PdParams& p, int grid, size_t smem, cudaStream_t stream) {
  auto* kernel = persistent_decode_kernel<HD, GROUP>;
  allow_dynamic_smem<persistent_decode_kernel<HD, GROUP>>(static_cast<int>(smem));  // a driver call only when it grows
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
  b += (2 * kRedFloats + (W + 4) * kPdMaxBatch) * sizeof(float) + static_cast<size_t>(W) * group * head_dim * sizeof(float);
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
