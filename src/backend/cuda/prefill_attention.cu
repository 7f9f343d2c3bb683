// Prefill attention: varlen, causal, paged, on the tensor cores (mma.sync m16n8k16 bf16 -> fp32),
// flash-attention-2 style. launch_prefill_attention (the end of this file) sends bf16 keys at
// head_dim 64 / 128 on Hopper to the wgmma kernel instead (prefill_policy.h); this one takes the rest.
//
// Grid (query tiles of 64 rows, sequences, q heads), 4 warps; each warp owns 16 query rows. The
// query rows of a sequence are the LAST len_q positions of its len_k keys (cached prefix first),
// so row r may see keys [0, len_k - len_q + r]. Keys and values are read through the block table
// (or straight from qkv when there is no cache yet) in tiles of 64 keys, with cp.async into a
// double-buffered, XOR-swizzled shared memory (ldmatrix reads are bank-conflict free). S = Q K^T
// stays in registers, the online softmax runs in fp32 (exp2 with the scale folded in), and P is
// re-packed as bf16 A fragments for O += P V. A sliding window starts the key loop at the tile of
// the CTA's first row's first key (tiles before it are never loaded; keys of that tile before it
// load as zeros) and masks the keys before each row's window; a row may then see no key in a
// tile, so its max is kept -inf-safe.
//
// head_dim 64 and 128 are the target models'. 96 keeps its shared-memory rows 128 wide (the XOR
// swizzle permutes 8 chunks of 16 bytes); 256 takes 32-key tiles, so that S, P and the 16 x 256
// output of a warp fit the registers and K, V double-buffered fit the shared memory (96 KB).
//
// FP8 cache (kFp8): K and V tiles are loaded as 8-byte e4m3 words with their rows' scales,
// dequantised in registers and stored to the same swizzled bf16 tiles, so the mma code is the
// bf16 kernel's. These loads are synchronous (cp.async cannot convert); the next tile is still
// loaded before the current one is used, into the other stage. No bf16 copy of the cache exists.
#include <cfloat>

#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/pdl_launch.h"
#include "backend/cuda/fp8_kv.cuh"
#include "backend/cuda/mma_sync.cuh"
#include "backend/cuda/prefill_policy.h"
#include "backend/cuda/prefill_span.cuh"
#include "common/tuning.h"

