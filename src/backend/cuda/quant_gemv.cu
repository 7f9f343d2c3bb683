// quant_gemv.h's kernels. A 32-value unit of a weight row decodes to a Unit: its codes as eight
// 4-byte words (byte l of word i is value 4 i + l's code, as small non-negative integers, or
// signed for Q8_0) and, for each 16-value half, value = scale * code + offset. The formulas are
// common/quant_blocks_k.cc's (and the previous correctness-first kernel's, which the H200 checked
// against the CPU backend), element for element.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/norm_row.cuh"
#include "backend/cuda/quant_gemv.h"
#include "backend/cuda/pdl_launch.h"
#include "common/check.h"

namespace minivllm::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;

struct Unit {
  int q[8];
  float scale[2], offset[2];
};

__device__ __forceinline__ float half_bits(unsigned bits) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
}

// Four bytes from a 2-byte-aligned address (Q6_K, Q5_0 and Q8_0 blocks are 210, 22 and 34 bytes:
// only 2-byte alignment holds along a row).
__device__ __forceinline__ uint32_t load_u32_a2(const uint8_t* p) {
  const auto* h = reinterpret_cast<const uint16_t*>(p);
  return static_cast<uint32_t>(h[0]) | (static_cast<uint32_t>(h[1]) << 16);
}

// Unit j's six-bit scale and min from a Q4_K head: byte j % 4 of each of the three scale words,
// then both forms by selects (units 0-3 read six bits of scales[j] and scales[j + 4]; units 4-7
// four bits of scales[j + 4] and the top two bits of scales[j - 4] and scales[j]). No branch (j
// varies across a warp's lanes: a branch ran both sides) and no array indexed by j (local memory).
__device__ __forceinline__ void q4_k_scale_min(const uint4& head, int j, int& sc, int& m) {
  const int sh = 8 * (j & 3);
  const int yb = static_cast<int>((head.y >> sh) & 0xFF), zb = static_cast<int>((head.z >> sh) & 0xFF),
            wb = static_cast<int>((head.w >> sh) & 0xFF);
  const bool high = j >= 4;
  sc = high ? (wb & 15) | ((yb >> 6) << 4) : yb & 63;
  m = high ? (wb >> 4) | ((zb >> 6) << 4) : zb & 63;
}

// Unit j (0..7) of a Q4_K super-block from its 16-byte head (d, dmin, scales[12]) and the unit's 32
// bytes of nibbles (units 2i and 2i + 1 share bytes 32i.., low and high nibbles).
__device__ __forceinline__ Unit unit_q4_k_from(const uint4& head, const uint4& lo, const uint4& hi, int j) {
  int sc, m;
  q4_k_scale_min(head, j, sc, m);
  Unit u;
  const float d = half_bits(head.x & 0xFFFF) * static_cast<float>(sc);
  const float c = -(half_bits(head.x >> 16) * static_cast<float>(m));
  u.scale[0] = u.scale[1] = d;
  u.offset[0] = u.offset[1] = c;
  const uint32_t v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  const int shift = 4 * (j & 1);
#pragma unroll
  for (int i = 0; i < 8; ++i) u.q[i] = static_cast<int>((v[i] >> shift) & 0x0F0F0F0Fu);
  return u;
}

// Unit (n, k) of a Q6_K super-block (elements 128 n + 32 k .. + 31) from its fields: ql[i] and
// qh[i], the 4-byte words i of the 32 bytes holding its low nibbles and its high bits, sc its two
// 16-value group scales, d the block scale.
__device__ __forceinline__ Unit q6_k_unit(const uint32_t (&ql)[8], const uint32_t (&qh)[8], const int8_t* sc, float d,
                                          int k) {
  Unit u;
  const int lshift = k >= 2 ? 4 : 0, hshift = 2 * k;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    u.q[i] = static_cast<int>(((ql[i] >> lshift) & 0x0F0F0F0Fu) | (((qh[i] >> hshift) & 0x03030303u) << 4));
  }
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    u.scale[half] = d * static_cast<float>(sc[half]);
    u.offset[half] = -32.0f * u.scale[half];
  }
  return u;
}

// Bits 0..3 of b to bit 4 of bytes 0..3 (Q5_0's fifth bit).
__device__ __forceinline__ uint32_t spread4(uint32_t b) {
  return ((b & 1u) << 4) | ((b & 2u) << 11) | ((b & 4u) << 18) | ((b & 8u) << 25);
}

__device__ __forceinline__ Unit unit_q5_0(const uint8_t* b) {
  const float d = half_bits(*reinterpret_cast<const uint16_t*>(b));
  const uint32_t qh = load_u32_a2(b + 2);
  Unit u;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t w = load_u32_a2(b + 6 + 4 * i);  // qs[4 i .. 4 i + 3]: elements 4 i.. (low) and 16 + 4 i.. (high)
    u.q[i] = static_cast<int>((w & 0x0F0F0F0Fu) | spread4((qh >> (4 * i)) & 15u));
    u.q[i + 4] = static_cast<int>(((w >> 4) & 0x0F0F0F0Fu) | spread4((qh >> (16 + 4 * i)) & 15u));
  }
  u.scale[0] = u.scale[1] = d;
  u.offset[0] = u.offset[1] = -16.0f * d;
  return u;
}

__device__ __forceinline__ Unit unit_q8_0(const uint8_t* b) {
  Unit u;
  const float d = half_bits(*reinterpret_cast<const uint16_t*>(b));
#pragma unroll
  for (int i = 0; i < 8; ++i) u.q[i] = static_cast<int>(load_u32_a2(b + 2 + 4 * i));
  u.scale[0] = u.scale[1] = d;
  u.offset[0] = u.offset[1] = 0.0f;
  return u;
}

