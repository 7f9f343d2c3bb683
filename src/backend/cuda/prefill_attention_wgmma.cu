// Prefill attention on Hopper's own instructions: wgmma (warpgroup MMA) and TMA (bulk tensor
// copies completing on mbarriers), warp-specialised as flash-attention-3 describes. Same function
// as prefill_attention.cu (varlen, causal, paged, cached prefix, GQA); prefill_policy.h says which
// shapes come here.
//
// A CTA is 3 warpgroups and owns 128 query rows of one (sequence, q head):
//   - warpgroup 0, the producer: one warp issues the TMA loads (Q once, then K and V tiles of 128
//     keys into a 3-stage ring, 4 at head_dim 64) and drops to 40 registers (setmaxnreg);
//   - warpgroups 1 and 2, the consumers (232 registers): 64 query rows each. S = Q K^T is one
//     wgmma chain (A = Q and B = K from shared memory), the online softmax runs on the fp32
//     accumulators, P is re-packed in registers as the A operand of O += P V (B = V, read
//     transposed from shared memory), then the stage is released to the producer. The two
//     take turns issuing their products (ping-pong), so one's softmax hides behind the other's.
// Shared-memory tiles are [head_dim / 64][128 rows][64] bf16 in the 128-byte swizzle, which both
// TMA writes and wgmma reads: one 16-byte chunk c of row r lands at chunk c ^ (r & 7). K is a
// K-major B operand (row = key); V is the same bytes read as an MN-major B operand.
//
// Keys come through the block table (one TMA box per min(block_size, 128) keys and 64 columns) or,
// with no cache, straight from qkv. Boxes wholly past the CTA's last key are not loaded; rows of V
// past it are zeroed in the last tile, since P is 0 there but stale (or NaN) V would still poison
// O (0 * NaN). K past it needs nothing: those scores are masked by a select.
#include <atomic>
#include <cfloat>
#include <cstring>

#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/pdl_launch.h"
#include "backend/cuda/prefill_policy.h"
#include "backend/cuda/prefill_span.cuh"
#include "backend/cuda/tma_map.h"
#include "backend/cuda/wgmma.cuh"

