// The decode-batch GEMM on Hopper's own instructions (wgmma, TMA): out[T, N] = x[T, K] w[N, K]^T
// for the 3..256 tokens of a decode step, where cuBLASLt's kernels run at a third to a half of
// copy bandwidth (PERFORMANCE.md: each small projection pays a few microseconds of ramp and tail).
//
// Swapped operands: the weights are wgmma's M side (64 rows per warpgroup) and the tokens its N
// side (kN = the token count rounded up, at most 256), so a CTA streams 128 weight rows once and
// every token rides along. A CTA is two consumer warpgroups (64 weight rows each, fp32
// accumulators of [64 x kN]) and one producer warp that TMA-loads [128 rows x 64 k] of w and
// [kN tokens x 64 k] of x per stage into a ring of stages (128-byte swizzle, as the wgmma reads).
// Programmatic dependent launch: the first stages' weight loads go out before griddepcontrol.wait,
// so they overlap the previous kernel's tail; x only after it.
//
// Split K: when the weight tiles alone would leave SMs idle (o and down have 8-16 tiles), a
// cluster of `splits` CTAs shares a tile, each taking a contiguous run of K. Every CTA writes its
// partial [kN x 128] tile to its own shared memory; after a cluster barrier, CTA r sums the token
// rows [r T / S, (r + 1) T / S) over the cluster's tiles in rank order (distributed shared memory,
// so the sum is deterministic) and applies the epilogue:
//   kStore:   out (bf16 or fp32) = acc (+ bias);
//   kAddF32:  out (fp32, the residual stream) += acc: o and down add themselves in;
//   kActMul: w = [W_gate; W_up]; warpgroup 0 takes 64 gate rows, warpgroup 1 the matching up
//             rows, and out (bf16) = act(g) * u, so the [T, 2I] product never goes to memory.
//
// FP8 (kFp8): x and w are e4m3 codes, x with one scale a token, w with a scale a block of its grid
// (Qwen3-*-FP8's 128 x 128; cuBLASLt on sm_90 has no GEMM for these, fp8_gemm.h). A stage's chunk is
// then 128 k (the same 128 bytes a row), one block of the grid wide: its four k32 wgmmas go into a
// fresh accumulator, which is added to the main one times the warpgroup's block scale (the
// promotion DeepGEMM does), and the epilogue multiplies by the token's scale. The fresh accumulator
// doubles the registers, so the tokens go in tiles of at most 128 (grid y). kXPlanes 2: x in two
// e4m3 terms at the same scale (the quantizer's lo codes, rows T..2T-1 of the x map), their tiles
// side by side in a stage and both multiplied into the fresh accumulator (eight wgmmas): about
// bf16's precision for x, where one term's 3-bit mantissa cost random-weight models 19 points of
// teacher-forced agreement (PERFORMANCE.md, "Stop 77").
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <mutex>

#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/pdl_launch.h"
#include "backend/cuda/tma_map.h"
#include "backend/cuda/wgmma.cuh"