// Unit u (0..k/32) of the row at wr, in two steps: fetch its bytes, then decode them, so that all
// of a unit's loads (and, pipelined, the next unit's) go out before a decode waits on any of them.
// Q4_K's scales sit in the block's head: decoding as loaded waited for the head before the
// nibbles' loads were even issued (PERFORMANCE.md, "The K-quant gemv: loads before decoding").
// Q5_0 and Q8_0 (2-byte-aligned blocks) decode as they load. planar_nsb: a planar Q6_K row's
// super-blocks, else 0.
template <DType T>
struct Fetched {
  Unit u;
  __device__ __forceinline__ void fetch(const uint8_t* wr, int64_t u_index, int64_t) {
    u = T == DType::kQ5_0 ? unit_q5_0(wr + u_index * 22) : unit_q8_0(wr + u_index * 34);
  }
  __device__ __forceinline__ Unit decode(int64_t) const { return u; }
};

template <>
struct Fetched<DType::kQ4_K> {
  uint4 head, lo, hi;
  __device__ __forceinline__ void fetch(const uint8_t* wr, int64_t u, int64_t) {
    const uint8_t* b = wr + (u / 8) * 144;
    head = *reinterpret_cast<const uint4*>(b);
    const uint4* qs = reinterpret_cast<const uint4*>(b + 16 + 32 * ((u % 8) / 2));
    lo = qs[0];
    hi = qs[1];
  }
  __device__ __forceinline__ Unit decode(int64_t u) const { return unit_q4_k_from(head, lo, hi, static_cast<int>(u % 8)); }
};

template <>
struct Fetched<DType::kQ6_K> {
  uint32_t lw[8], hw[8];
  uint32_t sc;  // the unit's two int8 group scales, low half
  unsigned short d;
  __device__ __forceinline__ void fetch(const uint8_t* wr, int64_t u, int64_t nsb) {
    const int64_t sb = u / 8;
    const int unit = static_cast<int>(u % 8), n = unit / 4, k = unit % 4;
    if (nsb > 0) {  // planar rows (quant_gemv.h): aligned 16-byte loads
      const uint4* ql = reinterpret_cast<const uint4*>(wr + sb * 128 + 64 * n + 32 * (k & 1));
      const uint4* qh = reinterpret_cast<const uint4*>(wr + nsb * 128 + sb * 64 + 32 * n);
      const uint4 l0 = ql[0], l1 = ql[1], h0 = qh[0], h1 = qh[1];
      lw[0] = l0.x, lw[1] = l0.y, lw[2] = l0.z, lw[3] = l0.w, lw[4] = l1.x, lw[5] = l1.y, lw[6] = l1.z, lw[7] = l1.w;
      hw[0] = h0.x, hw[1] = h0.y, hw[2] = h0.z, hw[3] = h0.w, hw[4] = h1.x, hw[5] = h1.y, hw[6] = h1.z, hw[7] = h1.w;
      sc = *reinterpret_cast<const unsigned short*>(wr + nsb * 192 + sb * 16 + 8 * n + 2 * k);
      d = reinterpret_cast<const unsigned short*>(wr + nsb * 208)[sb];
    } else {
      const uint8_t* b = wr + sb * 210;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        lw[i] = load_u32_a2(b + 64 * n + 32 * (k & 1) + 4 * i);
        hw[i] = load_u32_a2(b + 128 + 32 * n + 4 * i);
      }
      sc = *reinterpret_cast<const unsigned short*>(b + 192 + 8 * n + 2 * k);
      d = *reinterpret_cast<const unsigned short*>(b + 208);
    }
  }
  __device__ __forceinline__ Unit decode(int64_t u) const {
    const int8_t s[2] = {static_cast<int8_t>(sc & 0xFF), static_cast<int8_t>(sc >> 8)};
    return q6_k_unit(lw, hw, s, half_bits(d), static_cast<int>(u % 4));
  }
};

template <DType T>
__device__ __forceinline__ Unit load_unit(const uint8_t* wr, int64_t u, int64_t planar_nsb) {
  Fetched<T> f;
  f.fetch(wr, u, planar_nsb);
  return f.decode(u);
}

// Byte l of a code word, as the value it stands for (Q8_0's codes are signed).
template <DType T>
__device__ __forceinline__ float code_at(int word, int l) {
  const int byte = (word >> (8 * l)) & 0xFF;
  return static_cast<float>(T == DType::kQ8_0 ? static_cast<int>(static_cast<int8_t>(byte)) : byte);
}

// A value's int8 code in a unit of amax amax (the unit's scale is q8_scale(amax)): the one arithmetic
// of the three x quantizers below, whose codes must be the same bytes.
__device__ __forceinline__ float q8_scale(float amax) { return amax / 127.0f; }
__device__ __forceinline__ int q8_code(float v, float amax) {
  return amax > 0.0f ? __float2int_rn(v / q8_scale(amax)) : 0;
}

// A unit's scale, and (sums set) its scale times the sum of its codes, from the lane `writer`.
__device__ __forceinline__ void store_unit_scale(float* scales, float* sums, int64_t unit, float amax, int code_sum,
                                                 bool writer) {
  if (!writer) return;
  scales[unit] = q8_scale(amax);
  if (sums != nullptr) sums[unit] = q8_scale(amax) * static_cast<float>(code_sum);
}

// One warp per unit of 32 values: codes = round(x / s), s = amax / 127 (a unit's values are then
// s * code; its sum, which the offsets need, comes out of the gemv's dp4a against 1s).
__global__ void quantize_x_q8_kernel(const __nv_bfloat16* __restrict__ x, int64_t units, int8_t* __restrict__ codes,
                                     float* __restrict__ scales, float* __restrict__ sums) {
  pdl_launch_dependents();
  pdl_wait();  // x is the kernel before's output, and the gemv before may still read codes
  const int64_t unit = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (unit >= units) return;
  const int lane = threadIdx.x % 32;
  const float v = __bfloat162float(x[unit * 32 + lane]);
  const float amax = warp_max(fabsf(v));
  const int code = q8_code(v, amax);
  codes[unit * 32 + lane] = static_cast<int8_t>(code);
  store_unit_scale(scales, sums, unit, amax, __reduce_add_sync(0xffffffffu, code), lane == 0);
}

