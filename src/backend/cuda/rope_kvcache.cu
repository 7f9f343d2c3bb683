// qk_norm_rope (per-head RMSNorm of q and k, then NeoX half-split rotary over the first rotary_dim
// dims of each head, the rest passed through, in place on qkv, and optionally the cache write of k
// and v fused in) and store_kvcache (k and v of each new token into its cache slot).
//
// KV cache layout: [num_blocks, num_kv_heads, block_size, head_dim] bf16, k and v apart. One kv
// head of one block is a contiguous run of block_size * head_dim values, so a decode CTA (one
// sequence, one kv head) streams contiguous memory with 16-byte loads. The fp8 cache has the same
// layout in e4m3 bytes, plus f32 scales [num_blocks, num_kv_heads, block_size] (one per cache row:
// the scale of element offset e is at e / head_dim); a warp quantises one (token, kv head) row of
// k and of v (fp8_kv.cuh), the fused kernel after rope, from the bf16-rounded rotated k. With the
// keys rotated by H (common/fp8.h: kv_rotate_row; the queries with them), from the fp32 rotation,
// as the CPU: less perplexity lost than from its bf16 rounding (PERFORMANCE.md, "Stop 89").
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/fp8_kv.cuh"
#include "backend/cuda/pdl_launch.h"
#include "backend/cuda/rope_math.cuh"
#include "common/tuning.h"

