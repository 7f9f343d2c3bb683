// quant_gemv_rows.h's kernel. A chunk is what one thread decodes at a time:
//   Q4_K: 16 bytes of one super-block's codes, i.e. half of two 32-value units (the low nibbles
//         are unit 2g's values, the high nibbles unit 2g + 1's), with the block's 16-byte head;
//   Q6_K (planar): 64 values, four 16-value groups of one half super-block, from three aligned
//         16-byte loads (ql twice, qh once) and the group scales.
// The formulas are quant_gemv.cu's units (common/quant_blocks_k.cc), regrouped; the offsets and
// mins multiply x's 16-value sums (QuantX::sums), so a chunk costs one dp4a per 4 values.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/quant_gemv_rows.h"
#include "common/check.h"

namespace minivllm::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;

// W is read once per step (device_utils.cuh's load_streaming keeps it out of L1, so that x, read
// by every CTA, stays there).
__device__ __forceinline__ uint4 load_w(const uint8_t* p) { return load_streaming(reinterpret_cast<const uint4*>(p)); }

__device__ __forceinline__ float half_bits(unsigned bits) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
}

// One token's quantized x: codes [k], unit scales [k / 32], 16-value sums [k / 16].
struct XView {
  const int8_t* codes;
  const float* scales;
  const float* sums;
};

__device__ __forceinline__ int dot4(const uint32_t (&w)[4], const int4& x) {
  int d = __dp4a(static_cast<int>(w[0]), x.x, 0);
  d = __dp4a(static_cast<int>(w[1]), x.y, d);
  d = __dp4a(static_cast<int>(w[2]), x.z, d);
  return __dp4a(static_cast<int>(w[3]), x.w, d);
}

struct Q4K {
  static constexpr int kValues = 32;
  struct Raw {
    uint4 qs, head;
  };
  __device__ static Raw load(const uint8_t* row, int64_t c, int64_t /*nsb*/) {
    const uint8_t* b = row + (c / 8) * 144;
    return Raw{load_w(b + 16 + 16 * (c % 8)), load_w(b)};
  }
  // Unit j's 6-bit scale and min from the head's 12 scale bytes (ggml's get_scale_min_k4).
  __device__ static void scale_min(const uint4& head, int j, int& sc, int& m) {
    const uint32_t words[3] = {head.y, head.z, head.w};
    auto sbyte = [&](int i) { return static_cast<int>((words[i / 4] >> (8 * (i % 4))) & 0xFF); };
    if (j < 4) {
      sc = sbyte(j) & 63;
      m = sbyte(j + 4) & 63;
    } else {
      sc = (sbyte(j + 4) & 15) | ((sbyte(j - 4) >> 6) << 4);
      m = (sbyte(j + 4) >> 4) | ((sbyte(j) >> 6) << 4);
    }
  }
  template <int NT>
  __device__ static void dot(const Raw& r, int64_t c, const XView (&x)[NT], float (&acc)[NT]) {
    const int q = static_cast<int>(c % 8), g = q / 2, h = q % 2;
    int sc0, m0, sc1, m1;
    scale_min(r.head, 2 * g, sc0, m0);
    scale_min(r.head, 2 * g + 1, sc1, m1);
    const float d = half_bits(r.head.x & 0xFFFF), dmin = half_bits(r.head.x >> 16);
    const float a0 = d * static_cast<float>(sc0), a1 = d * static_cast<float>(sc1);
    const float b0 = dmin * static_cast<float>(m0), b1 = dmin * static_cast<float>(m1);
    const uint32_t v[4] = {r.qs.x, r.qs.y, r.qs.z, r.qs.w};
    uint32_t lo[4], hi[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      lo[i] = v[i] & 0x0F0F0F0Fu;
      hi[i] = (v[i] >> 4) & 0x0F0F0F0Fu;
    }
    const int64_t u0 = (c / 8) * 8 + 2 * g;  // the low nibbles' unit; the high ones are u0 + 1
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const int4 x0 = *reinterpret_cast<const int4*>(x[t].codes + u0 * 32 + 16 * h);
      const int4 x1 = *reinterpret_cast<const int4*>(x[t].codes + (u0 + 1) * 32 + 16 * h);
      const float s0 = x[t].scales[u0], s1 = x[t].scales[u0 + 1];
      const float z0 = x[t].sums[2 * u0 + h], z1 = x[t].sums[2 * u0 + 2 + h];
      acc[t] += a0 * s0 * static_cast<float>(dot4(lo, x0)) + a1 * s1 * static_cast<float>(dot4(hi, x1)) -
                (b0 * z0 + b1 * z1);
    }
  }
};