namespace minivllm::cuda {
namespace {

constexpr int kBlockM = 64;
constexpr int kThreads = 128;
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ void ldmatrix_x4(uint32_t* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

// Element offset of 16-byte chunk `chunk` of `row` in a [rows][kRowElems] swizzled tile.
template <int kRowElems>
__device__ __forceinline__ int swz(int row, int chunk) {
  return row * kRowElems + ((chunk ^ (row & 7)) << 3);
}

template <int kHeadDim>
struct PrefillTile {
  static_assert(kHeadDim % 16 == 0 && kHeadDim <= 256, "head_dim: whole mma k-steps");
  static constexpr int kChunks = kHeadDim / 8;
  static constexpr int kRowElems = (kHeadDim + 63) / 64 * 64;  // a multiple of 8 chunks (the swizzle)
  static constexpr int kBlockN = kHeadDim > 128 ? 32 : 64;       // keys per tile
  static constexpr bool kQInRegs = kHeadDim <= 128;  // else Q's fragments are re-read from smem per tile
  static constexpr int kTileElems = kBlockN * kRowElems;
  static constexpr int kSmemBytes = (kBlockM * kRowElems + 4 * kTileElems) * 2;  // Q, K x2, V x2
};

// One 16-byte chunk (8 values) of an fp8 cache row, dequantised and rounded to bf16 (zeros when !ok).
__device__ __forceinline__ uint4 load_fp8_chunk(const void* cache, const float* scales, int64_t row, int head_dim,
                                                int chunk, bool ok) {
  if (!ok) return make_uint4(0, 0, 0, 0);
  const uint2 raw = *reinterpret_cast<const uint2*>(static_cast<const uint8_t*>(cache) + row * head_dim + chunk * 8);
  const float scale = scales[row];
  float f[8];
  fp8x8_to_f32(raw, f);
#pragma unroll
  for (int i = 0; i < 8; ++i) f[i] *= scale;
  return f32_to_bf16x8(f);
}

// kCap: Gemma 2's soft-capped scores (AttentionArgs::softcap), a separate instance so that the
// other models' kernel is unchanged.
template <int kHeadDim, bool kFp8, bool kCap>
__global__ __launch_bounds__(kThreads) void prefill_kernel(AttentionArgs a) {
  using T = PrefillTile<kHeadDim>;
  constexpr int kChunks = T::kChunks;
  constexpr int kBlockN = T::kBlockN;
  constexpr int kRow = T::kRowElems;
  extern __shared__ __align__(128) __nv_bfloat16 smem[];
  __nv_bfloat16* sq = smem;
  __nv_bfloat16* sk = sq + kBlockM * kRow;         // [2][kBlockN][kRow]
  __nv_bfloat16* sv = sk + 2 * T::kTileElems;       // [2][kBlockN][kRow]

  const int tile = blockIdx.x;
  const int seq = blockIdx.y;
  const int h = blockIdx.z;
  const PrefillSpan span = prefill_span(a, seq, h, tile, kBlockM);
  if (span.q0 >= span.len_q) return;
  const int q_begin = span.q_begin, len_q = span.len_q, len_k = span.len_k, q0 = span.q0, kvh = span.kvh;
  const int offset = span.offset, n_keys = span.n_keys;
  const int n_tiles = (n_keys + kBlockN - 1) / kBlockN;
  const int kt0 = span.first_key / kBlockN;  // the first tile with a key some row sees
  const int window = a.window;

  const int64_t qkv_stride = static_cast<int64_t>(a.num_q_heads + 2 * a.num_kv_heads) * kHeadDim;
  const __nv_bfloat16* qkv = static_cast<const __nv_bfloat16*>(a.qkv);
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;

  // Q tile (rows past len_q are zero and never written back).
  for (int idx = tid; idx < kBlockM * kChunks; idx += kThreads) {
    const int r = idx / kChunks, c = idx % kChunks;
    const bool ok = q0 + r < len_q;
    const __nv_bfloat16* src = qkv + (ok ? (q_begin + q0 + r) * qkv_stride + h * kHeadDim + c * 8 : 0);
    cp_async16(sq + swz<kRow>(r, c), src, ok ? 16 : 0);
  }

  const int32_t* table = a.k_cache != nullptr ? a.block_tables + static_cast<int64_t>(seq) * a.table_cols : nullptr;
  const int bs_mask = (1 << a.block_size_log2) - 1;
  auto load_kv = [&](int stage, int kt) {
    __nv_bfloat16* dk = sk + stage * T::kTileElems;
    __nv_bfloat16* dv = sv + stage * T::kTileElems;
    for (int idx = tid; idx < kBlockN * kChunks; idx += kThreads) {
      const int r = idx / kChunks, c = idx % kChunks;
      const int j = kt * kBlockN + r;
      // Keys before the window are zeros, never read: their block may be stale (freed).
      const bool ok = j < n_keys && j >= span.first_key;
      if constexpr (kFp8) {
        if (table != nullptr) {
          const int64_t row = ok ? ((static_cast<int64_t>(table[j >> a.block_size_log2]) * a.num_kv_heads + kvh)
                                    << a.block_size_log2) + (j & bs_mask)
                                 : 0;
          *reinterpret_cast<uint4*>(dk + swz<kRow>(r, c)) = load_fp8_chunk(a.k_cache, a.k_scale, row, kHeadDim, c, ok);
          *reinterpret_cast<uint4*>(dv + swz<kRow>(r, c)) = load_fp8_chunk(a.v_cache, a.v_scale, row, kHeadDim, c, ok);
          continue;
        }
      }
      const __nv_bfloat16* ksrc = qkv;
      const __nv_bfloat16* vsrc = qkv;
      if (ok) {
        if (table != nullptr) {
          const int64_t block = table[j >> a.block_size_log2];
          const int64_t row = ((block * a.num_kv_heads + kvh) << a.block_size_log2) + (j & bs_mask);
          ksrc = static_cast<const __nv_bfloat16*>(a.k_cache) + row * kHeadDim + c * 8;
          vsrc = static_cast<const __nv_bfloat16*>(a.v_cache) + row * kHeadDim + c * 8;
        } else {
          ksrc = qkv + (q_begin + j) * qkv_stride + (a.num_q_heads + kvh) * kHeadDim + c * 8;
          vsrc = ksrc + a.num_kv_heads * kHeadDim;
        }
      }
      cp_async16(dk + swz<kRow>(r, c), ksrc, ok ? 16 : 0);
      cp_async16(dv + swz<kRow>(r, c), vsrc, ok ? 16 : 0);
    }
  };
  load_kv(0, kt0);
  cp_async_commit();

  const float scale_log2 = a.scale * kLog2e;
  const float cap_log2 = a.softcap * kLog2e;  // Gemma 2's soft-cap in the scores' log2 domain (0: none)
  const int g = lane >> 2;  // fragment row (and row + 8)
  const int t4 = lane & 3;  // fragment column pair
  const int wr = warp * 16;
  uint32_t qf[T::kQInRegs ? kHeadDim / 16 : 1][4];
  float o[kHeadDim / 8][4];
#pragma unroll
  for (int i = 0; i < kHeadDim / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float m_row[2] = {-INFINITY, -INFINITY};
  float l_row[2] = {0.0f, 0.0f};

  for (int kt = kt0; kt < n_tiles; ++kt) {
    const int stage = (kt - kt0) & 1;
    if (kt + 1 < n_tiles) {
      load_kv(stage ^ 1, kt + 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if (T::kQInRegs && kt == kt0) {
#pragma unroll
      for (int kk = 0; kk < kHeadDim / 16; ++kk) {
        ldmatrix_x4(qf[T::kQInRegs ? kk : 0], sq + swz<kRow>(wr + (lane & 15), kk * 2 + (lane >> 4)));
      }
    }
    const __nv_bfloat16* tk = sk + stage * T::kTileElems;
    const __nv_bfloat16* tv = sv + stage * T::kTileElems;

    float s[kBlockN / 8][4];
#pragma unroll
    for (int i = 0; i < kBlockN / 8; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      if constexpr (!T::kQInRegs) ldmatrix_x4(qf[0], sq + swz<kRow>(wr + (lane & 15), kk * 2 + (lane >> 4)));
      const uint32_t* qa = qf[T::kQInRegs ? kk : 0];
#pragma unroll
      for (int np = 0; np < kBlockN / 16; ++np) {
        uint32_t b[4];
        const int row = np * 16 + (lane & 7) + ((lane >> 4) << 3);
        ldmatrix_x4(b, tk + swz<kRow>(row, kk * 2 + ((lane >> 3) & 1)));
        mma_bf16(s[2 * np], qa, b[0], b[1]);
        mma_bf16(s[2 * np + 1], qa, b[2], b[3]);
      }
    }

    // Causal and length mask, only on tiles that reach past the first row's limit; the window's,
    // on tiles that start before the last row's window does.
    const int key0 = kt * kBlockN;
    const bool need_mask = key0 + kBlockN - 1 > offset + q0 || key0 + kBlockN > len_k ||
                           (window > 0 && key0 < offset + q0 + kBlockM - window);
#pragma unroll
    for (int nt = 0; nt < kBlockN / 8; ++nt) {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        float v = s[nt][c] * scale_log2;
        if constexpr (kCap) v = cap_log2 * tanhf(v / cap_log2);  // before the mask: -inf stays -inf
        if (need_mask) {
          const int key = key0 + nt * 8 + t4 * 2 + (c & 1);
          const int limit = offset + q0 + wr + g + (c >> 1) * 8;
          if (key > limit || key >= len_k || (window > 0 && key <= limit - window)) v = -INFINITY;
        }
        s[nt][c] = v;
      }
    }

    // Online softmax, two rows per thread; a quad (4 lanes) shares a row.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = m_row[r];
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; ++nt) mx = fmaxf(mx, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      // Without a window every row sees key 0 in the first tile, so mx is finite from then on; with
      // one a row may have seen no key yet (mx = -inf: its p and corr must be 0, not NaN).
      const float mx_safe = mx == -INFINITY ? 0.0f : mx;
      const float corr = exp2f(m_row[r] - mx_safe);
      m_row[r] = mx;
      float sum = 0.0f;
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; ++nt) {
        s[nt][2 * r] = exp2f(s[nt][2 * r] - mx_safe);
        s[nt][2 * r + 1] = exp2f(s[nt][2 * r + 1] - mx_safe);
        sum += s[nt][2 * r] + s[nt][2 * r + 1];
      }
      l_row[r] = l_row[r] * corr + sum;
#pragma unroll
      for (int dt = 0; dt < kHeadDim / 8; ++dt) {
        o[dt][2 * r] *= corr;
        o[dt][2 * r + 1] *= corr;
      }
    }

    // O += P V.
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      uint32_t pa[4];
      pa[0] = pack_bf16x2(s[2 * kk][0], s[2 * kk][1]);
      pa[1] = pack_bf16x2(s[2 * kk][2], s[2 * kk][3]);
      pa[2] = pack_bf16x2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      pa[3] = pack_bf16x2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
      for (int dp = 0; dp < kHeadDim / 16; ++dp) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, tv + swz<kRow>(kk * 16 + (lane & 15), dp * 2 + (lane >> 4)));
        mma_bf16(o[2 * dp], pa, b[0], b[1]);
        mma_bf16(o[2 * dp + 1], pa, b[2], b[3]);
      }
    }
    __syncthreads();  // this stage is refilled by the next iteration's prefetch
  }

