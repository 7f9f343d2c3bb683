// Host-callable launchers of the mixture-of-experts kernels (Backend::moe_route / moe_experts_add):
//   moe.cu       routing (softmax, top-k, renormalisation: a warp or a CTA per token), grouping the
//                (token, slot) pairs by expert (one CTA: count, prefix sum, stable scatter), and the
//                weighted sum of the experts' outputs into `out` (slot order, deterministic);
//   moe_norm_route.cu  at decode sizes, the norm, the router gemv and the routing in one launch;
//   moe_gemv.cu  the decode path (T <= kMoeGemvMaxTokens): gemvs over the (token, slot) pairs that
//                read only the chosen experts' rows, no grouping;
//   moe_gemm.cu  the grouped GEMMs (mma.sync, bf16): grid (column tile, row tile of any expert),
//                each CTA reading its expert, count and offset from device memory.
// Plain pointers and a stream, as cuda_kernels.h; the checks live in cuda_moe.cc. Nothing here
// synchronises with the host or sizes a grid from device data, so a whole layer can be captured.
// Every row width (hidden, inter) is a multiple of 8 and every row 16-byte aligned.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/activation.h"

namespace minivllm::cuda {

// A rank's experts' weights, passed to the kernels by value (a kernel parameter, so a captured graph
// holds the pointers and no table need be uploaded): local expert e is w[e].
constexpr int kMoeMaxLocalExperts = 256;
struct MoeExpertTable {
  const void* w[kMoeMaxLocalExperts];
};

// Routing keeps a row's logits in its warp's registers: up to 16 a lane.
constexpr int kMoeRouteMaxExperts = 512;
// The experts' decode gate/up gemv can route for itself (MoeGateRoute) over up to 4 experts a lane.
constexpr int kMoeWarpRouteMaxExperts = 128;
// The grouped GEMMs' row tiles: 64 rows, or 32 where the experts average few rows each (decode
// batches), so that less of the tensor-core work and of A's shared-memory reads is padding.
// `tiles` counts each expert's rows in tiles of MoeShape::tile_rows.
constexpr int kMoeTileRows = 64;
constexpr int kMoeSmallTileRows = 32;

// One moe_experts_add call's shape: T tokens x top-k slots = pairs; this rank's experts are
// [first_expert, first_expert + num_local) of the layer's (a pair routed elsewhere adds nothing).
struct MoeShape {
  int64_t tokens;
  int k;
  int64_t hidden;  // H
  int64_t inter;   // this rank's width of each expert, I_r
  int first_expert;
  int num_local;
  int tile_rows = kMoeTileRows;  // the grouped path's row tile: kMoeTileRows or kMoeSmallTileRows
  int down_rows = 4;             // the decode down gemv's output rows a CTA: 2, 4 or 8 (MINIVLLM_MOE_DOWN_ROWS[_ONE])
  int gate_chunks = 2;           // the decode gate/up gemv's chunks of each row in flight a lane: 2 or 4
};

// ids i32[T, k], weights f32[T, k] from logits f32[T, E] (Backend::moe_route's contract); E <=
// kMoeRouteMaxExperts, 1 <= k <= E.
// A programmatic dependent launch, as the gemvs around it at decode. cta_per_token (at most
// kMoeRouteCtaMaxTokens tokens): a CTA a token instead of a warp (moe.cu).
constexpr int64_t kMoeRouteCtaMaxTokens = 64;
void launch_moe_route(const float* logits, int64_t tokens, int experts, int k, bool renormalize, int32_t* ids,
                      float* weights, bool cta_per_token, cudaStream_t stream);

// Backend::moe_route_biased's ids and weights from logits f32[T, E] and bias f32[E]: a CTA a token;
// E <= kMoeRouteMaxExperts, at most 64 groups.
void launch_moe_route_biased(const float* logits, const float* bias, bool sigmoid, int64_t tokens, int experts, int k,
                             int groups, int topk_groups, bool renormalize, float scale, int32_t* ids, float* weights,
                             cudaStream_t stream);

// Backend::rms_norm_moe_route at decode sizes, one launch (moe_norm_route.cu): normed bf16 [T, H]
// = RMSNorm(residual f32 [T, H]) by norm_w (f32 or bf16) as launch_rms_norm writes it, logits f32
// [T, E] = normed router^T (router bf16 [E, H]), then ids and weights as launch_moe_route. A
// cluster of CTAs a token; moe_norm_route_fits says which shapes it takes.
bool moe_norm_route_fits(int64_t tokens, int64_t hidden, int experts);
// route false: the normed rows and the logits only (ids and weights untouched), for a gate/up gemv
// that routes for itself (MoeGateRoute); no cluster barrier then.
void launch_moe_norm_route(const float* residual, const void* norm_w, bool norm_f32, float eps, const void* router,
                           int64_t tokens, int64_t hidden, int experts, int k, bool renormalize, void* normed,
                           float* logits, int32_t* ids, float* weights, cudaStream_t stream, bool route = true);

// The pairs t * k + j of ids whose expert is local, grouped by expert in pair order (the CPU's
// moe_group_by_expert): offsets i32[num_local + 1], entries i32[offsets[num_local]] (the rest of
// entries untouched), tiles i32[num_local + 1] (tiles[e]: the first row tile of expert e, rows in
// tiles of s.tile_rows; tiles[num_local] the total). One CTA; num_local <= kMoeMaxLocalExperts.
void launch_moe_group(const int32_t* ids, const MoeShape& s, int32_t* offsets, int32_t* entries, int32_t* tiles,
                      cudaStream_t stream);

// The row tiles the grouped GEMMs can need for `pairs` pairs over num_local experts: the grid's
// height, known on the host (sum over experts of ceil(n_e / tile_rows) never exceeds it).
int64_t moe_max_row_tiles(int64_t pairs, int num_local, int tile_rows);

// ---- the decode path (moe_gemv.cu) ----
// The gate/up gemv routing for itself: every warp takes its pair's choice from the token's logits
// (warp_route_pick: launch_moe_route's ids, its weights where renormalized), and the CTAs of column
// block 0 write the pair's id and weight for the down gemv. A layer then has no route between its
// router gemv and its experts (PERFORMANCE.md, "Stop 97").
struct MoeGateRoute {
  const float* logits;  // f32 [T, experts]
  int experts;          // <= kMoeWarpRouteMaxExperts
  bool renormalize;
  int32_t* ids;    // i32 [T, k], written
  float* weights;  // f32 [T, k], written
};
// act_out[t * k + j, :] (bf16 [T k, I]) = act(x[t] W_gate,e^T) * (x[t] W_up,e^T), e = ids[t, j], for
// the local pairs (the others' rows are not written); gate_up.w[e] = [W_gate; W_up] ([2 I, H]).
// route: not null, the pairs' experts come from it (ids is then not read).
void launch_moe_gemv_act_mul(const void* x, const int32_t* ids, const MoeExpertTable& gate_up, const MoeShape& s,
                             Activation act, void* act_out, cudaStream_t stream, const MoeGateRoute* route = nullptr);
// out[t, :] (f32, or bf16 when !out_f32) += sum over the local slots j, in slot order, of
// weights[t, j] * (act[t * k + j] W_down,e^T); down.w[e] is [H, I].
void launch_moe_gemv_down_add(const void* act, const int32_t* ids, const float* weights, const MoeExpertTable& down,
                              const MoeShape& s, void* out, bool out_f32, cudaStream_t stream);

// ---- the grouped path (moe_gemm.cu), after launch_moe_group ----
// act_out[r, :] (bf16, r = a grouped position < offsets[num_local]) = act(x[entries[r] / k] W_gate^T) *
// (... W_up^T) of the expert r belongs to.
void launch_moe_gemm_act_mul(const void* x, const int32_t* offsets, const int32_t* entries, const int32_t* tiles,
                             const MoeExpertTable& gate_up, const MoeShape& s, Activation act, void* act_out,
                             cudaStream_t stream);
// y[entries[r], :] (bf16 [T k, H], rows in pair order) = act[r] W_down^T of the expert r belongs to.
void launch_moe_gemm_down(const void* act, const int32_t* offsets, const int32_t* entries, const int32_t* tiles,
                          const MoeExpertTable& down, const MoeShape& s, void* y, cudaStream_t stream);
// out[t, :] (f32, or bf16 when !out_f32) += sum over the local slots j, in slot order, of
// weights[t, j] * y[t * k + j] (moe.cu).
void launch_moe_combine(const void* y, const int32_t* ids, const float* weights, const MoeShape& s, void* out,
                        bool out_f32, cudaStream_t stream);

}  // namespace minivllm::cuda