namespace minivllm::cuda {
namespace {

constexpr int kMaxPairsPerLane = 4;  // head_dim <= 256
constexpr int kRopeWarps = 8;        // the warp-per-head kernel's CTA

// One warp per (token, head); lane l owns the slots j = l + 32 k < head_dim / 2 (rope_math.cuh's
// rope_slot: a rotary pair, or two pass-through dims of a partial rotary; head_dim 96: lanes 0..15
// own two slots, the others one).
// Launched with programmatic dependent launch: the position, cos/sin, norm weights and slot are
// loaded while the qkv projection still runs; qkv only after pdl_wait().
// kFp8: the fused store writes an fp8 cache (k_cache and v_cache are e4m3, with scales).
template <bool kFp8>
__global__ void qk_norm_rope_kernel(RopeArgs a) {
  // fp8 with rotation: each warp's rotated head in fp32, from its slots' layout to lane + 32 k.
  __shared__ float stage[kFp8 ? kRopeWarps * 256 : 1];
  pdl_launch_dependents();  // decode attention may start loading its step inputs
  const int warps = blockDim.x >> 5;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * warps + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  const int heads = a.num_q_heads + a.num_kv_heads;
  const int64_t t = item / heads;
  if (t >= a.tokens) return;
  const int h = static_cast<int>(item - t * heads);
  const int half = a.head_dim / 2;  // slots per head
  const bool is_q = h < a.num_q_heads;
  const void* norm = is_q ? a.q_norm : a.k_norm;
  const bool norm_f32 = is_q ? a.q_norm_f32 : a.k_norm_f32;

  // Inputs of the step and weights: no earlier kernel writes them.
  int64_t pos = a.positions[t];
  pos = pos < 0 ? 0 : (pos >= a.max_pos ? a.max_pos - 1 : pos);  // checked on the host side of tests only
  const float* cos = a.cos_sin + pos * a.rotary_dim;
  const float* sin = cos + a.rotary_dim / 2;
  float cs[kMaxPairsPerLane], sn[kMaxPairsPerLane], w1[kMaxPairsPerLane], w2[kMaxPairsPerLane];
#pragma unroll
  for (int k = 0; k < kMaxPairsPerLane; ++k) {
    if (lane + 32 * k < half) {
      const RopeSlot sl = rope_slot(lane + 32 * k, a.head_dim, a.rotary_dim);
      cs[k] = sl.rotary ? cos[sl.lo] : 1.0f;  // pass-through slots: never rotated
      sn[k] = sl.rotary ? sin[sl.lo] : 0.0f;
      w1[k] = norm != nullptr ? load_weight(norm, norm_f32, sl.lo) : 1.0f;
      w2[k] = norm != nullptr ? load_weight(norm, norm_f32, sl.lo + sl.span) : 1.0f;
    }
  }
  int64_t slot = -1;
  if (a.k_cache != nullptr && !is_q) slot = a.slot_mapping[t];
  pdl_wait();

  const int64_t stride = static_cast<int64_t>(a.num_q_heads + 2 * a.num_kv_heads) * a.head_dim;
  __nv_bfloat16* x = static_cast<__nv_bfloat16*>(a.qkv) + t * stride + static_cast<int64_t>(h) * a.head_dim;
  float x1[kMaxPairsPerLane], x2[kMaxPairsPerLane];
  float sum_sq = 0.0f;
#pragma unroll
  for (int k = 0; k < kMaxPairsPerLane; ++k) {
    if (lane + 32 * k < half) {
      const RopeSlot sl = rope_slot(lane + 32 * k, a.head_dim, a.rotary_dim);
      x1[k] = __bfloat162float(x[sl.lo]);
      x2[k] = __bfloat162float(x[sl.lo + sl.span]);
      sum_sq += x1[k] * x1[k] + x2[k] * x2[k];
    }
  }
  if (norm != nullptr) {
    sum_sq = warp_sum(sum_sq);
    const float inv = 1.0f / sqrtf(sum_sq / static_cast<float>(a.head_dim) + a.eps);
#pragma unroll
    for (int k = 0; k < kMaxPairsPerLane; ++k) {
      if (lane + 32 * k < half) {
        x1[k] = (x1[k] * inv) * w1[k];
        x2[k] = (x2[k] * inv) * w2[k];
      }
    }
  }
  // Fused store (qk_norm_rope_store): a k head's warp also writes its rotated k and its v.
  __nv_bfloat16* k_dst = nullptr;
  int64_t cache_row = -1;  // fp8: the (slot, kv head) row, for the scales
  if (slot >= 0 && slot < a.num_slots) {  // -1: padding token (or no cache), rotated but not stored
    const int64_t row = kv_cache_row(slot, a.block_size, a.num_kv_heads, h - a.num_q_heads);
    if constexpr (kFp8) {  // the whole warp: the row's amax is a warp reduction
      cache_row = row;
      quantize_row_e4m3_warp(x + static_cast<int64_t>(a.num_kv_heads) * a.head_dim, a.head_dim,
                             static_cast<uint8_t*>(a.v_cache) + cache_row * a.head_dim,
                             static_cast<float*>(a.v_scale) + cache_row, lane);
    } else {
      const int64_t dst = row * a.head_dim;
      k_dst = static_cast<__nv_bfloat16*>(a.k_cache) + dst;
      const uint4* v_src = reinterpret_cast<const uint4*>(x + static_cast<int64_t>(a.num_kv_heads) * a.head_dim);
      uint4* v_dst = reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(a.v_cache) + dst);
      for (int c = lane; c < a.head_dim / 8; c += 32) v_dst[c] = v_src[c];
    }
  }
  const bool rotate = kFp8 && a.kv_rotate_norm > 0.0f;  // q and k rotated (Backend::store_kvcache)
  float* st = stage + (kFp8 ? (threadIdx.x >> 5) * 256 : 0);
#pragma unroll
  for (int k = 0; k < kMaxPairsPerLane; ++k) {
    if (lane + 32 * k < half) {
      const RopeSlot sl = rope_slot(lane + 32 * k, a.head_dim, a.rotary_dim);
      float rlo = x1[k], rhi = x2[k];
      if (sl.rotary) rotate_pair(x1[k], x2[k], cs[k], sn[k], rlo, rhi);
      if (rotate) {  // written to qkv after the rotation below
        st[sl.lo] = rlo;
        st[sl.lo + sl.span] = rhi;
        continue;
      }
      const __nv_bfloat16 lo = __float2bfloat16(rlo);
      const __nv_bfloat16 hi = __float2bfloat16(rhi);
      if (sl.rotary || norm != nullptr) {  // an unnormed pass-through dim already holds its value
        x[sl.lo] = lo;
        x[sl.lo + sl.span] = hi;
      }
      if constexpr (kFp8) {  // quantised below, from the values qkv now holds
        x1[k] = __bfloat162float(lo);
        x2[k] = __bfloat162float(hi);
      } else if (k_dst != nullptr) {
        k_dst[sl.lo] = lo;
        k_dst[sl.lo + sl.span] = hi;
      }
    }
  }
  if constexpr (kFp8) {
    if (rotate) {  // the fp32 head after rope, rotated; the key quantised from that, as on the CPU
      __syncwarp();  // (other lanes' dims)
      float r[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) r[k] = lane + 32 * k < a.head_dim ? st[lane + 32 * k] : 0.0f;
      kv_rotate_warp(r, a.head_dim, a.kv_rotate_norm, lane);
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        if (lane + 32 * k < a.head_dim) x[lane + 32 * k] = __float2bfloat16(r[k]);
      }
      if (cache_row < 0) return;  // a q head, or a k head not stored
      quantize_regs_e4m3_warp(r, a.head_dim, static_cast<uint8_t*>(a.k_cache) + cache_row * a.head_dim,
                              static_cast<float*>(a.k_scale) + cache_row, lane);
      return;
    }
    if (cache_row < 0) return;  // the same for the whole warp (one token, one head)
    float amax = 0.0f;
#pragma unroll
    for (int k = 0; k < kMaxPairsPerLane; ++k) {
      if (lane + 32 * k < half) amax = fmaxf(amax, fmaxf(fabsf(x1[k]), fabsf(x2[k])));
    }
    amax = warp_max(amax);
    const float mul = e4m3_multiplier_device(amax);
    uint8_t* k8 = static_cast<uint8_t*>(a.k_cache) + cache_row * a.head_dim;
#pragma unroll
    for (int k = 0; k < kMaxPairsPerLane; ++k) {
      if (lane + 32 * k < half) {
        const RopeSlot sl = rope_slot(lane + 32 * k, a.head_dim, a.rotary_dim);
        k8[sl.lo] = f32_to_e4m3_device(__fmul_rn(x1[k], mul));
        k8[sl.lo + sl.span] = f32_to_e4m3_device(__fmul_rn(x2[k], mul));
      }
    }
    if (lane == 0) static_cast<float*>(a.k_scale)[cache_row] = e4m3_scale_device(amax);
  }
}