namespace minivllm::cuda {
namespace {

constexpr int kRows = 128;  // query rows per CTA and keys per tile
constexpr int kThreads = 384;
constexpr float kLog2e = 1.4426950408889634f;

template <int kHeadDim>
struct WgLayout {
  static_assert(kHeadDim == 64 || kHeadDim == 128, "head_dim 64 or 128");
  // K / V ring depth: as deep as 227 KB allows (Q 32 KB + 3 x 64 KB at head_dim 128).
  static constexpr int kStages = kHeadDim == 128 ? 3 : 4;
  static constexpr int kDBlocks = kHeadDim / 64;             // 128-byte column blocks
  static constexpr int kDBlockBytes = kRows * 128;           // one column block of 128 rows
  static constexpr int kTileBytes = kDBlocks * kDBlockBytes;  // 128 rows x head_dim
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + kTileBytes;
  static constexpr int kV = kK + kStages * kTileBytes;
  static_assert(8 * (1 + 3 * kStages) <= 128, "barrier area");
  static constexpr int kBar = kV + kStages * kTileBytes;
  static constexpr int kSmemBytes = kBar + 128 + 1024;  // barriers; slack to align the base to 1024
};

struct WgParams {
  CUtensorMap q_map;  // qkv as [tokens, width], boxes of 64 columns x 128 rows
  CUtensorMap k_map;  // cache rows [blocks * kv heads * block_size, head_dim], or qkv again
  CUtensorMap v_map;
  AttentionArgs a;
  int kv_box_rows;  // rows per K / V box: min(block_size, 128), or 128 from qkv
};

__device__ __forceinline__ float ex2(float x) {  // 2^x on the MUFU (ex2(-inf) = 0)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// D[64 x 128] += A (registers, bf16 pairs) * B (smem, MN-major: imm-trans-b 1).
__device__ __forceinline__ void wgmma_rs_n128_tb(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, 1, 1, 1, 1;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
}

// D[64 x 64] += A (registers, bf16 pairs) * B (smem, MN-major: imm-trans-b 1).
__device__ __forceinline__ void wgmma_rs_n64_tb(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, 1, 1, 1, 1;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
}

template <int kHeadDim>
__device__ __forceinline__ void wgmma_pv(float (&o)[kHeadDim / 2], const uint32_t (&a)[4], uint64_t desc_b) {
  if constexpr (kHeadDim == 128) {
    wgmma_rs_n128_tb(o, a, desc_b);
  } else {
    wgmma_rs_n64_tb(o, a, desc_b);
  }
}

template <int kHeadDim>
__device__ __forceinline__ void producer(const WgParams& p, uint32_t base, int lane, int seq, int h, int kvh, int q_begin,
                                         int q0, int n_keys, int n_tiles) {
  using L = WgLayout<kHeadDim>;
  const AttentionArgs& a = p.a;
  const uint32_t q_full = base + L::kBar;
  constexpr int kStages = L::kStages;
  const uint32_t k_full = q_full + 8, v_full = k_full + 8 * kStages, kv_empty = v_full + 8 * kStages;
  if (lane == 0) {
    mbar_expect_tx(q_full, L::kTileBytes);
#pragma unroll
    for (int d = 0; d < L::kDBlocks; ++d) {
      tma_load_2d(base + L::kQ + d * L::kDBlockBytes, &p.q_map, q_full, h * kHeadDim + d * 64, q_begin + q0);
    }
  }
  const bool paged = a.k_cache != nullptr;
  const int32_t* table = paged ? a.block_tables + static_cast<int64_t>(seq) * a.table_cols : nullptr;
  const int box_rows = p.kv_box_rows;
  const int k_col = paged ? 0 : (a.num_q_heads + kvh) * kHeadDim;
  const int v_col = paged ? 0 : (a.num_q_heads + a.num_kv_heads + kvh) * kHeadDim;
  const int k_begin = paged ? 0 : a.cu_seqlens_k[seq];
  const int bs_mask = (1 << a.block_size_log2) - 1;
  for (int kt = 0; kt < n_tiles; ++kt) {
    const int stage = kt % kStages;
    if (kt >= kStages) mbar_wait(kv_empty + 8 * stage, (kt / kStages - 1) & 1);
    const int key0 = kt * kRows;
    // Boxes of rows that some query row of this CTA can see.
    const int row_boxes = min(kRows / box_rows, (n_keys - key0 + box_rows - 1) / box_rows);
    const int boxes = row_boxes * L::kDBlocks;
    const uint32_t bytes = static_cast<uint32_t>(boxes) * box_rows * 128;
    if (lane == 0) {
      mbar_expect_tx(k_full + 8 * stage, bytes);
      mbar_expect_tx(v_full + 8 * stage, bytes);
    }
    __syncwarp();
    for (int i = lane; i < 2 * boxes; i += 32) {
      const bool is_v = i >= boxes;
      const int b = is_v ? i - boxes : i;
      const int r = b / L::kDBlocks, d = b % L::kDBlocks;
      const int key = key0 + r * box_rows;
      int row;
      if (paged) {
        row = ((table[key >> a.block_size_log2] * a.num_kv_heads + kvh) << a.block_size_log2) + (key & bs_mask);
      } else {
        row = k_begin + key;
      }
      const uint32_t dst = stage * L::kTileBytes + d * L::kDBlockBytes + r * box_rows * 128;
      if (is_v) {
        tma_load_2d(base + L::kV + dst, &p.v_map, v_full + 8 * stage, v_col + d * 64, row);
      } else {
        tma_load_2d(base + L::kK + dst, &p.k_map, k_full + 8 * stage, k_col + d * 64, row);
      }
    }
  }
}

template <int kHeadDim>
__global__ void __launch_bounds__(kThreads, 1) prefill_wgmma_kernel(const __grid_constant__ WgParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using L = WgLayout<kHeadDim>;
  const AttentionArgs& a = p.a;
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = smem_addr(smem_raw);
  const uint32_t base = (raw + 1023) & ~1023u;  // the 128-byte swizzle repeats every 1024 bytes
  uint8_t* smem = smem_raw + (base - raw);
  const uint32_t q_full = base + L::kBar;
  constexpr int kStages = L::kStages;
  const uint32_t k_full = q_full + 8, v_full = k_full + 8 * kStages, kv_empty = v_full + 8 * kStages;

  const int tile = gridDim.x - 1 - blockIdx.x;  // the longest causal spans first
  const int seq = blockIdx.y;
  const int h = blockIdx.z;
  const PrefillSpan span = prefill_span(a, seq, h, tile, kRows);
  if (span.q0 >= span.len_q) return;
  const int q_begin = span.q_begin, len_q = span.len_q, len_k = span.len_k, q0 = span.q0, kvh = span.kvh;
  const int offset = span.offset, n_keys = span.n_keys;
  const int n_tiles = (n_keys + kRows - 1) / kRows;
  const int tid = threadIdx.x;

  if (tid == 0) {
    mbar_init(q_full, 1);
    for (int s = 0; s < kStages; ++s) {
      mbar_init(k_full + 8 * s, 1);
      mbar_init(v_full + 8 * s, 1);
      mbar_init(kv_empty + 8 * s, 2 * 128);  // every consumer thread arrives
    }
    mbar_init_fence();
  }
  __syncthreads();

  // The warpgroup index through a shuffle: ptxas then knows it is warp-uniform. Branching on
  // threadIdx directly leaves the wgmma on a "divergent path" and ptxas serialises them (C7520).
  const int wg = __shfl_sync(0xffffffffu, tid / 128, 0);
  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (tid < 32) producer<kHeadDim>(p, base, tid, seq, h, kvh, q_begin, q0, n_keys, n_tiles);
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    const int cwg = wg - 1;  // consumer warpgroup: query rows [64 cwg, 64 cwg + 64)
    const int wt = tid & 127;
    const int lane = wt & 31;
    const int g = lane >> 2;  // accumulator row (and row + 8) within the warp's 16
    const int t4 = lane & 3;  // accumulator column pair
    const int row_base = q0 + cwg * 64 + (wt >> 5) * 16 + g;  // query index of this thread's first row
    const int wg_last_key = offset + q0 + cwg * 64 + 63;     // the last key any row of the warpgroup sees
    const float scale_log2 = a.scale * kLog2e;

    float o[kHeadDim / 2];
#pragma unroll
    for (int i = 0; i < kHeadDim / 2; ++i) o[i] = 0.0f;
    float m_row[2] = {-INFINITY, -INFINITY};  // running max of the raw (unscaled) scores
    float l_row[2] = {0.0f, 0.0f};
    uint32_t pa[8][4];  // P of the previous tile, bf16 A fragments of O += P V
    bool active_prev = false;
    const uint32_t q_rows = base + L::kQ + cwg * 64 * 128;

    // Ping-pong (flash-attention-3): the two consumer warpgroups take turns issuing their wgmma
    // (P V of the last tile, then Q K^T of this one), so one's softmax runs while the other's
    // matrix products keep the tensor cores busy. Named barrier 2 + w: "warpgroup w may issue".
    if (cwg == 1) named_bar_arrive(2, 256);  // warpgroup 0 goes first
    mbar_wait(q_full, 0);
    for (int kt = 0; kt <= n_tiles; ++kt) {
      const bool has_s = kt < n_tiles;
      const int key0 = kt * kRows;
      const bool active = has_s && key0 <= wg_last_key;  // else every score of this warpgroup is masked
      const int stage = kt % kStages;
      const int prev = (kt + kStages - 1) % kStages;
      if (has_s) mbar_wait(k_full + 8 * stage, (kt / kStages) & 1);
      if (kt > 0) {
        mbar_wait(v_full + 8 * prev, ((kt - 1) / kStages) & 1);
        const int first = n_keys - (key0 - kRows);  // rows of the previous tile with visible keys
        if (kt == n_tiles && first < kRows && active_prev) {
          // Rows of V past the last visible key: not loaded, or past len_k (stale cache rows).
          // Each warpgroup zeroes them before its own P V (the other may write the same zeros).
          const int per_block = (kRows - first) * 8;  // 16-byte words per column block
          for (int i = wt; i < per_block * L::kDBlocks; i += 128) {
            const int d = i / per_block, w = i % per_block;
            *reinterpret_cast<uint4*>(smem + L::kV + prev * L::kTileBytes + d * L::kDBlockBytes + first * 128 +
                                      w * 16) = make_uint4(0, 0, 0, 0);
          }
          asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic writes -> wgmma reads
          named_bar_sync(4 + cwg, 128);
        }
      }
      float s[64];
      named_bar_sync(2 + cwg, 256);
      pin(o);
      pin(s);
      wgmma_fence();
      if (active_prev) {
        const uint32_t tv = base + L::kV + prev * L::kTileBytes;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          wgmma_pv<kHeadDim>(o, pa[j], smem_desc(tv + j * 16 * 128, L::kDBlockBytes, 1024));
        }
      }
      if (active) {
        const uint32_t tk = base + L::kK + stage * L::kTileBytes;
#pragma unroll
        for (int kk = 0; kk < kHeadDim / 16; ++kk) {
          const uint32_t col = (kk >> 2) * L::kDBlockBytes + (kk & 3) * 32;
          WgmmaSS<128>::run(s, smem_desc(q_rows + col, 16, 1024), smem_desc(tk + col, 16, 1024), kk > 0);
        }
      }
      wgmma_commit();
      if (!(cwg == 1 && kt == n_tiles)) named_bar_arrive(2 + (cwg ^ 1), 256);  // every arrive meets a sync
      wgmma_wait_all();
      pin(o);
      pin(s);
      if (kt > 0) mbar_arrive(kv_empty + 8 * prev);  // K and V of the previous tile are read
      active_prev = active;
      if (!active) continue;

      // Causal and length mask, only on tiles that reach past the warpgroup's first row's limit.
      const bool need_mask = key0 + kRows - 1 > offset + q0 + cwg * 64 || key0 + kRows > len_k;
      if (need_mask) {
#pragma unroll
        for (int i = 0; i < 16; ++i) {
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            const int key = key0 + i * 8 + t4 * 2 + (c & 1);
            const int limit = offset + row_base + (c >> 1) * 8;
            if (key > limit || key >= len_k) s[4 * i + c] = -INFINITY;
          }
        }
      }
      // Online softmax, two rows per thread; a quad (4 lanes) shares a row. exp2 of
      // (s - max) * scale * log2(e) in one FFMA and one MUFU.EX2 per score.
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        // Four partial maxima and sums: one warp per SMSP runs this, so short dependency chains
        // matter more than instruction count.
        float pm[4] = {m_row[r], m_row[r], m_row[r], m_row[r]};
#pragma unroll
        for (int i = 0; i < 16; ++i) pm[i & 3] = fmaxf(pm[i & 3], fmaxf(s[4 * i + 2 * r], s[4 * i + 2 * r + 1]));
        float mx = fmaxf(fmaxf(pm[0], pm[1]), fmaxf(pm[2], pm[3]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        // Every row sees key 0 in tile 0, so mx is finite from then on.
        const float corr = ex2((m_row[r] - mx) * scale_log2);
        m_row[r] = mx;
        const float neg = -mx * scale_log2;
        float ps[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int i = 0; i < 16; ++i) {
          s[4 * i + 2 * r] = ex2(fmaf(s[4 * i + 2 * r], scale_log2, neg));
          s[4 * i + 2 * r + 1] = ex2(fmaf(s[4 * i + 2 * r + 1], scale_log2, neg));
          ps[i & 3] += s[4 * i + 2 * r] + s[4 * i + 2 * r + 1];
        }
        l_row[r] = l_row[r] * corr + ((ps[0] + ps[1]) + (ps[2] + ps[3]));
#pragma unroll
        for (int i = 0; i < kHeadDim / 8; ++i) {
          o[4 * i + 2 * r] *= corr;
          o[4 * i + 2 * r + 1] *= corr;
        }
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        pa[j][0] = pack_bf16x2(s[8 * j + 0], s[8 * j + 1]);
        pa[j][1] = pack_bf16x2(s[8 * j + 2], s[8 * j + 3]);
        pa[j][2] = pack_bf16x2(s[8 * j + 4], s[8 * j + 5]);
        pa[j][3] = pack_bf16x2(s[8 * j + 6], s[8 * j + 7]);
      }
    }

    // Normalise and write this thread's two rows.
    __nv_bfloat16* out = static_cast<__nv_bfloat16*>(a.out);
    const int64_t out_stride = static_cast<int64_t>(a.num_q_heads) * kHeadDim;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float l = l_row[r];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const float inv = 1.0f / l;
      const int qi = row_base + r * 8;
      if (qi >= len_q) continue;
      __nv_bfloat16* dst = out + (q_begin + qi) * out_stride + h * kHeadDim + t4 * 2;
#pragma unroll
      for (int i = 0; i < kHeadDim / 8; ++i) {
        *reinterpret_cast<uint32_t*>(dst + i * 8) = pack_bf16x2(o[4 * i + 2 * r] * inv, o[4 * i + 2 * r + 1] * inv);
      }
    }
  }
#else
  __trap();  // built without sm_90a: prefill_kernel_choice never picks this kernel off Hopper
#endif
}

