// Mixture of experts past decode sizes: the experts' MLPs as two grouped GEMMs on the tensor
// cores (mma.sync m16n8k16, bf16 in, fp32 accumulation), after launch_moe_group has sorted the
// pairs by expert. The grid is (column tile, row tile): the row tiles of every expert one after
// another (moe_group's `tiles`), as many as any routing can need (moe_max_row_tiles), so its
// shape depends on T alone; a CTA reads its expert, that expert's offset and row count from
// device memory, and a CTA past the last tile exits at once.
//   act_mul: A = x's rows gathered through entries (token = pair / k), B = the expert's
//            [W_gate; W_up]: a CTA's 128 B rows are 64 gate rows and the 64 up rows of the same
//            columns, so act(gate) * up is formed in registers and only the [pairs, I] product is
//            written, in grouped order.
//   down:    A = those act rows, B = W_down; row r's output goes to y's row entries[r] (pair order),
//            for moe_combine's fixed-order weighted sum.
// Tiles: BM x 128 x 64 with BM = 64 (four warps of 32 x 64) or 32 (four warps of 32 x 32, for
// experts of few rows: MoeShape::tile_rows), three cp.async stages; fragments are 32-bit shared
// loads in mma_sync.cuh's layouts from rows padded to 72 values (conflict-free). K tails and rows
// or columns past the ends are zero-filled by cp.async and not stored.
#include <cuda_bf16.h>

#include <algorithm>

#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/mma_sync.cuh"
#include "backend/cuda/moe.h"
#include "backend/cuda/pdl_launch.h"