// The same function over a bf16 cache (or none) with 16-byte accesses, for head_dim and rotary_dim
// multiples of 16: a group of G lanes (G = half / 8 rounded up to a power of two) owns one (token,
// head), lane c of it the 8 slots 8c + j (rope_slot: all 8 rotary pairs (i, i + rotary_dim / 2),
// or all 8 pass-through, each half a 16-byte run). The warp-per-head kernel above moves 2
// bytes per lane per load and runs its whole latency chain (position, cos/sin, x, reduction) for
// 256 bytes of q or k, which left prefill's rope at a fraction of copy bandwidth; here each lane
// keeps two 16-byte x loads, four of cos/sin and its norm weights in flight at once.
// RopeArgs::row_scale: eight values of qkv row t at columns col .. col + 7 as the FP8 store epilogue
// makes them (fp8_quant.cu: fp8_epilogue_finish's kStore arithmetic, then its bf16 rounding).
__device__ __forceinline__ void fp8_store_scale8(const RopeArgs& a, float rs, int64_t col, float (&x)[8]) {
#pragma unroll
  for (int j = 0; j < 8; ++j) x[j] *= rs * a.col_scale[(col + j) * a.col_stride];
  if (a.bias != nullptr) {
    float b[8];
    load_weight8(a.bias, a.bias_f32, col, b);
#pragma unroll
    for (int j = 0; j < 8; ++j) x[j] += b[j];
  }
  bf16x8_to_f32(f32_to_bf16x8(x), x);
}