// The amax of a unit whose values kLanes neighbouring lanes hold (lane l's share, amax, in; the
// unit's out, in every one of them).
template <int kLanes>
__device__ __forceinline__ float unit_amax(float amax) {
#pragma unroll
  for (int o = 1; o < kLanes; o <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  return amax;
}

// launch_rms_norm_quantize_x_q8: rms_norm_kernel's row (elementwise.cu: min(256, chunks in whole
// warps) threads a row, the same order of the sum of squares, the same bf16 rounding of the normed
// values), then quantize_x_q8_kernel's codes of those values; the normed row never goes to memory.
// A thread holds its kChunks chunks of eight from the load to the codes; four neighbouring lanes
// hold a 32-value unit (chunks 4u .. 4u + 3), so the unit's amax takes two shuffles.
template <int kChunks>
__global__ void __launch_bounds__(256) rms_norm_q8_kernel(const float* __restrict__ residual, const void* w,
                                                          bool w_f32, float eps, int64_t chunks,
                                                          int8_t* __restrict__ codes, float* __restrict__ scales,
                                                          float* __restrict__ sums) {
  __shared__ float scratch[32];
  pdl_launch_dependents();
  const int64_t row = blockIdx.x;
  float wt[kChunks][8];
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {  // the norm's weights: no earlier kernel writes them
    const int64_t c = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
    if (c < chunks) load_weight8(w, w_f32, c * 8, wt[i]);
  }
  pdl_wait();  // the residual is the kernel before's output, and the gemv before may still read codes
  const float* xr = residual + row * chunks * 8;
  float v[kChunks][8];
  const float inv = load_row_inv_rms<kChunks>(xr, chunks, eps, v, scratch);
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
    float f[8];
    float amax = 0.0f;
    if (c < chunks) {
#pragma unroll
      for (int j = 0; j < 8; ++j) v[i][j] = (v[i][j] * inv) * wt[i][j];
      bf16x8_to_f32(f32_to_bf16x8(v[i]), f);
#pragma unroll
      for (int j = 0; j < 8; ++j) amax = fmaxf(amax, fabsf(f[j]));
    }
    amax = unit_amax<4>(amax);  // every lane: the shuffles need the whole warp
    uint32_t packed[2] = {0, 0};
    int code_sum = 0;
    if (c < chunks) {
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int code = q8_code(f[j], amax);
        code_sum += code;
        packed[j / 4] |= (static_cast<uint32_t>(code) & 0xFFu) << (8 * (j % 4));
      }
    }
#pragma unroll
    for (int o = 1; o < 4; o <<= 1) code_sum += __shfl_xor_sync(0xffffffffu, code_sum, o);  // the unit's four lanes
    if (c >= chunks) continue;
    *reinterpret_cast<uint2*>(codes + (row * chunks + c) * 8) = make_uint2(packed[0], packed[1]);
    store_unit_scale(scales, sums, row * (chunks / 4) + c / 4, amax, code_sum, c % 4 == 0);
  }
}

// launch_act_mul_quantize_x_q8: act_mul_kernel's h = act(gate) * up rounded to bf16 (elementwise.cu),
// then quantize_x_q8_kernel's codes of it, a warp a unit; h never goes to memory.
__global__ void act_mul_q8_kernel(const __nv_bfloat16* __restrict__ gate_up, int64_t inter, int64_t units,
                                  Activation act, int8_t* __restrict__ codes, float* __restrict__ scales,
                                  float* __restrict__ sums) {
  pdl_launch_dependents();
  pdl_wait();  // gate_up is the kernel before's output, and the gemv before may still read codes
  const int64_t unit = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (unit >= units) return;
  const int lane = threadIdx.x % 32;
  const int64_t per_token = inter / 32, t = unit / per_token, col = (unit % per_token) * 32 + lane;
  const float g = __bfloat162float(gate_up[t * 2 * inter + col]);
  const float u = __bfloat162float(gate_up[t * 2 * inter + inter + col]);
  const float v = __bfloat162float(__float2bfloat16(gate_act(g, act) * u));
  const float amax = warp_max(fabsf(v));
  const int code = q8_code(v, amax);
  codes[unit * 32 + lane] = static_cast<int8_t>(code);
  store_unit_scale(scales, sums, unit, amax, __reduce_add_sync(0xffffffffu, code), lane == 0);
}

// A unit's 32 x codes as eight words (16-byte aligned).
__device__ __forceinline__ void load_x_unit(const int8_t* p, int (&x)[8]) {
  const int4* xp = reinterpret_cast<const int4*>(p);
  const int4 a = xp[0], b = xp[1];
  x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
}

// sum over the unit's values of w * (x's code), in units of x's scale: per 16-value half, scale *
// dot(codes, x) + offset * sum(x).
__device__ __forceinline__ float unit_dot(const Unit& wu, const int (&x)[8]) {
  float part = 0.0f;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    int dot = 0, sum = 0;
#pragma unroll
    for (int i = 4 * h; i < 4 * h + 4; ++i) {
      dot = __dp4a(wu.q[i], x[i], dot);
      sum = __dp4a(0x01010101, x[i], sum);
    }
    part += wu.scale[h] * static_cast<float>(dot) + wu.offset[h] * static_cast<float>(sum);
  }
  return part;
}