namespace minivllm::cuda {
namespace {

constexpr int kWgRows = 64;                  // weight rows per consumer warpgroup: the wgmma M
constexpr int kCtaRows = 2 * kWgRows;        // weight rows per CTA
constexpr int kThreads = 2 * 128 + 32;       // two consumer warpgroups, then the producer warp
constexpr int kWBytes = kCtaRows * 128;      // one stage of w: 128 rows x 64 k of bf16
constexpr int kTileLd = kCtaRows + 4;        // result tile [token][row], padded: conflict-free stores
constexpr int kMaxSmem = 227 * 1024;
constexpr int kMaxSplits = 8;                // the portable cluster size

// kXPlanes: x's tiles a stage (FP8 with two terms: the codes and the second term's).
template <int kN, int kXPlanes = 1>
struct GemmLayout {
  static constexpr int kXBytes = kN * 128 * kXPlanes;
  static constexpr int kStageBytes = kWBytes + kXBytes;
  static constexpr int kTileBytes = kN * kTileLd * 4;
  static constexpr int kStages = std::min(8, (kMaxSmem - 2048) / kStageBytes);
  static constexpr int kBar = kStages * kStageBytes;
  static constexpr int kSmemBytes = kBar + 16 * kStages + 1024;  // barriers; slack to align the base to 1024
  static_assert(kStages >= 2, "two stages at least");
  static_assert(kTileBytes <= kBar, "the result tile reuses the stages");
  static_assert(kSmemBytes <= kMaxSmem, "shared memory");
};

struct GemmParams {
  CUtensorMap w_map;  // w as [rows, K], boxes of 64 k x 64 rows
  CUtensorMap x_map;  // x as [T, K], boxes of 64 k x kN tokens
  void* out;
  const void* bias;  // kStore only; nullptr: none
  bool bias_f32, out_f32;
  int tokens;
  int n;  // output features: N, or I for kActMul (then w has 2I rows)
  int k_chunks;
  int splits;
  Activation act;  // kActMul
  // kFp8: x = codes * x_scales[t]; w = codes * w_grid[(row / block_rows) * grid_cols + chunk /
  // chunks_a_block], rows past w's last grid row clamped to it (TMA reads those rows as zeros).
  const float* x_scales;
  const float* w_grid;
  int grid_cols, grid_rows, block_rows, chunks_a_block;
  int x_lo_row;  // kXPlanes 2: the x map's row of the second term's token 0 (x has 2 tokens rows)
  // kAddF32, bf16, up to kFoldMaxTokens (fold_w set): the next RMSNorm's input made in the add's pass
  // (DecodeGemmArgs::fold_w).
  const void* fold_w;
  bool fold_w_f32;
  __nv_bfloat16* fold_out;
  float* fold_parts;
  int fold_stride;
  // kStore / kActMul, bf16, up to kFoldMaxTokens (norm_parts set): x is such a fold_out, and every
  // product of token t is scaled by its 1 / rms (DecodeGemmArgs::norm_parts).
  const float* norm_parts;
  int norm_nparts, norm_stride, norm_k;
  float norm_eps;
};

// The folded norm's instances: bf16 token boxes of at most kFoldMaxTokens.
template <int kN, bool kFp8>
constexpr bool kFoldable = !kFp8 && kN <= kFoldMaxTokens;

// The sum over the cluster's partial tiles of the four floats at `p` (this CTA's tile), in rank
// order. Generic loads through __cluster_map_shared_rank: the compiler may keep all of them in
// flight at once (distributed shared memory is a round trip across the GPC).
__device__ __forceinline__ float4 cluster_sum_f4(const float* p, int splits) {
  if (splits == 1) return *reinterpret_cast<const float4*>(p);
  float4 v[kMaxSplits];
#pragma unroll
  for (int q = 0; q < kMaxSplits; ++q) {
    if (q < splits) v[q] = *reinterpret_cast<const float4*>(__cluster_map_shared_rank(const_cast<float*>(p), q));
  }
  float4 s = v[0];
#pragma unroll
  for (int q = 1; q < kMaxSplits; ++q) {
    if (q < splits) {
      s.x += v[q].x;
      s.y += v[q].y;
      s.z += v[q].z;
      s.w += v[q].w;
    }
  }
  return s;
}

template <int kN, DecodeGemmEpilogue E, bool kFp8, int kXPlanes = 1>
__global__ void __launch_bounds__(kThreads, 1) decode_gemm_kernel(const __grid_constant__ GemmParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using L = GemmLayout<kN, kXPlanes>;
  constexpr bool kGated = E == DecodeGemmEpilogue::kActMul;
  constexpr int kChunkElems = kFp8 ? 128 : 64;  // a chunk is 128 bytes of a row either way
  static_assert(!kFp8 || kN <= 128, "FP8: two accumulators of kN / 2");
  constexpr int kStages = L::kStages;
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = smem_addr(smem_raw);
  const uint32_t base = (raw + 1023) & ~1023u;  // the 128-byte swizzle repeats every 1024 bytes
  const uint32_t full = base + L::kBar, empty = full + 8 * kStages;
  float* tile_f = reinterpret_cast<float*>(smem_raw + (base - raw));  // the partial tile, over the stages

  const int split = blockIdx.x;  // the CTA's rank in its cluster (cluster dims (splits, 1, 1))
  const int t0 = blockIdx.y * kN;  // the token tile's first token
  const int tile = blockIdx.z;
  const int c_begin = split * p.k_chunks / p.splits;
  const int n_chunks = (split + 1) * p.k_chunks / p.splits - c_begin;
  // Tiles start at different chunks of their K run: CTAs in lockstep at the same column of rows
  // 2-4 KB apart would all address the same few DRAM channels.
  const int rot = n_chunks > 0 ? tile % n_chunks : 0;
  const int tid = threadIdx.x;
  // The folded norm: each token's 1 / rms (a consumer), and each (token, 4 columns) item's sum of
  // squares of the new residual (a producer), summed in column order after the epilogue.
  constexpr bool kFold = kFoldable<kN, kFp8>;
  __shared__ float norm_inv[kFold && E != DecodeGemmEpilogue::kAddF32 ? kN : 1];
  __shared__ float fold_red[kFold && E == DecodeGemmEpilogue::kAddF32 ? kN * (kCtaRows / 4) : 1];
  // Weight rows of each warpgroup: 128 consecutive rows, or 64 gate rows and their up rows.
  const int w_row0 = kGated ? tile * kWgRows : tile * kCtaRows;
  const int w_row1 = kGated ? p.n + tile * kWgRows : tile * kCtaRows + kWgRows;

  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full + 8 * s, 1);
      mbar_init(empty + 8 * s, 256);  // every consumer thread arrives
    }
    mbar_init_fence();
  }
  __syncthreads();
  pdl_launch_dependents();

  // The warp index through a shuffle: ptxas then knows it is warp-uniform (wgmma off a
  // "divergent path", see prefill_attention_wgmma.cu).
  const int warp = __shfl_sync(0xffffffffu, tid / 32, 0);
  if (warp == 8) {
    if ((tid & 31) == 0) {
      auto load_w = [&](int i) {
        const uint32_t st = base + (i % kStages) * L::kStageBytes;
        const int col = (c_begin + (i + rot) % n_chunks) * kChunkElems;
        mbar_expect_tx(full + 8 * (i % kStages), L::kStageBytes);
        tma_load_2d(st, &p.w_map, full + 8 * (i % kStages), col, w_row0);
        tma_load_2d(st + kWgRows * 128, &p.w_map, full + 8 * (i % kStages), col, w_row1);
      };
      auto load_x = [&](int i) {
        const uint32_t st = base + (i % kStages) * L::kStageBytes;
        tma_load_2d(st + kWBytes, &p.x_map, full + 8 * (i % kStages), (c_begin + (i + rot) % n_chunks) * kChunkElems,
                    t0);
        if constexpr (kXPlanes == 2) {
          tma_load_2d(st + kWBytes + kN * 128, &p.x_map, full + 8 * (i % kStages),
                      (c_begin + (i + rot) % n_chunks) * kChunkElems, p.x_lo_row + t0);
        }
      };
      const int pre = n_chunks < kStages ? n_chunks : kStages;
      for (int i = 0; i < pre; ++i) load_w(i);  // weights do not depend on the previous kernel
      pdl_wait();
      for (int i = 0; i < pre; ++i) load_x(i);
      for (int i = pre; i < n_chunks; ++i) {
        mbar_wait(empty + 8 * (i % kStages), (i / kStages - 1) & 1);
        load_w(i);
        load_x(i);
      }
    }
    __syncwarp();
  } else {
    if constexpr (kFold && E != DecodeGemmEpilogue::kAddF32) {
      // The producer's partial sums of squares: after the wait, while the first stages arrive (the
      // consumers wait for x, which the producer warp loads only after its own wait, anyway).
      if (p.norm_parts != nullptr) {
        pdl_wait();
        if (tid < kN && t0 + tid < p.tokens) {
          float ss = 0.0f;
          for (int i = 0; i < p.norm_nparts; ++i) ss += p.norm_parts[static_cast<int64_t>(i) * p.norm_stride + t0 + tid];
          norm_inv[tid] = rsqrtf(ss / static_cast<float>(p.norm_k) + p.norm_eps);
        }
      }
    }
    const int wg = warp >> 2;
    const int wt = tid & 127;
    float acc[kN / 2];
#pragma unroll
    for (int i = 0; i < kN / 2; ++i) acc[i] = 0.0f;
    // kFp8: a chunk's product, and the grid row of this warpgroup's weight rows (64 rows inside one
    // block: launch_decode_gemm checks that block_rows is a multiple of 64).
    float fresh[kFp8 ? kN / 2 : 1];
#pragma unroll
    for (int i = 0; i < (kFp8 ? kN / 2 : 1); ++i) fresh[i] = 0.0f;
    [[maybe_unused]] const float* w_scales = nullptr;
    if constexpr (kFp8) w_scales = p.w_grid + min((wg == 0 ? w_row0 : w_row1) / p.block_rows, p.grid_rows - 1) * p.grid_cols;
    for (int i = 0; i < n_chunks; ++i) {
      const int s = i % kStages;
      float w_scale = 1.0f;  // read before the wait: its latency hides behind the stage's
      if constexpr (kFp8) w_scale = __ldg(w_scales + (c_begin + (i + rot) % n_chunks) / p.chunks_a_block);
      mbar_wait(full + 8 * s, (i / kStages) & 1);
      const uint32_t w_tile = base + s * L::kStageBytes + wg * kWgRows * 128;
      const uint32_t x_tile = base + s * L::kStageBytes + kWBytes;
      if constexpr (kFp8) {
        pin(fresh);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4 * kXPlanes; ++kk) {  // (the second term's tile right after the first's)
          WgmmaSSE4m3<kN>::run(fresh, smem_desc(w_tile + (kk % 4) * 32, 16, 1024),
                               smem_desc(x_tile + (kk / 4) * kN * 128 + (kk % 4) * 32, 16, 1024), kk > 0);
        }
        wgmma_commit();
        wgmma_wait_all();
        pin(fresh);
        mbar_arrive(empty + 8 * s);
#pragma unroll
        for (int j = 0; j < kN / 2; ++j) acc[j] = fmaf(fresh[j], w_scale, acc[j]);
      } else {
        pin(acc);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
          WgmmaSS<kN>::run(acc, smem_desc(w_tile + kk * 32, 16, 1024), smem_desc(x_tile + kk * 32, 16, 1024), 1);
        }
        wgmma_commit();
        wgmma_wait_all();
        pin(acc);
        mbar_arrive(empty + 8 * s);
      }
    }
    // Both warpgroups are past their last wgmma (and every TMA write has landed): the partial
    // tile may overwrite the stages. Accumulator i of a thread is weight row 16 w + g (+ 8) of its
    // warpgroup and token 8 (i / 4) + 2 t4 (+ 1).
    named_bar_sync(1, 256);
    const int lane = wt & 31, g = lane >> 2, t4 = lane & 3;
    const int row = wg * kWgRows + (wt >> 5) * 16 + g;