template <int G, bool kScaled>
__global__ void qk_norm_rope_vec_kernel(RopeArgs a) {
  static_assert(G == 4 || G == 8 || G == 16, "a group is a power-of-two part of a warp (head_dim 64..256)");
  pdl_launch_dependents();
  const int64_t gid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t item = gid / G;
  const int c = static_cast<int>(gid % G);
  // kScaled: the v heads are items too (scaled, written back, into the v cache).
  const int heads = a.num_q_heads + a.num_kv_heads + (kScaled ? a.num_kv_heads : 0);
  const int64_t t = item / heads;
  if (t >= a.tokens) return;  // whole groups: G divides the block
  const int h = static_cast<int>(item - t * heads);
  const int half = a.head_dim / 2;  // slots per head
  const bool active = 8 * c < half;  // head_dim 96: 6 of a group's 8 lanes
  const RopeSlot sl = rope_slot(active ? 8 * c : 0, a.head_dim, a.rotary_dim);
  const int i0 = sl.lo, span = sl.span;
  const bool is_q = h < a.num_q_heads;
  const int64_t stride = static_cast<int64_t>(a.num_q_heads + 2 * a.num_kv_heads) * a.head_dim;
  __nv_bfloat16* x = static_cast<__nv_bfloat16*>(a.qkv) + t * stride + static_cast<int64_t>(h) * a.head_dim;
  if (kScaled && h >= a.num_q_heads + a.num_kv_heads) {  // a v head
    const int64_t slot = a.k_cache != nullptr ? a.slot_mapping[t] : -1;
    pdl_wait();
    if (!active) return;
    float y1[8], y2[8];
    bf16x8_to_f32(*reinterpret_cast<const uint4*>(x + i0), y1);
    bf16x8_to_f32(*reinterpret_cast<const uint4*>(x + i0 + span), y2);
    const float rs = a.row_scale[t];
    fp8_store_scale8(a, rs, static_cast<int64_t>(h) * a.head_dim + i0, y1);
    fp8_store_scale8(a, rs, static_cast<int64_t>(h) * a.head_dim + i0 + span, y2);
    const uint4 lo8 = f32_to_bf16x8(y1), hi8 = f32_to_bf16x8(y2);
    *reinterpret_cast<uint4*>(x + i0) = lo8;
    *reinterpret_cast<uint4*>(x + i0 + span) = hi8;
    if (slot >= 0 && slot < a.num_slots) {
      const int64_t dst =
          kv_cache_row(slot, a.block_size, a.num_kv_heads, h - a.num_q_heads - a.num_kv_heads) * a.head_dim;
      __nv_bfloat16* v_dst = static_cast<__nv_bfloat16*>(a.v_cache) + dst;
      *reinterpret_cast<uint4*>(v_dst + i0) = lo8;
      *reinterpret_cast<uint4*>(v_dst + i0 + span) = hi8;
    }
    return;
  }
  const void* norm = is_q ? a.q_norm : a.k_norm;
  const bool norm_f32 = is_q ? a.q_norm_f32 : a.k_norm_f32;
  const unsigned lane = threadIdx.x & 31;
  const unsigned group_mask = ((1u << G) - 1) << (lane & ~(G - 1));

  // Inputs of the step and weights: no earlier kernel writes them.
  int64_t pos = a.positions[t];
  pos = pos < 0 ? 0 : (pos >= a.max_pos ? a.max_pos - 1 : pos);
  float cs[8], sn[8], w1[8], w2[8];
  if (sl.rotary) {  // its cos / sin columns are its dims i0 .. i0 + 7
    load_f32x8(a.cos_sin + pos * a.rotary_dim + i0, cs);
    load_f32x8(a.cos_sin + pos * a.rotary_dim + a.rotary_dim / 2 + i0, sn);
  } else {  // pass-through: never rotated
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      cs[j] = 1.0f;
      sn[j] = 0.0f;
    }
  }
  if (norm != nullptr) {
    load_weight8(norm, norm_f32, i0, w1);
    load_weight8(norm, norm_f32, i0 + span, w2);
  }
  int64_t slot = -1;
  if (a.k_cache != nullptr && !is_q) slot = a.slot_mapping[t];
  pdl_wait();

  float x1[8], x2[8];
  bf16x8_to_f32(*reinterpret_cast<const uint4*>(x + i0), x1);
  bf16x8_to_f32(*reinterpret_cast<const uint4*>(x + i0 + span), x2);
  constexpr bool scaled = kScaled;  // a.row_scale set (a template argument: the plain kernel keeps its registers)
  if (scaled && active) {
    const float rs = a.row_scale[t];
    const int64_t col = static_cast<int64_t>(h) * a.head_dim;
    fp8_store_scale8(a, rs, col + i0, x1);
    fp8_store_scale8(a, rs, col + i0 + span, x2);
  }
  if (norm != nullptr) {
    float sum_sq = 0.0f;
    if (active) {
#pragma unroll
      for (int j = 0; j < 8; ++j) sum_sq += x1[j] * x1[j] + x2[j] * x2[j];
    }
#pragma unroll
    for (int o = G / 2; o > 0; o >>= 1) sum_sq += __shfl_xor_sync(group_mask, sum_sq, o);
    const float inv = 1.0f / sqrtf(sum_sq / static_cast<float>(a.head_dim) + a.eps);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      x1[j] = (x1[j] * inv) * w1[j];
      x2[j] = (x2[j] * inv) * w2[j];
    }
  }
  if (!active) return;
  float lo[8], hi[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    if (sl.rotary) {
      rotate_pair(x1[j], x2[j], cs[j], sn[j], lo[j], hi[j]);
    } else {
      lo[j] = x1[j];
      hi[j] = x2[j];
    }
  }
  const uint4 lo8 = f32_to_bf16x8(lo), hi8 = f32_to_bf16x8(hi);
  if (sl.rotary || norm != nullptr || scaled) {  // an unnormed, unscaled pass-through run already holds its values
    *reinterpret_cast<uint4*>(x + i0) = lo8;
    *reinterpret_cast<uint4*>(x + i0 + span) = hi8;
  }
  if (slot >= 0 && slot < a.num_slots) {  // -1: padding token (or no cache), rotated but not stored
    const int64_t dst = kv_cache_row(slot, a.block_size, a.num_kv_heads, h - a.num_q_heads) * a.head_dim;
    __nv_bfloat16* k_dst = static_cast<__nv_bfloat16*>(a.k_cache) + dst;
    __nv_bfloat16* v_dst = static_cast<__nv_bfloat16*>(a.v_cache) + dst;
    const __nv_bfloat16* v_src = x + static_cast<int64_t>(a.num_kv_heads) * a.head_dim;
    *reinterpret_cast<uint4*>(k_dst + i0) = lo8;
    *reinterpret_cast<uint4*>(k_dst + i0 + span) = hi8;
    if (!scaled) {  // (scaled: the v heads' own items store them)
      *reinterpret_cast<uint4*>(v_dst + i0) = *reinterpret_cast<const uint4*>(v_src + i0);
      *reinterpret_cast<uint4*>(v_dst + i0 + span) = *reinterpret_cast<const uint4*>(v_src + i0 + span);
    }
  }
}