// dp4a of four unsigned bytes a against four signed bytes b.
__device__ __forceinline__ int dp4a_u8_s8(uint32_t a, int b, int c) {
  int d;
  asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// A Q4_K unit's contribution, unit j of its super-block from its fetched bytes, against x's codes,
// scale xs and scaled sum xsum (QuantX::sums): d sc xs dot(codes, x) - dmin m xsum. Fewer
// instructions than unit_dot: one dot (both halves share a scale), no dp4a for the sum, and a
// high-nibble unit's nibbles masked in place (16 times the codes, exactly: the scale takes 1/16).
__device__ __forceinline__ float q4_k_unit_dot(const uint4& head, const uint4& lo, const uint4& hi, int j,
                                               const int (&x)[8], float xs, float xsum) {
  int sc, m;
  q4_k_scale_min(head, j, sc, m);
  const uint32_t mask = (j & 1) != 0 ? 0xF0F0F0F0u : 0x0F0F0F0Fu;
  const uint32_t v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  int dot = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) dot = dp4a_u8_s8(v[i] & mask, x[i], dot);
  const float d = half_bits(head.x & 0xFFFF) * static_cast<float>(sc) * ((j & 1) != 0 ? 0.0625f : 1.0f);
  return xs * d * static_cast<float>(dot) - half_bits(head.x >> 16) * static_cast<float>(m) * xsum;
}

// A gemv's row result to out (the plain and streamed kernels' epilogue, lane 0 of the row's warp).
__device__ __forceinline__ void store_row(float acc, int64_t o, int64_t row, const void* bias, bool bias_f32,
                                          void* out, bool out_f32, bool add) {
  if (add) {
    static_cast<float*>(out)[o] += acc;
    return;
  }
  if (bias != nullptr) {
    acc += bias_f32 ? static_cast<const float*>(bias)[row]
                    : __bfloat162float(static_cast<const __nv_bfloat16*>(bias)[row]);
  }
  if (out_f32) {
    static_cast<float*>(out)[o] = acc;
  } else {
    static_cast<__nv_bfloat16*>(out)[o] = __float2bfloat16(acc);
  }
}

template <DType T, int NT, bool kPiped>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    quant_gemv_kernel(const uint8_t* __restrict__ w, size_t row_bytes, const int8_t* __restrict__ xq,
                      const float* __restrict__ xs, const void* __restrict__ bias, bool bias_f32,
                      void* __restrict__ out, bool out_f32, bool add, int64_t n, int64_t k, int64_t ldo,
                      int64_t planar_nsb) {
  const int lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= n) return;
  const uint8_t* wr = w + static_cast<size_t>(row) * row_bytes;
  // W does not depend on the kernel before: pull this warp's row into L2 while that kernel
  // finishes (programmatic dependent launch), then wait before reading x or touching out.
  pdl_launch_dependents();
  for (size_t off = static_cast<size_t>(lane) * 128; off < row_bytes; off += 32 * 128) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(wr + off));
  }
  // kPiped: the lane's first unit is loaded before the wait too (W only), and each step loads the
  // next unit before decoding this one, two of a lane's units in flight; it costs registers, so
  // fewer warps an SM (quant_gemv_piped's choice).
  const int64_t units = k / 32;
  Fetched<T> next;
  if (kPiped && lane < units) next.fetch(wr, lane, planar_nsb);
  pdl_wait();
  float acc[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) acc[t] = 0.0f;
  for (int64_t u = lane; u < units; u += 32) {
    Fetched<T> f;
    if constexpr (kPiped) {
      f = next;
      if (u + 32 < units) next.fetch(wr, u + 32, planar_nsb);
    } else {
      f.fetch(wr, u, planar_nsb);
    }
    const Unit wu = f.decode(u);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      int x[8];
      load_x_unit(xq + t * k + u * 32, x);
      acc[t] += xs[t * units + u] * unit_dot(wu, x);  // the unit's x scale
    }
  }
#pragma unroll
  for (int t = 0; t < NT; ++t) acc[t] = warp_sum(acc[t]);
  if (lane != 0) return;
#pragma unroll
  for (int t = 0; t < NT; ++t) store_row(acc[t], t * ldo + row, row, bias, bias_f32, out, out_f32, add);
}

// The streamed gemv (one token; Q4_K, and planar Q6_K): rows split evenly over the warps of a grid
// of CTAs filling every SM (4 of 8 warps at 64 registers), each warp owning whole rows, their
// bytes one contiguous range. A warp walks its rows in segments of kSb super-blocks (16 where a
// row allows, else 8), each brought into shared memory by one bulk copy (four for planar Q6_K,
// whose planes land as a kSb-super-block planar row) on a ring of `stages` buffers: lane 0 refills
// a buffer once the warp has decoded it, so the other stages stay in flight meanwhile, and the first
// ones go out before the PDL wait (W does not depend on the kernel before). Unlike the plain kernel, no lane's loads wait on its decode and
// every request is a whole contiguous range. Its speed follows the warps an SM and the
// instructions a unit, not the stages in flight (PERFORMANCE.md, "The streamed K-quant gemv" and
// "Fewer instructions a Q4_K unit").
constexpr int kStreamWarps = 8;
constexpr int kMaxStreamStages = 8;
constexpr int kStreamSb = 8;  // the least segment, in super-blocks; kSb is 8 or 16 of them