struct Q6KPlanar {
  static constexpr int kValues = 64;
  struct Raw {
    uint4 a, b, h;
    uint2 sc;
    unsigned short d;
  };
  __device__ static Raw load(const uint8_t* row, int64_t c, int64_t nsb) {
    const int64_t sb = c / 4;
    const int n = static_cast<int>(c % 4) / 2, i = static_cast<int>(c % 2);
    const uint8_t* ql = row + sb * 128 + 64 * n + 16 * i;
    Raw r;
    r.a = load_w(ql);
    r.b = load_w(ql + 32);
    r.h = load_w(row + nsb * 128 + sb * 64 + 32 * n + 16 * i);
    r.sc = __ldg(reinterpret_cast<const uint2*>(row + nsb * 192 + sb * 16 + 8 * n));
    r.d = __ldg(reinterpret_cast<const unsigned short*>(row + nsb * 208) + sb);
    return r;
  }
  template <int NT>
  __device__ static void dot(const Raw& r, int64_t c, const XView (&x)[NT], float (&acc)[NT]) {
    const int n = static_cast<int>(c % 4) / 2, i = static_cast<int>(c % 2);
    const float d = half_bits(r.d);
    // Group j's scale: byte i + 2 j of the half's eight.
    float sc[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t word = j < 2 ? r.sc.x : r.sc.y;
      sc[j] = d * static_cast<float>(static_cast<int8_t>((word >> (8 * (i + 2 * (j % 2)))) & 0xFF));
    }
    const uint32_t a[4] = {r.a.x, r.a.y, r.a.z, r.a.w}, b[4] = {r.b.x, r.b.y, r.b.z, r.b.w};
    const uint32_t hb[4] = {r.h.x, r.h.y, r.h.z, r.h.w};
    uint32_t q[4][4];
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      q[0][w] = (a[w] & 0x0F0F0F0Fu) | ((hb[w] & 0x03030303u) << 4);
      q[1][w] = (b[w] & 0x0F0F0F0Fu) | (((hb[w] >> 2) & 0x03030303u) << 4);
      q[2][w] = ((a[w] >> 4) & 0x0F0F0F0Fu) | (((hb[w] >> 4) & 0x03030303u) << 4);
      q[3][w] = ((b[w] >> 4) & 0x0F0F0F0Fu) | (((hb[w] >> 6) & 0x03030303u) << 4);
    }
    const int64_t ub = (c / 4) * 8 + 4 * n;  // group j is unit ub + j, its half i
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      float part = 0.0f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int4 xv = *reinterpret_cast<const int4*>(x[t].codes + (ub + j) * 32 + 16 * i);
        part += sc[j] * (x[t].scales[ub + j] * static_cast<float>(dot4(q[j], xv)) - 32.0f * x[t].sums[2 * (ub + j) + i]);
      }
      acc[t] += part;
    }
  }
};

template <class F, int R, int U, int NT>
__global__ void __launch_bounds__(kThreads)
    quant_gemv_rows_kernel(const uint8_t* __restrict__ w, size_t row_bytes, QuantX q, const void* __restrict__ bias,
                           bool bias_f32, void* __restrict__ out, bool out_f32, bool add, int64_t n, int64_t k,
                           int64_t ldo, int64_t nsb) {
  const int tid = threadIdx.x;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * R;
  const int64_t chunks = k / F::kValues;
  XView x[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) x[t] = XView{q.codes + t * k, q.scales + t * (k / 32), q.sums + t * (k / 16)};
  const uint8_t* rows[R];
#pragma unroll
  for (int r = 0; r < R; ++r) rows[r] = w + static_cast<size_t>(min(row0 + r, n - 1)) * row_bytes;  // past n: reread the last
  float acc[R][NT];
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[r][t] = 0.0f;
  }
  for (int64_t c0 = tid; c0 < chunks; c0 += kThreads * U) {
    typename F::Raw raw[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + u * kThreads;
      if (c < chunks) {
#pragma unroll
        for (int r = 0; r < R; ++r) raw[u][r] = F::load(rows[r], c, nsb);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + u * kThreads;
      if (c < chunks) {
#pragma unroll
        for (int r = 0; r < R; ++r) F::template dot<NT>(raw[u][r], c, x, acc[r]);
      }
    }
  }
  __shared__ float partial[kWarps][R * NT];
  const int lane = tid % 32, warp = tid / 32;
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const float v = warp_sum(acc[r][t]);
      if (lane == 0) partial[warp][r * NT + t] = v;
    }
  }
  __syncthreads();
  if (tid >= R * NT) return;
  const int r = tid / NT, t = tid % NT;
  const int64_t row = row0 + r;
  if (row >= n) return;
  float v = 0.0f;