// One thread per 16-byte chunk of one token's k (and the matching chunk of its v).
__global__ void store_kvcache_kernel(const uint4* qkv, int64_t tokens, int nq, int nkv, int chunks_per_head,
                                     const int32_t* slot_mapping, int64_t num_slots, int block_size,
                                     uint4* k_cache, uint4* v_cache) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t per_token = static_cast<int64_t>(nkv) * chunks_per_head;
  const int64_t t = idx / per_token;
  if (t >= tokens) return;
  const int64_t slot = slot_mapping[t];
  if (slot < 0 || slot >= num_slots) return;  // -1: padding token, nothing to store
  const int64_t rem = idx - t * per_token;
  const int64_t h = rem / chunks_per_head;
  const int64_t c = rem - h * chunks_per_head;
  const int64_t stride = static_cast<int64_t>(nq + 2 * nkv) * chunks_per_head;
  const uint4* k = qkv + t * stride + (nq + h) * chunks_per_head + c;
  const int64_t dst = kv_cache_row(slot, block_size, nkv, static_cast<int>(h)) * chunks_per_head + c;
  k_cache[dst] = k[0];
  v_cache[dst] = k[per_token];
}

// fp8 cache: one warp per (token, kv head) quantises its k row and its v row. rotate_norm > 0:
// the k row rotated first (kv_rotate_warp), and the kv head's q heads rotated in qkv, k too
// (Backend::store_kvcache), padding tokens included.
__global__ void store_kvcache_fp8_kernel(__nv_bfloat16* qkv, int64_t tokens, int nq, int nkv, int head_dim,
                                         const int32_t* slot_mapping, int64_t num_slots, int block_size,
                                         uint8_t* k_cache, uint8_t* v_cache, float* k_scale, float* v_scale,
                                         float rotate_norm) {
  const int warps = blockDim.x >> 5;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * warps + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  const int64_t t = item / nkv;
  if (t >= tokens) return;
  const int h = static_cast<int>(item - t * nkv);
  const int64_t slot = slot_mapping[t];
  const bool store = slot >= 0 && slot < num_slots;  // -1: padding token, nothing to store
  __nv_bfloat16* x = qkv + t * static_cast<int64_t>(nq + 2 * nkv) * head_dim;
  __nv_bfloat16* k = x + static_cast<int64_t>(nq + h) * head_dim;
  const int64_t row = store ? kv_cache_row(slot, block_size, nkv, h) : 0;
  if (rotate_norm > 0.0f) {
    const int group = nq / nkv;
    float r[8];
    for (int g = 0; g < group; ++g) kv_rotate_head_warp(x + static_cast<int64_t>(h * group + g) * head_dim, head_dim,
                                                        rotate_norm, r, lane);
    // The key quantised from its fp32 rotation, as the CPU backend's from its f32 one.
    kv_rotate_head_warp(k, head_dim, rotate_norm, r, lane);
    if (store) quantize_regs_e4m3_warp(r, head_dim, k_cache + row * head_dim, k_scale + row, lane);
  } else if (store) {
    quantize_row_e4m3_warp(k, head_dim, k_cache + row * head_dim, k_scale + row, lane);
  }
  if (!store) return;
  quantize_row_e4m3_warp(k + static_cast<int64_t>(nkv) * head_dim, head_dim, v_cache + row * head_dim, v_scale + row,
                         lane);
}

}  // namespace