template <DType T, int kSb>
struct StreamSeg;
template <int kSb>
struct StreamSeg<DType::kQ4_K, kSb> {
  static constexpr uint32_t kBytes = kSb * 144;
  static constexpr int64_t kNsb = 0;  // Fetched<Q4_K> reads ggml's blocks
  // kSb super-blocks from sb0 of the row at wr (nsb super-blocks) into dst.
  __device__ static void copy(uint32_t dst, const uint8_t* wr, int64_t sb0, int64_t, uint32_t bar) {
    bulk_copy_to_smem(dst, wr + sb0 * 144, kBytes, bar);
  }
};
template <int kSb>
struct StreamSeg<DType::kQ6_K, kSb> {
  static constexpr uint32_t kBytes = kSb * 210;
  static constexpr int64_t kNsb = kSb;  // the segment is a planar row of kSb super-blocks
  __device__ static void copy(uint32_t dst, const uint8_t* wr, int64_t sb0, int64_t nsb, uint32_t bar) {
    bulk_copy_to_smem(dst, wr + sb0 * 128, kSb * 128, bar);
    bulk_copy_to_smem(dst + kSb * 128, wr + nsb * 128 + sb0 * 64, kSb * 64, bar);
    bulk_copy_to_smem(dst + kSb * 192, wr + nsb * 192 + sb0 * 16, kSb * 16, bar);
    bulk_copy_to_smem(dst + kSb * 208, wr + nsb * 208 + sb0 * 2, kSb * 2, bar);
  }
};

template <DType T, int kSb>
__global__ void __launch_bounds__(32 * kStreamWarps)
    quant_gemv_stream_kernel(const uint8_t* __restrict__ w, size_t row_bytes, const int8_t* __restrict__ xq,
                             const float* __restrict__ xs, const float* __restrict__ xsums,
                             const void* __restrict__ bias, bool bias_f32,
                             void* __restrict__ out, bool out_f32, bool add, int64_t n, int64_t k, int stages) {
  using Seg = StreamSeg<T, kSb>;
  constexpr int kUnits = kSb / 4;  // a lane's units a segment
  extern __shared__ __align__(128) uint8_t stream_smem[];
  pdl_launch_dependents();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kStreamWarps;
  const int64_t gw = static_cast<int64_t>(blockIdx.x) * kStreamWarps + warp;
  const int64_t row0 = gw * n / warps, row1 = (gw + 1) * n / warps;
  const int64_t nsb = k / 256, per_row = nsb / kSb, segs = (row1 - row0) * per_row;
  uint8_t* ring = stream_smem + static_cast<size_t>(warp) * stages * Seg::kBytes;
  const uint32_t bars = smem_addr(stream_smem + static_cast<size_t>(kStreamWarps) * stages * Seg::kBytes) +
                        8u * static_cast<uint32_t>(warp * stages);
  // Cursors, not divisions (a 64-bit division by a runtime value is a long subroutine): the next
  // segment to issue (its row, its place in the row, its buffer) and the one to read.
  const uint8_t* issue_row = w + static_cast<size_t>(row0) * row_bytes;
  int64_t issue_seg = 0, issued = 0;
  int issue_buf = 0;
  auto issue = [&]() {  // lane 0: the next segment into its buffer
    const uint32_t bar = bars + 8u * issue_buf;
    mbar_expect_tx(bar, Seg::kBytes);
    Seg::copy(smem_addr(ring + static_cast<size_t>(issue_buf) * Seg::kBytes), issue_row, issue_seg * kSb, nsb,
              bar);
    ++issued;
    if (++issue_buf == stages) issue_buf = 0;
    if (++issue_seg == per_row) {
      issue_seg = 0;
      issue_row += row_bytes;
    }
  };
  if (lane == 0 && segs > 0) {
    for (int b = 0; b < stages; ++b) mbar_init(bars + 8u * b, 1);
    mbar_init_fence();
    while (issued < stages && issued < segs) issue();
  }
  __syncwarp();
  pdl_wait();  // x is the kernel before's output
  if (segs == 0) return;
  float acc = 0.0f;
  int64_t row = row0, in_row = 0;
  int buf = 0, parity = 0;
  for (int64_t s = 0; s < segs; ++s) {
    const int64_t u0 = in_row * (kSb * 8);  // the segment's first unit in the row
    mbar_wait(bars + 8u * buf, parity);
    const uint8_t* seg = ring + static_cast<size_t>(buf) * Seg::kBytes;
#pragma unroll
    for (int i = 0; i < kUnits; ++i) {
      Fetched<T> f;
      f.fetch(seg, lane + 32 * i, Seg::kNsb);
      int x[8];
      load_x_unit(xq + (u0 + lane + 32 * i) * 32, x);
      if constexpr (T == DType::kQ4_K) {  // the lane's units are all unit lane % 8 of their super-blocks
        acc += q4_k_unit_dot(f.head, f.lo, f.hi, lane & 7, x, xs[u0 + lane + 32 * i], xsums[u0 + lane + 32 * i]);
      } else {
        acc += xs[u0 + lane + 32 * i] * unit_dot(f.decode(lane + 32 * i), x);
      }
    }
    __syncwarp();  // every lane has read the buffer: refill it
    if (lane == 0 && issued < segs) issue();
    if (++buf == stages) {
      buf = 0;
      parity ^= 1;
    }
    if (++in_row == per_row) {
      const float total = warp_sum(acc);
      acc = 0.0f;
      if (lane == 0) store_row(total, row, row, bias, bias_f32, out, out_f32, add);
      in_row = 0;
      ++row;
    }
  }
}

// A unit's 32 values into dst (bf16, or f32 when F32).
template <DType T, bool F32>
__device__ __forceinline__ void store_unit(const Unit& wu, void* dst) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int h = i / 4;
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const float v = wu.scale[h] * code_at<T>(wu.q[i], l) + wu.offset[h];
      if constexpr (F32) {
        static_cast<float*>(dst)[4 * i + l] = v;
      } else {
        static_cast<__nv_bfloat16*>(dst)[4 * i + l] = __float2bfloat16(v);
      }
    }
  }
}