// ---- host ----
template <int kHeadDim>
void launch_wgmma_of(const AttentionArgs& a, cudaStream_t stream) {
  using L = WgLayout<kHeadDim>;
  WgParams p;
  std::memset(&p, 0, sizeof(p));
  p.a = a;
  const int64_t width = static_cast<int64_t>(a.num_q_heads + 2 * a.num_kv_heads) * kHeadDim;
  p.q_map = make_bf16_tma_map(a.qkv, a.num_tokens, width, width, kRows, "prefill attention");
  if (a.k_cache != nullptr) {
    const int block_size = 1 << a.block_size_log2;
    const int64_t cache_rows = static_cast<int64_t>(a.num_blocks) * a.num_kv_heads * block_size;
    p.kv_box_rows = block_size < kRows ? block_size : kRows;
    p.k_map = make_bf16_tma_map(a.k_cache, cache_rows, kHeadDim, kHeadDim, p.kv_box_rows, "prefill attention");
    p.v_map = make_bf16_tma_map(a.v_cache, cache_rows, kHeadDim, kHeadDim, p.kv_box_rows, "prefill attention");
  } else {
    p.kv_box_rows = kRows;
    p.k_map = p.q_map;
    p.v_map = p.q_map;
  }
  allow_dynamic_smem<prefill_wgmma_kernel<kHeadDim>>(L::kSmemBytes);
  const dim3 grid((a.max_seqlen_q + kRows - 1) / kRows, a.num_seqs, a.num_q_heads);
  prefill_wgmma_kernel<kHeadDim><<<grid, kThreads, L::kSmemBytes, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_prefill_attention_wgmma(const AttentionArgs& a, cudaStream_t stream) {
  if (a.head_dim == 64) return launch_wgmma_of<64>(a, stream);
  MINIVLLM_CHECK(a.head_dim == 128) << "prefill attention (wgmma): head_dim " << a.head_dim << " not supported";
  launch_wgmma_of<128>(a, stream);
}

int device_sm_major() {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> major[kMaxDevices] = {};  // 0: not read yet
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  if (dev < 0 || dev >= kMaxDevices) return 0;
  int m = major[dev].load(std::memory_order_relaxed);
  if (m == 0) {
    CUDA_CHECK(cudaDeviceGetAttribute(&m, cudaDevAttrComputeCapabilityMajor, dev));
    major[dev].store(m, std::memory_order_relaxed);
  }
  return m;
}

}  // namespace minivllm::cuda