  // Normalise and write the rows of this warp.
  __nv_bfloat16* out = static_cast<__nv_bfloat16*>(a.out);
  const int64_t out_stride = static_cast<int64_t>(a.num_q_heads) * kHeadDim;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_row[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float inv = 1.0f / l;
    const int qi = q0 + wr + g + r * 8;
    if (qi >= len_q) continue;
    __nv_bfloat16* dst = out + (q_begin + qi) * out_stride + h * kHeadDim + t4 * 2;
#pragma unroll
    for (int dt = 0; dt < kHeadDim / 8; ++dt) {
      *reinterpret_cast<uint32_t*>(dst + dt * 8) = pack_bf16x2(o[dt][2 * r] * inv, o[dt][2 * r + 1] * inv);
    }
  }
}

template <int kHeadDim, bool kFp8, bool kCap>
void launch_prefill_of(const AttentionArgs& a, cudaStream_t stream) {
  constexpr int bytes = PrefillTile<kHeadDim>::kSmemBytes;
  allow_dynamic_smem<prefill_kernel<kHeadDim, kFp8, kCap>>(bytes);
  const dim3 grid((a.max_seqlen_q + kBlockM - 1) / kBlockM, a.num_seqs, a.num_q_heads);
  prefill_kernel<kHeadDim, kFp8, kCap><<<grid, kThreads, bytes, stream>>>(a);
  CUDA_CHECK_LAUNCH();
}