// One thread per unit.
template <DType T>
__global__ void quant_dequantize_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int64_t rows, int64_t k,
                                        int64_t planar_nsb, __nv_bfloat16* __restrict__ out) {
  const int64_t units = k / 32;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * units) return;
  const int64_t row = i / units, u = i % units;
  store_unit<T, false>(load_unit<T>(w + static_cast<size_t>(row) * row_bytes, u, planar_nsb), out + row * k + u * 32);
}

// One CTA per token, a thread per unit.
template <DType T, bool F32>
__global__ void quant_embedding_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int64_t rows,
                                       const int32_t* __restrict__ ids, int64_t vocab_start, int64_t k,
                                       int64_t planar_nsb, void* __restrict__ out) {
  const int64_t t = blockIdx.x, units = k / 32;
  const int64_t local = static_cast<int64_t>(ids[t]) - vocab_start;
  const bool inside = local >= 0 && local < rows;  // another shard's id gives a zero row
  for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
    void* dst = F32 ? static_cast<void*>(static_cast<float*>(out) + t * k + u * 32)
                    : static_cast<void*>(static_cast<__nv_bfloat16*>(out) + t * k + u * 32);
    Unit wu{};
    if (inside) wu = load_unit<T>(w + static_cast<size_t>(local) * row_bytes, u, planar_nsb);
    store_unit<T, F32>(wu, dst);
  }
}

void check_shape(DType wtype, size_t row_bytes, int64_t k, const char* op) {
  MINIVLLM_CHECK(quant_gemv_supports(wtype)) << op << ": no kernel for " << dtype_name(wtype);
  MINIVLLM_CHECK(k > 0 && k % dtype_block(wtype) == 0 && row_bytes >= dtype_nbytes(wtype, k))
      << op << ": rows of " << k << " " << dtype_name(wtype) << " values in " << row_bytes << " bytes";
  MINIVLLM_CHECK(wtype != DType::kQ4_K || row_bytes % 16 == 0) << op << ": Q4_K rows must be 16-byte aligned";
}

// f(std::integral_constant<DType, T>) for the weight's type.
template <typename F>
void by_type(DType wtype, F&& f) {
  switch (wtype) {
    case DType::kQ4_K: f(std::integral_constant<DType, DType::kQ4_K>{}); break;
    case DType::kQ6_K: f(std::integral_constant<DType, DType::kQ6_K>{}); break;
    case DType::kQ5_0: f(std::integral_constant<DType, DType::kQ5_0>{}); break;
    default: f(std::integral_constant<DType, DType::kQ8_0>{}); break;
  }
}

// A planar Q6_K row's super-block count, else 0 (the kernels' planar_nsb).
int64_t planar_nsb(DType wtype, int64_t k) { return wtype == DType::kQ6_K && q6_k_planar(k) ? k / 256 : 0; }

template <DType T, int NT, bool kPiped>
void gemv_launch(const void* w, size_t row_bytes, const QuantX& q, const void* bias, bool bias_f32, void* out,
                 bool out_f32, bool add, int64_t n, int64_t k, int64_t ldo, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((n + kWarpsPerBlock - 1) / kWarpsPerBlock));
  launch_with_pdl(quant_gemv_kernel<T, NT, kPiped>, grid, dim3(32 * kWarpsPerBlock), 0, stream,
                  static_cast<const uint8_t*>(w), row_bytes, static_cast<const int8_t*>(q.codes),
                  static_cast<const float*>(q.scales), bias, bias_f32, out, out_f32, add, n, k, ldo, planar_nsb(T, k));
}

template <DType T, int kSb>
void stream_launch(const void* w, size_t row_bytes, const QuantX& q, const void* bias, bool bias_f32, void* out,
                   bool out_f32, bool add, int64_t n, int64_t k, const QuantGemvPlan& plan, cudaStream_t stream) {
  constexpr auto kKernel = quant_gemv_stream_kernel<T, kSb>;
  constexpr int kBytes = static_cast<int>(StreamSeg<T, kSb>::kBytes) + 8;  // a buffer and its barrier
  const int64_t ctas = std::min<int64_t>(static_cast<int64_t>(plan.num_sms) * plan.ctas_per_sm,
                                         (n + kStreamWarps - 1) / kStreamWarps);
  const int most = kStreamWarps * kMaxStreamStages * kBytes;
  MINIVLLM_CHECK(most <= 227 * 1024) << "quant_gemv: " << most << " bytes of stream buffers";
  allow_dynamic_smem<kKernel>(most);
  int64_t smem = kStreamWarps * plan.stages * kBytes;
  if (plan.spread && ctas < static_cast<int64_t>(plan.num_sms) * plan.ctas_per_sm) {
    // A partial grid (few rows: Llama's Q6_K v projection): shared memory sized so that an SM holds at
    // most ceil(ctas / SMs) of the CTAs; otherwise the block scheduler may stack 4 on one SM and
    // leave others without any (PERFORMANCE.md, "Stop 67").
    constexpr int64_t kSmemPerSm = 228 * 1024;  // sm_90, 1 KB of it reserved per CTA
    const int64_t per = (ctas + plan.num_sms - 1) / plan.num_sms;
    smem = std::min<int64_t>(most, std::max<int64_t>(smem, kSmemPerSm / (per + 1) + 1));
  }
  launch_with_pdl(kKernel, dim3(static_cast<unsigned>(ctas)), dim3(32 * kStreamWarps),
                  static_cast<size_t>(smem), stream, static_cast<const uint8_t*>(w),
                  row_bytes, static_cast<const int8_t*>(q.codes), static_cast<const float*>(q.scales),
                  static_cast<const float*>(q.sums), bias, bias_f32,
                  out, out_f32, add, n, k, plan.stages);
}