#pragma unroll
  for (int i = 0; i < kWarps; ++i) v += partial[i][tid];
  const int64_t o = t * ldo + row;
  if (add) {
    static_cast<float*>(out)[o] += v;
    return;
  }
  if (bias != nullptr) {
    v += bias_f32 ? static_cast<const float*>(bias)[row] : __bfloat162float(static_cast<const __nv_bfloat16*>(bias)[row]);
  }
  if (out_f32) {
    static_cast<float*>(out)[o] = v;
  } else {
    static_cast<__nv_bfloat16*>(out)[o] = __float2bfloat16(v);
  }
}

template <class F, int R, int U, int NT>
void launch(const void* w, size_t row_bytes, const QuantX& q, const void* bias, bool bias_f32, void* out, bool out_f32,
            bool add, int64_t n, int64_t k, int64_t ldo, int64_t nsb, cudaStream_t stream) {
  const unsigned grid = static_cast<unsigned>((n + R - 1) / R);
  quant_gemv_rows_kernel<F, R, U, NT><<<grid, kThreads, 0, stream>>>(static_cast<const uint8_t*>(w), row_bytes, q, bias,
                                                                     bias_f32, out, out_f32, add, n, k, ldo, nsb);
}

// One token: the tile (rows, unroll) asked for; more tokens: 2 rows, one chunk in flight each.
template <class F>
bool dispatch(int rows, int unroll, const void* w, size_t row_bytes, const QuantX& q, const void* bias, bool bias_f32,
              void* out, bool out_f32, bool add, int64_t tokens, int64_t n, int64_t k, int64_t ldo, int64_t nsb,
              cudaStream_t stream) {
#define MINIVLLM_QGR(R, U, NT) launch<F, R, U, NT>(w, row_bytes, q, bias, bias_f32, out, out_f32, add, n, k, ldo, nsb, stream)
  if (tokens == 1) {
    const int tile = rows * 10 + unroll;
    switch (tile) {
      case 21: MINIVLLM_QGR(2, 1, 1); break;
      case 22: MINIVLLM_QGR(2, 2, 1); break;
      case 41: MINIVLLM_QGR(4, 1, 1); break;
      case 42: MINIVLLM_QGR(4, 2, 1); break;
      case 81: MINIVLLM_QGR(8, 1, 1); break;
      default: return false;
    }
    return true;
  }
  switch (tokens) {
    case 2: MINIVLLM_QGR(2, 1, 2); break;
    case 3: MINIVLLM_QGR(2, 1, 3); break;
    case 4: MINIVLLM_QGR(2, 1, 4); break;
    case 5: MINIVLLM_QGR(2, 1, 5); break;
    case 6: MINIVLLM_QGR(2, 1, 6); break;
    case 7: MINIVLLM_QGR(2, 1, 7); break;
    case 8: MINIVLLM_QGR(2, 1, 8); break;
    default: return false;
  }
#undef MINIVLLM_QGR
  return true;
}

}  // namespace

bool launch_quant_gemv_rows(DType wtype, const void* w, size_t row_bytes, const QuantX& q, const void* bias,
                            bool bias_f32, void* out, bool out_f32, bool add, int64_t tokens, int64_t n, int64_t k,
                            int64_t ldo, int64_t planar_nsb, int rows, int unroll, cudaStream_t stream) {
  if (q.sums == nullptr || k % 256 != 0) return false;
  bool taken = false;
  if (wtype == DType::kQ4_K) {
    taken = dispatch<Q4K>(rows, unroll, w, row_bytes, q, bias, bias_f32, out, out_f32, add, tokens, n, k, ldo, 0, stream);
  } else if (wtype == DType::kQ6_K && planar_nsb > 0) {
    taken = dispatch<Q6KPlanar>(rows, unroll, w, row_bytes, q, bias, bias_f32, out, out_f32, add, tokens, n, k, ldo,
                                planar_nsb, stream);
  }
  if (taken) CUDA_CHECK_LAUNCH();
  return taken;
}

}  // namespace minivllm::cuda
