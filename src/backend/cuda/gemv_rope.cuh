// The decode gemv's rope epilogue (gemv.cu's kRope): a CTA owns rotary pairs of
// qkv's rows, rotates each pair's two sums and stores them, k and v also into the bf16 cache; the
// rope kernel's launch, wait and round trip through qkv are gone.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/rope_math.cuh"

namespace minivllm::cuda {
namespace {

// kRope. Pair P of the projection's n / 2 pairs of rows: head P / half, slot j = P % half of it
// (rope_math.cuh's rope_slot: a rotary pair, or, past rotary_dim / 2, two pass-through rows of a
// partial rotary); its rows are head * head_dim + lo and + span (v heads pair the same way,
// unrotated). Pairs past the end reread the last one.
__device__ __forceinline__ int64_t rope_pair_row(const RopeArgs& a, int64_t pair, int upper, int64_t n) {
  const int half = a.head_dim / 2;
  const int64_t last = n / 2 - 1;
  if (pair > last) pair = last;
  const int64_t head = pair / half;
  const RopeSlot sl = rope_slot(static_cast<int>(pair - head * half), a.head_dim, a.rotary_dim);
  return head * a.head_dim + sl.lo + (upper ? sl.span : 0);
}

// The slot of a pair's lower row (its offset in the head: lo < rotary_dim / 2 for a rotary pair,
// rotary_dim <= lo for pass-through rows).
__device__ __forceinline__ RopeSlot rope_slot_of_row(const RopeArgs& a, int64_t row) {
  const int i = static_cast<int>(row % a.head_dim), rhalf = a.rotary_dim / 2;
  return i < rhalf ? RopeSlot{i, rhalf, true} : RopeSlot{i, (a.head_dim - a.rotary_dim) / 2, false};
}

struct RopeLane {
  float cos, sin;
  int64_t slot;  // -1: no cache write (padding token, or no cache)
};

// What the epilogue thread of token m and the pair whose lower row is `row` needs of the step's
// inputs: no kernel of the step writes them, so they are read before the PDL wait.
__device__ __forceinline__ RopeLane rope_lane(const RopeArgs& a, int m, int64_t row) {
  RopeLane l;
  int64_t pos = a.positions[m];
  pos = pos < 0 ? 0 : (pos >= a.max_pos ? a.max_pos - 1 : pos);
  const RopeSlot sl = rope_slot_of_row(a, row);
  l.cos = sl.rotary ? a.cos_sin[pos * a.rotary_dim + sl.lo] : 1.0f;  // pass-through rows: never rotated
  l.sin = sl.rotary ? a.cos_sin[pos * a.rotary_dim + a.rotary_dim / 2 + sl.lo] : 0.0f;
  l.slot = -1;
  if (a.k_cache != nullptr) {
    const int64_t s = a.slot_mapping[m];
    l.slot = s >= 0 && s < a.num_slots ? s : -1;
  }
  return l;
}

// Writes token m's pair (row, row + span) of qkv: q and k rotated from their bf16-rounded values
// (as the rope kernel reads them back from qkv) where the pair is a rotary one, v and pass-through
// rows as they are; k and v also into the cache at the slot.
__device__ __forceinline__ void rope_store_pair(const RopeArgs& a, const void* bias, bool bias_f32, void* qkv, int64_t n,
                                                int m, int64_t row, float lo, float hi, const RopeLane& l) {
  const RopeSlot sl = rope_slot_of_row(a, row);
  const int span = sl.span;  // the partner row's distance
  if (bias != nullptr) {
    lo += load_weight(bias, bias_f32, row);
    hi += load_weight(bias, bias_f32, row + span);
  }
  const int head = static_cast<int>(row / a.head_dim), i = sl.lo;
  const bool is_v = head >= a.num_q_heads + a.num_kv_heads;
  __nv_bfloat16 blo = __float2bfloat16(lo), bhi = __float2bfloat16(hi);
  if (!is_v && sl.rotary) {
    rotate_pair(__bfloat162float(blo), __bfloat162float(bhi), l.cos, l.sin, lo, hi);
    blo = __float2bfloat16(lo);
    bhi = __float2bfloat16(hi);
  }
  __nv_bfloat16* out = static_cast<__nv_bfloat16*>(qkv) + m * n;
  out[row] = blo;
  out[row + span] = bhi;
  if (head >= a.num_q_heads && l.slot >= 0) {
    const int kvh = head - a.num_q_heads - (is_v ? a.num_kv_heads : 0);
    __nv_bfloat16* dst = static_cast<__nv_bfloat16*>(is_v ? a.v_cache : a.k_cache) +
                         kv_cache_row(l.slot, a.block_size, a.num_kv_heads, kvh) * a.head_dim + i;
    dst[0] = blo;
    dst[span] = bhi;
  }
}

}  // namespace
}  // namespace minivllm::cuda