#pragma unroll
    for (int i = 0; i < kN / 8; ++i) {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int t = 8 * i + 2 * t4 + (c & 1);
        tile_f[t * kTileLd + row + 8 * (c >> 1)] = acc[4 * i + c];
      }
    }
  }

  if (p.splits > 1) {
    cluster_sync();
  } else {
    __syncthreads();
  }
  pdl_wait();  // before touching out (the previous kernels may still read or write it)

  // This CTA's token rows of the summed tile (t local to the token tile), four features per item.
  const int tile_tokens = min(kN, p.tokens - t0);
  const int t_begin = split * tile_tokens / p.splits;
  const int t_end = (split + 1) * tile_tokens / p.splits;
  constexpr int kGroups = (kGated ? kWgRows : kCtaRows) / 4;
  const int items = (t_end - t_begin) * kGroups;
  for (int it = tid; it < items; it += kThreads) {
    const int t = t_begin + it / kGroups;
    const int j = (it % kGroups) * 4;
    const float* at = tile_f + t * kTileLd + j;
    float4 a = cluster_sum_f4(at, p.splits);
    [[maybe_unused]] float x_scale = 1.0f;
    if constexpr (kFp8) {
      x_scale = p.x_scales[t0 + t];
      a = make_float4(a.x * x_scale, a.y * x_scale, a.z * x_scale, a.w * x_scale);
    }
    if constexpr (kFold && E != DecodeGemmEpilogue::kAddF32) {
      if (p.norm_parts != nullptr) {  // x = rms_norm(r) * rms(r): the product times 1 / rms
        x_scale = norm_inv[t];
        a = make_float4(a.x * x_scale, a.y * x_scale, a.z * x_scale, a.w * x_scale);
      }
    }
    if constexpr (kGated) {
      const int col = tile * kWgRows + j;
      if (col >= p.n) continue;
      float4 u = cluster_sum_f4(at + kWgRows, p.splits);
      if constexpr (kFp8 || kFold) u = make_float4(u.x * x_scale, u.y * x_scale, u.z * x_scale, u.w * x_scale);
      const float o[4] = {gate_act(a.x, p.act) * u.x, gate_act(a.y, p.act) * u.y, gate_act(a.z, p.act) * u.z,
                          gate_act(a.w, p.act) * u.w};
      *reinterpret_cast<uint2*>(static_cast<__nv_bfloat16*>(p.out) + static_cast<int64_t>(t0 + t) * p.n + col) =
          make_uint2(pack_bf16x2(o[0], o[1]), pack_bf16x2(o[2], o[3]));
    } else {
      const int col = tile * kCtaRows + j;
      if (col >= p.n) {
        if constexpr (kFold && E == DecodeGemmEpilogue::kAddF32) fold_red[t * (kCtaRows / 4) + j / 4] = 0.0f;
        continue;
      }
      const int64_t at_out = static_cast<int64_t>(t0 + t) * p.n + col;
      float o[4] = {a.x, a.y, a.z, a.w};
      if constexpr (E == DecodeGemmEpilogue::kAddF32) {
        float4* dst = reinterpret_cast<float4*>(static_cast<float*>(p.out) + at_out);
        const float4 r = *dst;
        const float4 v = make_float4(r.x + o[0], r.y + o[1], r.z + o[2], r.w + o[3]);
        *dst = v;
        if constexpr (kFold) {
          if (p.fold_w != nullptr) {  // the next norm's input, times its weight, and the squares
            const float g0 = load_weight(p.fold_w, p.fold_w_f32, col), g1 = load_weight(p.fold_w, p.fold_w_f32, col + 1);
            const float g2 = load_weight(p.fold_w, p.fold_w_f32, col + 2), g3 = load_weight(p.fold_w, p.fold_w_f32, col + 3);
            *reinterpret_cast<uint2*>(p.fold_out + at_out) =
                make_uint2(pack_bf16x2(v.x * g0, v.y * g1), pack_bf16x2(v.z * g2, v.w * g3));
            fold_red[t * (kCtaRows / 4) + j / 4] = v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
          }
        }
      } else {
        if (p.bias != nullptr) {
#pragma unroll
          for (int e = 0; e < 4; ++e) o[e] += load_weight(p.bias, p.bias_f32, col + e);
        }
        if (p.out_f32) {
          *reinterpret_cast<float4*>(static_cast<float*>(p.out) + at_out) = make_float4(o[0], o[1], o[2], o[3]);
        } else {
          *reinterpret_cast<uint2*>(static_cast<__nv_bfloat16*>(p.out) + at_out) =
              make_uint2(pack_bf16x2(o[0], o[1]), pack_bf16x2(o[2], o[3]));
        }
      }
    }
  }
  if constexpr (kFold && E == DecodeGemmEpilogue::kAddF32) {
    if (p.fold_w != nullptr) {  // this CTA's token rows: the tile's sum of squares, columns in order
      __syncthreads();
      if (tid < t_end - t_begin) {
        const int t = t_begin + tid;
        float ss = 0.0f;
#pragma unroll 8
        for (int g = 0; g < kCtaRows / 4; ++g) ss += fold_red[t * (kCtaRows / 4) + g];
        p.fold_parts[static_cast<int64_t>(tile) * p.fold_stride + t0 + t] = ss;
      }
    }
  }
  // No CTA leaves (and frees its tile) while the others of its cluster may still read it.
  if (p.splits > 1) cluster_sync();
