// A sparse layer's MLP (vLLM's FusedMoE): the router, softmax top-k routing, and the experts'
// gated MLPs, their outputs weighted by the routing and summed into the residual stream. The
// router is replicated; the experts are split over the ranks one of two ways:
//   tensor parallelism (default)  every rank holds every expert, rows [r I/ws, (r+1) I/ws) of its
//                                 gate and up and those columns of its down: partial sums, as the
//                                 dense MLP's (MergedColumn- then RowParallelLinear per expert);
//   expert parallelism            rank r holds experts [r E/ws, (r+1) E/ws) whole and computes
//                                 their contribution for every token (the others add nothing).
// Either way each rank's partial output is one [T, H] tensor, summed by one all-reduce per layer,
// as the dense MLP's down projection is.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "backend/communicator.h"
#include "loader/model_config.h"
#include "model/parallel_linear.h"

namespace minivllm {

// The activations of the MoE layers, allocated once for the model's largest batch (T rows) and
// shared by every sparse layer.
struct MoeBuffers {
  Tensor router_logits;  // f32 [T, E]
  Tensor topk_ids;       // i32 [T, k]
  Tensor topk_weights;   // f32 [T, k]
  MoeScratch scratch;    // the backend's working space (backend.h)
  Tensor partial;        // [T, H] in the activation dtype: this rank's sum before the all-reduce (world_size > 1)
  // The shared expert's rows (MoeConfig::shared_expert_intermediate_size > 0; I_s its width, split over
  // the ranks as the dense MLP's): gate/up [T, 2 I_s / ws], its activation [T, I_s / ws], and the down
  // projection's product [T, H] (scratch of Backend::linear_add_residual).
  Tensor shared_gate_up, shared_act, shared_out;
  static MoeBuffers allocate(Backend& b, const ModelConfig& cfg, int64_t max_tokens, int world_size,
                             bool expert_parallel);
};

class FusedMoE {
 public:
  FusedMoE() = default;
  // Layer `layer`'s router and this rank's experts (HF names from the registry row).
  FusedMoE(const ShardContext& ctx, const ModelConfig& cfg, int64_t layer, bool expert_parallel);
  bool defined() const { return router_.defined(); }

  // residual (f32 [T, H]) += the experts' weighted outputs for x (the normed hidden, [T, H]), and
  // the shared expert's where the model has one, summed over ranks. With `pro` (x not normed yet: x
  // is pro->normed), the norm comes first, in the backend's call with the router and the route
  // (Backend::rms_norm_moe_route; its own call where a shared expert at world_size > 1 reads x
  // first). Returns, as
  // RowParallelLinear::forward_add_residual_norm, whether `normed` now holds rms_norm(residual) *
  // norm_weight (world_size > 1 only; else the caller norms).
  bool forward_add_residual_norm(Backend& b, Communicator& comm, const NormPrologue* pro, const Tensor& x,
                                 const MoeBuffers& buf, const Tensor& residual, const Tensor& norm_weight, float eps,
                                 const Tensor& normed, Activation act) const;

  // This rank's experts and each one's width: [first, first + count) and I / ws, or E / ws whole experts.
  static int64_t num_local_experts(const MoeConfig& moe, int world_size, bool expert_parallel);
  static int64_t local_width(const MoeConfig& moe, int world_size, bool expert_parallel);

 private:
  // The shared expert's output for x into buf.shared_act, before its down projection: act(x W_g^T) *
  // (x W_u^T), scaled per row by sigmoid(x . g) where the layer has a gate.
  Tensor shared_expert_act(Backend& b, const Tensor& x, const MoeBuffers& buf, Activation act) const;

  Tensor router_;  // [E, H], replicated
  Tensor router_bias_;  // f32 [E] (gpt-oss), or empty
  MoeExpertWeights experts_;
  bool renormalize_ = false;
  // Routing by a score bias (MoeConfig::biased_routing): the bias, f32 [E] (empty: softmax top-k), the
  // scores' form, the groups and the weights' scale.
  Tensor score_bias_;
  bool sigmoid_scores_ = false;
  int groups_ = 1, topk_groups_ = 1;
  float routed_scale_ = 1.0f;
  // The shared expert (Qwen2-MoE), split over the ranks as the dense MLP; undefined where there is none.
  MergedColumnParallelLinear shared_gate_up_;
  RowParallelLinear shared_down_;
  Tensor shared_gate_;  // f32 [H], replicated; empty: the shared expert's output is not gated
};

// A clear error when world_size does not divide what the MoE layers split (the experts' width,
// or with expert parallelism their count; the shared expert's width either way), naming both numbers.
void check_moe_parallel_shapes(const MoeConfig& moe, int world_size, bool expert_parallel);

}  // namespace minivllm