namespace {

// The 16-byte kernel's conditions.
bool rope_vec_takes(const RopeArgs& a) {
  const bool fp8 = a.kv_fp8 && a.k_cache != nullptr;
  // MINIVLLM_ROPE_VEC=0: the warp-per-head kernel everywhere (A/B measurements).
  static const bool vec = knob_flag("MINIVLLM_ROPE_VEC");
  // 16-byte accesses need 16-byte aligned rows: views at odd offsets take the warp kernel.
  auto a16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool aligned = a16(a.qkv) && a16(a.cos_sin) && a16(a.q_norm) && a16(a.k_norm) && a16(a.k_cache) &&
                       a16(a.v_cache);
  // Both widths multiples of 16: a lane's 8 slots are all rotary or all pass-through, each half a
  // 16-byte run (rope_slot), and its cos / sin loads 16-byte aligned.
  return vec && aligned && !fp8 && a.head_dim % 16 == 0 && a.head_dim <= 256 && a.rotary_dim % 16 == 0;
}

}  // namespace

bool qk_norm_rope_takes_scales(const RopeArgs& a) { return rope_vec_takes(a); }

void launch_qk_norm_rope(const RopeArgs& a, cudaStream_t stream) {
  const int64_t items = a.tokens * (a.num_q_heads + a.num_kv_heads);
  if (items == 0) return;
  const bool fp8 = a.kv_fp8 && a.k_cache != nullptr;
  MINIVLLM_CHECK(a.row_scale == nullptr || rope_vec_takes(a))
      << "qk_norm_rope: an FP8 product's scales need the 16-byte kernel (qk_norm_rope_takes_scales)";
  if (rope_vec_takes(a)) {
    const int64_t vec_items = a.row_scale != nullptr ? a.tokens * (a.num_q_heads + 2 * a.num_kv_heads) : items;
    const int half_chunks = a.head_dim / 16;  // 16-byte chunks in each half of a head
    const int g = half_chunks <= 4 ? 4 : (half_chunks <= 8 ? 8 : 16);
    const dim3 grid(static_cast<unsigned>(ceil_div(vec_items * g, 256)));
    const auto launch = [&](auto kernel) { launch_with_pdl(kernel, grid, dim3(256), 0, stream, a); };
    if (a.row_scale != nullptr) {
      if (g == 4) launch(qk_norm_rope_vec_kernel<4, true>);
      if (g == 8) launch(qk_norm_rope_vec_kernel<8, true>);
      if (g == 16) launch(qk_norm_rope_vec_kernel<16, true>);
    } else {
      if (g == 4) launch(qk_norm_rope_vec_kernel<4, false>);
      if (g == 8) launch(qk_norm_rope_vec_kernel<8, false>);
      if (g == 16) launch(qk_norm_rope_vec_kernel<16, false>);
    }
    return;
  }
  const dim3 grid(static_cast<unsigned>(ceil_div(items, kRopeWarps)));
  if (fp8) {
    launch_with_pdl(qk_norm_rope_kernel<true>, grid, dim3(kRopeWarps * 32), 0, stream, a);
  } else {
    launch_with_pdl(qk_norm_rope_kernel<false>, grid, dim3(kRopeWarps * 32), 0, stream, a);
  }
}