#else
  __trap();  // built without sm_90a: CudaBackend::use_decode_gemm never picks this kernel off sm_90
#endif
}

template <int kN, int kXPlanes = 1>
cudaLaunchConfig_t launch_config(int splits, int token_tiles, int tiles, cudaStream_t stream,
                                 cudaLaunchAttribute (&attr)[2]) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(splits, token_tiles, tiles);  // a weight tile's token tiles adjacent: they share its rows in L2
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = GemmLayout<kN, kXPlanes>::kSmemBytes;
  cfg.stream = stream;
  int n_attr = 0;
  attr[n_attr].id = cudaLaunchAttributeClusterDimension;
  attr[n_attr].val.clusterDim.x = splits;
  attr[n_attr].val.clusterDim.y = 1;
  attr[n_attr].val.clusterDim.z = 1;
  ++n_attr;
  if (pdl_enabled()) {
    attr[n_attr].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n_attr].val.programmaticStreamSerializationAllowed = 1;
    ++n_attr;
  }
  cfg.attrs = attr;
  cfg.numAttrs = n_attr;
  return cfg;
}

// How many clusters of s CTAs of this kernel the GPU holds at once, for s = 0..kMaxSplits (entry 0
// unused), once per device: a cluster's CTAs share a GPC, and GPCs differ in their SM counts.
// Eager launches ask on every call, so only the first on a device takes the lock.
template <int kN, DecodeGemmEpilogue E, bool kFp8, int kXPlanes>
const std::array<int, kMaxSplits + 1>& cluster_capacity() {
  constexpr int kMaxDevices = 64;
  static std::mutex mu;
  static std::array<int, kMaxSplits + 1> cap[kMaxDevices];
  static std::atomic<bool> ready[kMaxDevices] = {};
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  MINIVLLM_CHECK(dev >= 0 && dev < kMaxDevices) << "decode_gemm: device " << dev;
  if (ready[dev].load(std::memory_order_acquire)) return cap[dev];
  std::lock_guard<std::mutex> lock(mu);
  if (!ready[dev].load(std::memory_order_relaxed)) {
    allow_dynamic_smem<decode_gemm_kernel<kN, E, kFp8, kXPlanes>>(GemmLayout<kN, kXPlanes>::kSmemBytes);
    cap[dev][0] = 0;
    for (int s = 1; s <= kMaxSplits; ++s) {
      cudaLaunchAttribute attr[2];
      const cudaLaunchConfig_t cfg = launch_config<kN, kXPlanes>(s, 1, 1, nullptr, attr);
      CUDA_CHECK(cudaOccupancyMaxActiveClusters(&cap[dev][s], decode_gemm_kernel<kN, E, kFp8, kXPlanes>, &cfg));
    }
    ready[dev].store(true, std::memory_order_release);  // cap[dev] is complete before anyone reads it unlocked
  }
  return cap[dev];
}