namespace minivllm::cuda {
namespace {

constexpr int kBN = 128;
constexpr int kStages = 3;
constexpr int kThreads = 128;

// A K step of kBK = 64 values: each stage reads 128 bytes of every A and B row, whole lines, where
// 64-byte steps were slower (PERFORMANCE.md, "The grouped expert GEMMs"). Rows padded by 8 values
// (144-byte rows): lanes (g, t) of a fragment load hit distinct banks.
constexpr int kBK = 64;
template <int kBM>
struct StageLayout {
  static constexpr int kStride = kBK + 8;
  static constexpr int kChunksPerRow = kBK / 8;
  static constexpr size_t kABytes = static_cast<size_t>(kStages) * kBM * kStride * 2;
  static constexpr size_t kSmem = kABytes + static_cast<size_t>(kStages) * kBN * kStride * 2;
};
static_assert(kBN == 128 && kThreads == 128, "the warp layouts below are four warps of 32 rows");

// A BM-row tile's warps: kWM along the rows (32 each), kWN along the columns, kNT n8 tiles each.
template <int kBM>
struct WarpLayout {
  static_assert(kBM == 64 || kBM == 32, "row tiles of 64 or 32");
  static constexpr int kWM = kBM / 32;
  static constexpr int kWN = 4 / kWM;
  static constexpr int kNT = kBN / kWN / 8;  // 8 or 4
};

struct MoeGemmArgs {
  const __nv_bfloat16* a;  // act_mul: x [T, K]; down: act [pairs, K] in grouped order
  const int32_t* offsets;
  const int32_t* entries;
  const int32_t* tiles;
  __nv_bfloat16* out;  // act_mul: act [pairs, n] in grouped order; down: y [T k, n] in pair order
  int64_t kdim;        // K: H, or I
  int64_t n;           // output columns: I, or H
  int k;               // top-k
  int num_local;
  Activation act;
};

__device__ __forceinline__ uint32_t lds32(const __nv_bfloat16* p) { return *reinterpret_cast<const uint32_t*>(p); }

// The shared row of warp column wn's n8 tile nt. Gated: the first half of a warp's tiles are gate
// rows, the second half the up rows of the same columns (64 rows further), so acc[.][nt] and
// acc[.][nt + kNT / 2] pair up in one thread.
template <bool kGated, int kBM>
__device__ __forceinline__ int b_row(int wn, int nt) {
  using L = WarpLayout<kBM>;
  constexpr int kHalf = L::kNT / 2;
  if constexpr (kGated) return (nt < kHalf ? 0 : kBN / 2) + wn * (kBN / 2 / L::kWN) + (nt % kHalf) * 8;
  return wn * (kBN / L::kWN) + nt * 8;
}

template <bool kGated, int kBM>
__global__ void __launch_bounds__(kThreads) moe_gemm_kernel(const __grid_constant__ MoeGemmArgs g,
                                                            const __grid_constant__ MoeExpertTable table) {
  using L = WarpLayout<kBM>;
  using S = StageLayout<kBM>;
  constexpr int kNT = L::kNT, kStride = S::kStride, kChunksPerRow = S::kChunksPerRow;
  extern __shared__ __align__(16) uint8_t smem[];  // sa [kStages][kBM][kStride], then sb [kStages][kBN][kStride]
  auto sa = reinterpret_cast<__nv_bfloat16(*)[kBM][kStride]>(smem);
  auto sb = reinterpret_cast<__nv_bfloat16(*)[kBN][kStride]>(smem + S::kABytes);
  __shared__ int s_tiles[kMoeMaxLocalExperts + 1];
  __shared__ int s_src[kBM];  // A's row for each tile row, -1 past the expert's rows
  __shared__ int s_dst[kBM];  // the output row, -1 likewise

  for (int i = threadIdx.x; i <= g.num_local; i += kThreads) s_tiles[i] = g.tiles[i];
  __syncthreads();
  const int tile = blockIdx.y;
  if (tile >= s_tiles[g.num_local]) return;  // CTA-uniform: past this routing's tiles
  int lo = 0, hi = g.num_local - 1;            // the last expert whose first tile is <= tile
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (s_tiles[mid] <= tile) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const int e = lo;
  const int row0 = g.offsets[e], rows = g.offsets[e + 1] - row0;
  const int m0 = (tile - s_tiles[e]) * kBM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * (kGated ? kBN / 2 : kBN);
  for (int r = threadIdx.x; r < kBM; r += kThreads) {
    int src = -1, dst = -1;
    if (m0 + r < rows) {
      const int pos = row0 + m0 + r;
      src = kGated ? g.entries[pos] / g.k : pos;
      dst = kGated ? pos : g.entries[pos];
    }
    s_src[r] = src;
    s_dst[r] = dst;
  }
  __syncthreads();
  const __nv_bfloat16* w = static_cast<const __nv_bfloat16*>(table.w[e]);

  auto load_stage = [&](int stage, int64_t k0) {
    for (int i = threadIdx.x; i < kBM * kChunksPerRow; i += kThreads) {
      const int r = i / kChunksPerRow, c = i % kChunksPerRow;
      const int64_t col = k0 + c * 8;
      const bool ok = s_src[r] >= 0 && col < g.kdim;
      cp_async16(&sa[stage][r][c * 8], ok ? g.a + s_src[r] * g.kdim + col : g.a, ok ? 16 : 0);
    }
    for (int i = threadIdx.x; i < kBN * kChunksPerRow; i += kThreads) {
      const int r = i / kChunksPerRow, c = i % kChunksPerRow;
      const int64_t col = k0 + c * 8;
      int64_t wrow;
      bool ok;
      if constexpr (kGated) {  // rows [0, 64): gate rows n0 + r; [64, 128): up rows n + n0 + r - 64
        const int64_t oc = n0 + r % (kBN / 2);
        ok = oc < g.n;
        wrow = (r < kBN / 2 ? 0 : g.n) + oc;
      } else {
        wrow = n0 + r;
        ok = wrow < g.n;
      }
      ok = ok && col < g.kdim;
      cp_async16(&sb[stage][r][c * 8], ok ? w + wrow * g.kdim + col : w, ok ? 16 : 0);
    }
  };

  const int ktiles = static_cast<int>((g.kdim + kBK - 1) / kBK);
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < ktiles) load_stage(s, static_cast<int64_t>(s) * kBK);
    cp_async_commit();  // one group per stage, empty or not, so that the waits below count right
  }
  float acc[2][kNT][4];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.0f;
    }
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int wm = warp / L::kWN, wn = warp % L::kWN;
  const int gq = lane >> 2, tq = lane & 3;
  for (int kt = 0; kt < ktiles; ++kt) {
    cp_async_wait<kStages - 2>();  // this thread's copies of stage kt have landed
    __syncthreads();               // everyone's have, and everyone is done with stage kt - 1's slot
    {
      const int next = kt + kStages - 1;
      if (next < ktiles) load_stage(next % kStages, static_cast<int64_t>(next) * kBK);
      cp_async_commit();
    }
    const int st = kt % kStages;
#pragma unroll
    for (int ks = 0; ks < kBK; ks += 16) {
      uint32_t af[2][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        const int r = wm * 32 + mt * 16 + gq;
        af[mt][0] = lds32(&sa[st][r][ks + 2 * tq]);
        af[mt][1] = lds32(&sa[st][r + 8][ks + 2 * tq]);
        af[mt][2] = lds32(&sa[st][r][ks + 2 * tq + 8]);
        af[mt][3] = lds32(&sa[st][r + 8][ks + 2 * tq + 8]);
      }
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        const int br = b_row<kGated, kBM>(wn, nt) + gq;
        const uint32_t b0 = lds32(&sb[st][br][ks + 2 * tq]);
        const uint32_t b1 = lds32(&sb[st][br][ks + 2 * tq + 8]);
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) mma_bf16(acc[mt][nt], af[mt], b0, b1);
      }
    }
  }
  cp_async_wait<0>();  // no copy outstanding at exit (the trailing groups are empty)

  // c[0], c[1]: row gq, columns 2 tq, 2 tq + 1; c[2], c[3]: row gq + 8. n % 8 == 0 and the column is
  // even, so a column inside n has its neighbour inside too (one 32-bit store for the pair).
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int dst = s_dst[wm * 32 + mt * 16 + gq + h * 8];
      if (dst < 0) continue;
      __nv_bfloat16* orow = g.out + static_cast<int64_t>(dst) * g.n;
      if constexpr (kGated) {
#pragma unroll
        for (int nt = 0; nt < kNT / 2; ++nt) {
          const int64_t col = n0 + wn * (kBN / 2 / L::kWN) + nt * 8 + 2 * tq;
          if (col >= g.n) continue;
          const float v0 = gate_act(acc[mt][nt][2 * h], g.act) * acc[mt][nt + kNT / 2][2 * h];
          const float v1 = gate_act(acc[mt][nt][2 * h + 1], g.act) * acc[mt][nt + kNT / 2][2 * h + 1];
          *reinterpret_cast<uint32_t*>(orow + col) = pack_bf16x2(v0, v1);
        }
      } else {
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
          const int64_t col = n0 + wn * (kBN / L::kWN) + nt * 8 + 2 * tq;
          if (col >= g.n) continue;
          *reinterpret_cast<uint32_t*>(orow + col) = pack_bf16x2(acc[mt][nt][2 * h], acc[mt][nt][2 * h + 1]);
        }
      }
    }
  }
}