template <DType T>
void stream_launch_by_segment(const void* w, size_t row_bytes, const QuantX& q, const void* bias, bool bias_f32,
                              void* out, bool out_f32, bool add, int64_t n, int64_t k, const QuantGemvPlan& plan,
                              cudaStream_t stream) {
  MINIVLLM_CHECK(plan.num_sms > 0 && plan.ctas_per_sm >= 1 && plan.stages >= 1 && plan.stages <= kMaxStreamStages &&
                 (plan.segment_sb == 0 || plan.segment_sb == 8 || plan.segment_sb == 16))
      << "quant_gemv: a streamed plan of " << plan.num_sms << " SMs, " << plan.ctas_per_sm << " CTAs an SM, "
      << plan.stages << " stages, segments of " << plan.segment_sb << " super-blocks";
  const int64_t nsb = k / 256;
  const int sb = plan.segment_sb != 0 ? plan.segment_sb : nsb % 16 == 0 ? 16 : 8;
  MINIVLLM_CHECK(nsb % sb == 0) << "quant_gemv: rows of " << nsb << " super-blocks in segments of " << sb;
  if (sb == 16) {
    stream_launch<T, 16>(w, row_bytes, q, bias, bias_f32, out, out_f32, add, n, k, plan, stream);
  } else {
    stream_launch<T, 8>(w, row_bytes, q, bias, bias_f32, out, out_f32, add, n, k, plan, stream);
  }
}

}  // namespace

bool quant_gemv_streams(DType wtype, int64_t tokens, int64_t k, const void* w, size_t row_bytes) {
  const bool type = wtype == DType::kQ4_K || (wtype == DType::kQ6_K && q6_k_planar(k));
  return type && tokens == 1 && k % (256 * kStreamSb) == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0 &&
         row_bytes % 16 == 0;
}

bool quant_gemv_piped(int64_t tokens, int64_t n, int num_sms) {
  return tokens == 1 && n < 40 * static_cast<int64_t>(num_sms);
}

bool quant_gemv_supports(DType wtype) {
  return wtype == DType::kQ4_K || wtype == DType::kQ6_K || wtype == DType::kQ5_0 || wtype == DType::kQ8_0;
}

bool q6_k_planar(int64_t k) { return k > 0 && k % 256 == 0 && (k / 256) % 8 == 0; }

void pack_q6_k_planar(const void* src, void* dst, int64_t rows, int64_t k) {
  MINIVLLM_CHECK(q6_k_planar(k)) << "pack_q6_k_planar: rows of " << k << " values";
  const int64_t nsb = k / 256;
  const size_t row_bytes = static_cast<size_t>(nsb) * 210;
  for (int64_t r = 0; r < rows; ++r) {
    const auto* in = static_cast<const uint8_t*>(src) + r * row_bytes;
    auto* o = static_cast<uint8_t*>(dst) + r * row_bytes;
    for (int64_t sb = 0; sb < nsb; ++sb) {  // ggml's block: ql[128] qh[64] scales[16] d[2]
      const uint8_t* b = in + sb * 210;
      std::memcpy(o + sb * 128, b, 128);
      std::memcpy(o + nsb * 128 + sb * 64, b + 128, 64);
      std::memcpy(o + nsb * 192 + sb * 16, b + 192, 16);
      std::memcpy(o + nsb * 208 + sb * 2, b + 208, 2);
    }
  }
}

void launch_quantize_x_q8(const void* x, int64_t tokens, int64_t k, const QuantX& q, cudaStream_t stream) {
  MINIVLLM_CHECK(k % 32 == 0 && tokens >= 0) << "quantize_x_q8: k " << k << " must be a multiple of 32";
  const int64_t units = tokens * k / 32;
  if (units == 0) return;
  constexpr int kWarps = 8;
  launch_with_pdl(quantize_x_q8_kernel, dim3(static_cast<unsigned>((units + kWarps - 1) / kWarps)), dim3(32 * kWarps), 0,
                  stream, static_cast<const __nv_bfloat16*>(x), units, q.codes, q.scales, q.sums);
  CUDA_CHECK_LAUNCH();
}

bool launch_rms_norm_quantize_x_q8(const float* residual, const void* norm, bool norm_f32, float eps, int64_t tokens,
                                   int64_t k, const QuantX& q, cudaStream_t stream) {
  if (k % 32 != 0 || k > kQuantNormMaxK || tokens < 0 || tokens >= (int64_t{1} << 31)) return false;
  if (tokens == 0) return true;
  const int64_t chunks = k / 8;
  // rms_norm_kernel's launch: min(256, chunks rounded up to warps) threads, the sum's order with them.
  const int threads = static_cast<int>(std::min<int64_t>(256, (chunks + 31) / 32 * 32));
  const int64_t per_thread = (chunks + threads - 1) / threads;
  const dim3 grid(static_cast<unsigned>(tokens));
  if (per_thread <= 2) {
    launch_with_pdl(rms_norm_q8_kernel<2>, grid, dim3(threads), 0, stream, residual, norm, norm_f32, eps, chunks,
                    q.codes, q.scales, q.sums);
  } else if (per_thread <= 4) {
    launch_with_pdl(rms_norm_q8_kernel<4>, grid, dim3(threads), 0, stream, residual, norm, norm_f32, eps, chunks,
                    q.codes, q.scales, q.sums);
  } else {
    launch_with_pdl(rms_norm_q8_kernel<8>, grid, dim3(threads), 0, stream, residual, norm, norm_f32, eps, chunks,
                    q.codes, q.scales, q.sums);
  }
  CUDA_CHECK_LAUNCH();
  return true;
}

bool launch_act_mul_quantize_x_q8(const void* gate_up, int64_t tokens, int64_t inter, Activation act, const QuantX& q,
                                  cudaStream_t stream) {
  if (inter % 32 != 0 || tokens < 0) return false;
  const int64_t units = tokens * inter / 32;
  if (units == 0) return true;
  constexpr int kWarps = 8;
  launch_with_pdl(act_mul_q8_kernel, dim3(static_cast<unsigned>((units + kWarps - 1) / kWarps)), dim3(32 * kWarps), 0,
                  stream, static_cast<const __nv_bfloat16*>(gate_up), inter, units, act, q.codes, q.scales, q.sums);
  CUDA_CHECK_LAUNCH();
  return true;
}