template <int kN, DecodeGemmEpilogue E, bool kFp8, int kXPlanes>
void launch_planes(GemmParams p, int token_tiles, int tiles, cudaStream_t stream) {
  allow_dynamic_smem<decode_gemm_kernel<kN, E, kFp8, kXPlanes>>(GemmLayout<kN, kXPlanes>::kSmemBytes);
  if (p.splits == 0) {
    p.splits = decode_gemm_splits(int64_t{tiles} * token_tiles, p.k_chunks,
                                  cluster_capacity<kN, E, kFp8, kXPlanes>().data());
  }
  cudaLaunchAttribute attr[2];
  const cudaLaunchConfig_t cfg = launch_config<kN, kXPlanes>(p.splits, token_tiles, tiles, stream, attr);
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, decode_gemm_kernel<kN, E, kFp8, kXPlanes>, p));
}

template <int kN, DecodeGemmEpilogue E, bool kFp8>
void launch_of(const GemmParams& p, int token_tiles, int tiles, cudaStream_t stream) {
  if constexpr (kFp8) {
    if (p.x_lo_row > 0) return launch_planes<kN, E, true, 2>(p, token_tiles, tiles, stream);
  }
  launch_planes<kN, E, kFp8, 1>(p, token_tiles, tiles, stream);
}