void check_shape(const char* op, const MoeShape& s) {
  MINIVLLM_CHECK(s.k >= 1 && s.hidden > 0 && s.hidden % 8 == 0 && s.inter > 0 && s.inter % 8 == 0 &&
                 s.num_local >= 1 && s.num_local <= kMoeMaxLocalExperts &&
                 (s.tile_rows == kMoeTileRows || s.tile_rows == kMoeSmallTileRows) &&
                 moe_max_row_tiles(s.tokens * s.k, s.num_local, s.tile_rows) <= 65535 &&
                 s.tokens * s.k * std::max(s.hidden, s.inter) < (int64_t{1} << 40))
      << op << ": " << s.tokens << " tokens x top-" << s.k << ", hidden " << s.hidden << ", inter " << s.inter
      << ", " << s.num_local << " local experts (widths multiples of 8, at most " << kMoeMaxLocalExperts
      << " experts, and at most 65535 row tiles of " << s.tile_rows << ", which is " << kMoeTileRows << " or "
      << kMoeSmallTileRows << ")";
}

template <bool kGated, int kBM>
void launch_tile(dim3 grid, const MoeGemmArgs& g, const MoeExpertTable& table, cudaStream_t stream) {
  constexpr size_t smem = StageLayout<kBM>::kSmem;
  allow_dynamic_smem<moe_gemm_kernel<kGated, kBM>>(static_cast<int>(smem));  // past 48 KB: once a device
  moe_gemm_kernel<kGated, kBM><<<grid, kThreads, smem, stream>>>(g, table);
  CUDA_CHECK_LAUNCH();
}

template <bool kGated>
void launch(const MoeGemmArgs& g, const MoeExpertTable& table, const MoeShape& s, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(ceil_div(g.n, kGated ? kBN / 2 : kBN)),
                  static_cast<unsigned>(moe_max_row_tiles(s.tokens * s.k, s.num_local, s.tile_rows)));
  if (s.tile_rows == kMoeSmallTileRows) return launch_tile<kGated, kMoeSmallTileRows>(grid, g, table, stream);
  launch_tile<kGated, kMoeTileRows>(grid, g, table, stream);
}

MoeGemmArgs args(const void* a, const int32_t* offsets, const int32_t* entries, const int32_t* tiles, void* out,
                 const MoeShape& s) {
  MoeGemmArgs g{};
  g.a = static_cast<const __nv_bfloat16*>(a);
  g.offsets = offsets;
  g.entries = entries;
  g.tiles = tiles;
  g.out = static_cast<__nv_bfloat16*>(out);
  g.k = s.k;
  g.num_local = s.num_local;
  return g;
}

}  // namespace

void launch_moe_gemm_act_mul(const void* x, const int32_t* offsets, const int32_t* entries, const int32_t* tiles,
                             const MoeExpertTable& gate_up, const MoeShape& s, Activation act, void* act_out,
                             cudaStream_t stream) {
  if (s.tokens == 0) return;
  check_shape("moe_gemm_act_mul", s);
  MoeGemmArgs g = args(x, offsets, entries, tiles, act_out, s);
  g.kdim = s.hidden;
  g.n = s.inter;
  g.act = act;
  launch<true>(g, gate_up, s, stream);
}

void launch_moe_gemm_down(const void* act, const int32_t* offsets, const int32_t* entries, const int32_t* tiles,
                          const MoeExpertTable& down, const MoeShape& s, void* y, cudaStream_t stream) {
  if (s.tokens == 0) return;
  check_shape("moe_gemm_down", s);
  MoeGemmArgs g = args(act, offsets, entries, tiles, y, s);
  g.kdim = s.inter;
  g.n = s.hidden;
  launch<false>(g, down, s, stream);
}

}  // namespace minivllm::cuda