template <int kHeadDim, bool kFp8>
void launch_prefill_capped(const AttentionArgs& a, cudaStream_t stream) {
  if (a.softcap > 0.0f) return launch_prefill_of<kHeadDim, kFp8, true>(a, stream);
  launch_prefill_of<kHeadDim, kFp8, false>(a, stream);
}

// The fp8 kernel only where there is an fp8 cache to read (without a cache keys come from qkv).
template <int kHeadDim>
void launch_prefill(const AttentionArgs& a, cudaStream_t stream) {
  if (a.kv_fp8 && a.k_cache != nullptr) return launch_prefill_capped<kHeadDim, true>(a, stream);
  launch_prefill_capped<kHeadDim, false>(a, stream);
}

}  // namespace

// Read at every prefill launch (the tests switch it between calls); the backend also reads it once
// when it is made, so that a bad value stops the engine before it serves anything.
std::string prefill_kernel_checked() { return knob_mode("MINIVLLM_PREFILL_KERNEL"); }

void launch_prefill_attention(const AttentionArgs& a, cudaStream_t stream) {
  if (a.num_seqs == 0 || a.max_seqlen_q == 0) return;
  PrefillShape shape{};
  shape.head_dim = a.head_dim;
  shape.has_cache = a.k_cache != nullptr;
  shape.kv_fp8 = a.kv_fp8;
  shape.block_size = 1 << a.block_size_log2;
  shape.sm_major = device_sm_major();
  shape.force_mma = prefill_kernel_checked() == "mma";
  shape.sliding_window = a.window > 0;
  shape.softcap = a.softcap > 0.0f;
  if (prefill_kernel_choice(shape) == PrefillKernel::kWgmma) return launch_prefill_attention_wgmma(a, stream);
  switch (a.head_dim) {  // a supported shape (attention_shape_supported, checked in cuda_ops.cc)
    case 64: return launch_prefill<64>(a, stream);
    case 96: return launch_prefill<96>(a, stream);
    case 128: return launch_prefill<128>(a, stream);
    default: return launch_prefill<256>(a, stream);
  }
}

}  // namespace minivllm::cuda