// The token counts a kernel is built for (wgmma's N, the x box's rows): a batch takes the first
// that holds it. FP8 kernels stop at kFp8MaxBox (their second accumulator): a batch past it goes in
// equal tiles, each in the first box that holds it. The FP8 boxes step by 16: their steps are
// compute-bound past ~64 tokens, so a box's padding tokens cost their share of the time.
constexpr int kTokenBoxes[] = {16, 32, 64, 96, 128, 160, 192, 224, 256};
constexpr int kFp8TokenBoxes[] = {16, 32, 48, 64, 80, 96, 112, 128};
constexpr int kFp8MaxBox = 128;

template <bool kFp8>
constexpr const auto& token_boxes() {
  if constexpr (kFp8) {
    return kFp8TokenBoxes;
  } else {
    return kTokenBoxes;
  }
}

template <bool kFp8>
int token_box(int tokens) {
  for (int b : token_boxes<kFp8>()) {
    if (tokens <= b) return b;
  }
  return token_boxes<kFp8>()[std::size(token_boxes<kFp8>()) - 1];
}

// The kernel built for box token_boxes<kFp8>()[I] if `box` is it, else the next one's.
template <DecodeGemmEpilogue E, bool kFp8, size_t I = 0>
void launch_for_box(int box, const GemmParams& p, int token_tiles, int tiles, cudaStream_t stream) {
  constexpr int kBox = token_boxes<kFp8>()[I];
  static_assert(!kFp8 || kBox <= kFp8MaxBox, "FP8 boxes");
  if constexpr (I + 1 < std::size(token_boxes<kFp8>())) {
    if (box != kBox) return launch_for_box<E, kFp8, I + 1>(box, p, token_tiles, tiles, stream);
  }
  launch_of<kBox, E, kFp8>(p, token_tiles, tiles, stream);
}