void launch_store_kvcache_fp8(void* qkv, int64_t tokens, int num_q_heads, int num_kv_heads, int head_dim,
                              const int32_t* slot_mapping, int64_t num_slots, int block_size, void* k_cache,
                              void* v_cache, float* k_scale, float* v_scale, float rotate_norm, cudaStream_t stream) {
  const int64_t items = tokens * num_kv_heads;
  if (items == 0) return;
  constexpr int kWarps = 8;
  store_kvcache_fp8_kernel<<<static_cast<unsigned>(ceil_div(items, kWarps)), kWarps * 32, 0, stream>>>(
      static_cast<__nv_bfloat16*>(qkv), tokens, num_q_heads, num_kv_heads, head_dim, slot_mapping, num_slots,
      block_size, static_cast<uint8_t*>(k_cache), static_cast<uint8_t*>(v_cache), k_scale, v_scale, rotate_norm);
  CUDA_CHECK_LAUNCH();
}

void launch_store_kvcache(const void* qkv, int64_t tokens, int num_q_heads, int num_kv_heads, int head_dim,
                          const int32_t* slot_mapping, int64_t num_slots, int block_size, void* k_cache,
                          void* v_cache, cudaStream_t stream) {
  const int chunks = head_dim / 8;
  const int64_t total = tokens * num_kv_heads * chunks;
  if (total == 0) return;
  store_kvcache_kernel<<<static_cast<unsigned>(ceil_div(total, 256)), 256, 0, stream>>>(
      static_cast<const uint4*>(qkv), tokens, num_q_heads, num_kv_heads, chunks, slot_mapping, num_slots, block_size,
      static_cast<uint4*>(k_cache), static_cast<uint4*>(v_cache));
  CUDA_CHECK_LAUNCH();
}

}  // namespace minivllm::cuda