void launch_quant_gemv(DType wtype, const void* w, size_t row_bytes, const QuantX& q, const void* bias, bool bias_f32,
                       void* out, bool out_f32, QuantGemvOut mode, int64_t tokens, int64_t n, int64_t k, int64_t ldo,
                       cudaStream_t stream, const QuantGemvPlan& plan) {
  check_shape(wtype, row_bytes, k, "quant_gemv");
  MINIVLLM_CHECK(tokens >= 1 && tokens <= kQuantGemvMaxTokens && n > 0 && ldo >= n)
      << "quant_gemv: " << tokens << " tokens (1.." << kQuantGemvMaxTokens << "), " << n << " rows, out rows "
      << ldo << " apart";
  const bool add = mode == QuantGemvOut::kAddF32;
  MINIVLLM_CHECK(!add || (out_f32 && bias == nullptr)) << "quant_gemv: the residual add takes an f32 out, no bias";
  if (plan.kernel == QuantGemvKernel::kStreamed) {
    MINIVLLM_CHECK(wtype != DType::kQ4_K || q.sums != nullptr) << "quant_gemv: the streamed Q4_K gemv needs x's sums";
    MINIVLLM_CHECK(quant_gemv_streams(wtype, tokens, k, w, row_bytes))
        << "quant_gemv: the streamed kernel takes one token of 16-byte-aligned Q4_K or planar Q6_K rows of a "
           "multiple of 2048 values, not "
        << tokens << " tokens of " << dtype_name(wtype) << " rows of " << k;
    if (wtype == DType::kQ4_K) {
      stream_launch_by_segment<DType::kQ4_K>(w, row_bytes, q, bias, bias_f32, out, out_f32, add, n, k, plan, stream);
    } else {
      stream_launch_by_segment<DType::kQ6_K>(w, row_bytes, q, bias, bias_f32, out, out_f32, add, n, k, plan, stream);
    }
    CUDA_CHECK_LAUNCH();
    return;
  }
  const bool piped = plan.kernel == QuantGemvKernel::kPiped;
  by_type(wtype, [&](auto type) {
    constexpr DType T = decltype(type)::value;
    switch (tokens) {
      case 1:
        if (piped) {
          gemv_launch<T, 1, true>(w, row_bytes, q, bias, bias_f32, out, out_f32, add, n, k, ldo, stream);
        } else {
          gemv_launch<T, 1, false>(w, row_bytes, q, bias, bias_f32, out, out_f32, add, n, k, ldo, stream);
        }
        break;
      case 2: gemv_launch<T, 2, false>(w, row_bytes, q, bias, bias_f32, out, out_f32, add, n, k, ldo, stream); break;
      case 3: gemv_launch<T, 3, false>(w, row_bytes, q, bias, bias_f32, out, out_f32, add, n, k, ldo, stream); break;
      case 4: gemv_launch<T, 4, false>(w, row_bytes, q, bias, bias_f32, out, out_f32, add, n, k, ldo, stream); break;
      case 5: gemv_launch<T, 5, false>(w, row_bytes, q, bias, bias_f32, out, out_f32, add, n, k, ldo, stream); break;
      case 6: gemv_launch<T, 6, false>(w, row_bytes, q, bias, bias_f32, out, out_f32, add, n, k, ldo, stream); break;
      case 7: gemv_launch<T, 7, false>(w, row_bytes, q, bias, bias_f32, out, out_f32, add, n, k, ldo, stream); break;
      default: gemv_launch<T, 8, false>(w, row_bytes, q, bias, bias_f32, out, out_f32, add, n, k, ldo, stream); break;
    }
  });
  CUDA_CHECK_LAUNCH();
}

void launch_quant_dequantize_bf16(DType wtype, const void* w, size_t row_bytes, int64_t rows, int64_t k, void* out,
                                  cudaStream_t stream) {
  check_shape(wtype, row_bytes, k, "quant_dequantize_bf16");
  const int64_t units = rows * (k / 32);
  if (units == 0) return;
  constexpr int kThreads = 256;
  const unsigned blocks = static_cast<unsigned>((units + kThreads - 1) / kThreads);
  by_type(wtype, [&](auto type) {
    quant_dequantize_kernel<decltype(type)::value><<<blocks, kThreads, 0, stream>>>(
        static_cast<const uint8_t*>(w), row_bytes, rows, k, planar_nsb(wtype, k), static_cast<__nv_bfloat16*>(out));
  });
  CUDA_CHECK_LAUNCH();
}

void launch_quant_embedding(DType wtype, const void* w, size_t row_bytes, int64_t rows, const int32_t* ids,
                            int64_t tokens, int64_t vocab_start, int64_t k, void* out, bool out_f32,
                            cudaStream_t stream) {
  check_shape(wtype, row_bytes, k, "quant_embedding");
  if (tokens == 0) return;
  const auto* wb = static_cast<const uint8_t*>(w);
  const int64_t nsb = planar_nsb(wtype, k);
  by_type(wtype, [&](auto type) {
    constexpr DType T = decltype(type)::value;
    if (out_f32) {
      quant_embedding_kernel<T, true><<<static_cast<unsigned>(tokens), 128, 0, stream>>>(wb, row_bytes, rows, ids,
                                                                                       vocab_start, k, nsb, out);
    } else {
      quant_embedding_kernel<T, false><<<static_cast<unsigned>(tokens), 128, 0, stream>>>(wb, row_bytes, rows, ids,
                                                                                        vocab_start, k, nsb, out);
    }
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace minivllm::cuda