template <bool kFp8>
void launch_with_epilogue(DecodeGemmEpilogue e, int box, const GemmParams& p, int token_tiles, int tiles,
                          cudaStream_t stream) {
  switch (e) {
    case DecodeGemmEpilogue::kStore:
      launch_for_box<DecodeGemmEpilogue::kStore, kFp8>(box, p, token_tiles, tiles, stream);
      break;
    case DecodeGemmEpilogue::kAddF32:
      launch_for_box<DecodeGemmEpilogue::kAddF32, kFp8>(box, p, token_tiles, tiles, stream);
      break;
    case DecodeGemmEpilogue::kActMul:
      launch_for_box<DecodeGemmEpilogue::kActMul, kFp8>(box, p, token_tiles, tiles, stream);
      break;
  }
}

}  // namespace

int decode_gemm_splits(int64_t tiles, int64_t k_chunks, const int* cluster_capacity) {
  // The fewest K chunks per CTA with every cluster resident at once (a second wave of clusters
  // doubled the time, PERFORMANCE.md); among equals, the fewest splits (each adds a partial tile
  // to sum). One split is always allowed: that grid needs no cluster.
  int best = 1;
  int64_t best_cost = INT64_MAX;
  for (int s = 1; s <= kMaxSplits && s <= k_chunks; ++s) {
    if (s > 1 && tiles > cluster_capacity[s]) break;
    const int64_t cost = (k_chunks + s - 1) / s;
    if (cost < best_cost) {
      best = s;
      best_cost = cost;
    }
  }
  return best;
}

bool decode_gemm_fp8_takes(const Fp8Weight& w, int64_t tokens, int64_t n, int64_t k, bool gated) {
  const int64_t rows = gated ? 2 * n : n;
  return tokens >= 1 && tokens <= kDecodeGemmMaxTokens && n % 8 == 0 && k % 128 == 0 && (!gated || n % 64 == 0) &&
         w.block_rows >= 64 && w.block_rows % 64 == 0 && w.block_cols % 128 == 0 &&
         w.grid_cols == (k + w.block_cols - 1) / w.block_cols && rows <= INT32_MAX &&
         reinterpret_cast<uintptr_t>(w.codes) % 16 == 0;
}

void launch_decode_gemm(const DecodeGemmArgs& a, cudaStream_t stream) {
  MINIVLLM_CHECK(a.tokens >= 1 && a.tokens <= kDecodeGemmMaxTokens && a.k % 8 == 0 && a.n % 8 == 0)
      << "decode_gemm: x [" << a.tokens << ", " << a.k << "], " << a.n << " outputs (needs 1.." << kDecodeGemmMaxTokens
      << " tokens and multiples of 8)";
  const bool gated = a.epilogue == DecodeGemmEpilogue::kActMul;
  const bool fp8 = a.x_scales != nullptr;
  MINIVLLM_CHECK(!fp8 || decode_gemm_fp8_takes(a.w_fp8, a.tokens, a.n, a.k, gated))
      << "decode_gemm: FP8 weight of " << a.w_fp8.block_rows << " x " << a.w_fp8.block_cols << " blocks for x ["
      << a.tokens << ", " << a.k << "], " << a.n << " outputs (needs K of 128s, blocks of 64-row and 128-column "
      << "multiples" << (gated ? ", and the gated half of 64s" : "") << ")";
  GemmParams p;
  std::memset(&p, 0, sizeof(p));
  const int64_t w_rows = gated ? 2 * a.n : a.n;
  // FP8: token tiles of at most kFp8MaxBox, as equal as the boxes allow.
  const int token_tiles = fp8 ? static_cast<int>((a.tokens + kFp8MaxBox - 1) / kFp8MaxBox) : 1;
  const int tile_tokens = static_cast<int>((a.tokens + token_tiles - 1) / token_tiles);
  const int box = fp8 ? token_box<true>(tile_tokens) : token_box<false>(tile_tokens);
  if (fp8) {
    p.w_map = make_e4m3_tma_map(a.w_fp8.codes, w_rows, a.k, a.k, kWgRows, "decode_gemm");
    p.x_map = make_e4m3_tma_map(a.x, a.x_two_terms ? 2 * a.tokens : a.tokens, a.k, a.k, box, "decode_gemm");
    p.x_lo_row = a.x_two_terms ? static_cast<int>(a.tokens) : 0;
    p.x_scales = a.x_scales;
    p.w_grid = a.w_fp8.grid;
    p.grid_cols = static_cast<int>(a.w_fp8.grid_cols);
    p.grid_rows = static_cast<int>((w_rows + a.w_fp8.block_rows - 1) / a.w_fp8.block_rows);
    p.block_rows = static_cast<int>(a.w_fp8.block_rows);
    p.chunks_a_block = static_cast<int>(a.w_fp8.block_cols / 128);
  } else {
    p.w_map = make_bf16_tma_map(a.w, w_rows, a.k, a.k, kWgRows, "decode_gemm");
    p.x_map = make_bf16_tma_map(a.x, a.tokens, a.k, a.k, box, "decode_gemm");
  }
  p.out = a.out;
  p.bias = a.bias;
  p.bias_f32 = a.bias_f32;
  p.out_f32 = a.out_f32;
  p.tokens = static_cast<int>(a.tokens);
  p.n = static_cast<int>(a.n);
  p.k_chunks = static_cast<int>(fp8 ? a.k / 128 : (a.k + 63) / 64);
  p.act = a.act;
  const int64_t tiles = (a.n + (gated ? kWgRows : kCtaRows) - 1) / (gated ? kWgRows : kCtaRows);
  MINIVLLM_CHECK(tiles <= 65535) << "decode_gemm: " << a.n << " outputs (at most 65,535 tiles of 128)";
  p.splits = a.splits > 0 ? std::min<int>({a.splits, kMaxSplits, p.k_chunks}) : 0;  // 0: launch_of picks
  if (a.fold_w != nullptr || a.norm_parts != nullptr) {
    MINIVLLM_CHECK(!fp8 && a.tokens <= kFoldMaxTokens && a.fold_stride >= a.tokens &&
                   (a.fold_w == nullptr ? a.epilogue != DecodeGemmEpilogue::kAddF32
                                        : a.epilogue == DecodeGemmEpilogue::kAddF32 && a.fold_out != nullptr &&
                                              a.fold_parts != nullptr && a.norm_parts == nullptr))
        << "decode_gemm: a folded norm needs bf16 x of at most " << kFoldMaxTokens << " tokens (" << a.tokens
        << ", parts of stride " << a.fold_stride << "), the add's epilogue to make it and a store or gated "
        << "epilogue to take it";
    p.fold_w = a.fold_w;
    p.fold_w_f32 = a.fold_w_f32;
    p.fold_out = static_cast<__nv_bfloat16*>(a.fold_out);
    p.fold_parts = a.fold_parts;
    p.fold_stride = static_cast<int>(a.fold_stride);
    p.norm_parts = a.norm_parts;
    p.norm_nparts = static_cast<int>((a.k + kCtaRows - 1) / kCtaRows);  // the producer's tiles of K
    p.norm_stride = static_cast<int>(a.fold_stride);
    p.norm_k = static_cast<int>(a.k);
    p.norm_eps = a.norm_eps;
  }
  if (fp8) {
    launch_with_epilogue<true>(a.epilogue, box, p, token_tiles, static_cast<int>(tiles), stream);
  } else {
    launch_with_epilogue<false>(a.epilogue, box, p, token_tiles, static_cast<int>(tiles), stream);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace minivllm::cuda
