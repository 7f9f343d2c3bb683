#include "model/fused_moe.h"

#include <algorithm>

#include "common/check.h"

namespace minivllm {
namespace {

// A whole [rows, cols] tensor: expert parallelism's experts and the replicated router.
ShardPart whole(const std::string& name, int64_t rows, int64_t cols) {
  return ShardPart{name, {rows, cols}, 0, 0, rows};
}

// A replicated vector of n values that checkpoints store as [n] or [1, n] (the shared expert's gate,
// the router's score bias), uploaded in f32 (the kernels take it so).
Tensor upload_f32_row(const ShardContext& ctx, const std::string& name, int64_t n, const std::string& source) {
  const Tensor stored = ctx.src.get_f32(name);
  MINIVLLM_CHECK(stored.numel() == n && stored.size(-1) == n)
      << source << ": " << name << " has shape " << stored.describe() << ", expected [" << n << "] or [1, " << n << "]";
  Tensor row = host_tensor(DType::kF32, {n});  // (the source's tensor may be a view of its file)
  std::copy_n(stored.ptr<float>(), n, row.ptr<float>());
  return ctx.backend.upload_weight(row, /*keep_f32=*/true);
}

}  // namespace

void check_moe_parallel_shapes(const MoeConfig& moe, int world_size, bool expert_parallel) {
  if (!moe.any()) return;
  if (expert_parallel) {
    MINIVLLM_CHECK(moe.num_experts % world_size == 0)
        << "expert parallelism: the model's num_experts (" << moe.num_experts << ") does not divide by world_size "
        << world_size;
  } else {
    MINIVLLM_CHECK(moe.moe_intermediate_size % world_size == 0)
        << "tensor parallelism: the model's moe_intermediate_size (" << moe.moe_intermediate_size
        << ") does not divide by world_size " << world_size << " (--enable-expert-parallel splits whole experts)";
  }
  MINIVLLM_CHECK(moe.shared_expert_intermediate_size % world_size == 0)
      << "tensor parallelism: the model's shared_expert_intermediate_size (" << moe.shared_expert_intermediate_size
      << ") does not divide by world_size " << world_size;
}

int64_t FusedMoE::num_local_experts(const MoeConfig& moe, int world_size, bool expert_parallel) {
  return expert_parallel ? moe.num_experts / world_size : moe.num_experts;
}

int64_t FusedMoE::local_width(const MoeConfig& moe, int world_size, bool expert_parallel) {
  return expert_parallel ? moe.moe_intermediate_size : moe.moe_intermediate_size / world_size;
}

MoeBuffers MoeBuffers::allocate(Backend& b, const ModelConfig& cfg, int64_t max_tokens, int world_size,
                                bool expert_parallel) {
  const MoeConfig& moe = cfg.moe;
  const int64_t t = max_tokens, h = cfg.hidden_size, k = moe.num_experts_per_tok;
  const int64_t inter = FusedMoE::local_width(moe, world_size, expert_parallel);
  MoeBuffers buf;
  buf.router_logits = b.empty(DType::kF32, {t, moe.num_experts});
  buf.topk_ids = b.empty(DType::kI32, {t, k});
  buf.topk_weights = b.empty(DType::kF32, {t, k});
  buf.scratch = b.allocate_moe_scratch(t, h, inter, static_cast<int>(k),
                                       FusedMoE::num_local_experts(moe, world_size, expert_parallel));
  if (world_size > 1) buf.partial = b.empty(b.activation_dtype(), {t, h});
  if (moe.shared_expert_intermediate_size > 0) {
    const int64_t shared = moe.shared_expert_intermediate_size / world_size;
    buf.shared_gate_up = b.empty(b.activation_dtype(), {t, 2 * shared});
    buf.shared_act = b.empty(b.activation_dtype(), {t, shared});
    buf.shared_out = b.empty(b.activation_dtype(), {t, h});
  }
  return buf;
}

FusedMoE::FusedMoE(const ShardContext& ctx, const ModelConfig& cfg, int64_t layer, bool expert_parallel)
    : renormalize_(cfg.moe.norm_topk_prob) {
  using R = WeightRole;
  const MoeConfig& moe = cfg.moe;
  const ArchitectureSpec& arch = *cfg.arch;
  const int64_t h = cfg.hidden_size, inter = moe.moe_intermediate_size, ws = ctx.world_size();
  const std::string router = weight_name(arch, WeightFormat::kHuggingFace, R::kMoeRouter, layer);
  MINIVLLM_CHECK(!router.empty()) << cfg.source << ": the " << cfg.arch_name << " row names no router weight";
  router_ = ctx.upload_rows({whole(router, moe.num_experts, h)});
  const bool biases = cfg.traits().gpt_oss_experts;  // the router's and the experts' (gpt-oss)
  if (biases) {
    router_bias_ = ctx.backend.upload_weight(
        ctx.replicated(weight_name(arch, WeightFormat::kHuggingFace, R::kMoeRouter, layer, "bias"), {moe.num_experts}),
        /*keep_f32=*/true);
  }
  if (moe.biased_routing) {
    // [E] (GLM-4.5's), or ERNIE's [1, E]
    score_bias_ = upload_f32_row(
        ctx, weight_name(arch, WeightFormat::kHuggingFace, R::kMoeScoreBias, layer, "e_score_correction_bias"),
        moe.num_experts, cfg.source);
    sigmoid_scores_ = moe.sigmoid_scores;
    groups_ = static_cast<int>(moe.num_groups);
    topk_groups_ = static_cast<int>(moe.topk_groups);
    routed_scale_ = static_cast<float>(moe.routed_scaling_factor);
  }
  const int64_t count = num_local_experts(moe, static_cast<int>(ws), expert_parallel);
  experts_.num_experts = moe.num_experts;
  experts_.first_expert = expert_parallel ? ctx.rank() * count : 0;
  // The experts in the types the backend's expert kernels take (Backend::keeps_expert_dtype).
  const ShardContext ex{ctx.src, ctx.backend, ctx.comm, /*experts=*/true};
  for (int64_t i = 0; i < count; ++i) {
    const int64_t e = experts_.first_expert + i;
    const std::string gate = expert_weight_name(arch, R::kExpertGateProj, layer, e);
    const std::string up = expert_weight_name(arch, R::kExpertUpProj, layer, e);
    const std::string down = expert_weight_name(arch, R::kExpertDownProj, layer, e);
    if (expert_parallel) {
      experts_.gate_up.push_back(ex.upload_rows({whole(gate, inter, h), whole(up, inter, h)}));
      experts_.down.push_back(ex.upload_rows({whole(down, h, inter)}));
    } else {  // this rank's rows of gate and up, its columns of down: the dense MLP's split
      experts_.gate_up.push_back(ex.upload_rows({ex.row_shard(gate, inter, h), ex.row_shard(up, inter, h)}));
      experts_.down.push_back(ex.upload_rows({ex.col_shard(down, h, inter)}));
    }
    if (!biases) continue;
    // gate's and up's biases for this rank's rows, one [2 I_r] vector; down's [H] where this rank adds it
    // (whole experts: each its own; split ones: rank 0's alone, the all-reduce adding it once).
    auto bias = [&](R role) { return module_name(arch, WeightFormat::kHuggingFace, role, layer, e) + ".bias"; };
    const int64_t width = expert_parallel ? inter : inter / ws, first = expert_parallel ? 0 : ctx.rank() * width;
    Tensor gu = host_tensor(DType::kF32, {2 * width});
    for (int part = 0; part < 2; ++part) {
      const Tensor b = ctx.src.get_f32_slice(bias(part == 0 ? R::kExpertGateProj : R::kExpertUpProj), {inter}, 0,
                                             first, width);
      std::copy(b.ptr<float>(), b.ptr<float>() + width, gu.ptr<float>() + part * width);
    }
    experts_.gate_up_bias.push_back(ctx.backend.upload_weight(gu, /*keep_f32=*/true));
    experts_.down_bias.push_back(expert_parallel || ctx.rank() == 0
                                     ? ctx.backend.upload_weight(ctx.replicated(bias(R::kExpertDownProj), {h}),
                                                                 /*keep_f32=*/true)
                                     : Tensor());
  }
  if (moe.shared_expert_intermediate_size == 0) return;
  const int64_t shared = moe.shared_expert_intermediate_size;
  auto module = [&](R role) { return module_name(arch, WeightFormat::kHuggingFace, role, layer); };
  shared_gate_up_ = MergedColumnParallelLinear(
      ctx, {module(R::kSharedExpertGateProj) + ".weight", module(R::kSharedExpertUpProj) + ".weight"}, h, shared);
  shared_down_ = RowParallelLinear(ctx, module(R::kSharedExpertDownProj), shared, h);
  const std::string gate = weight_name(arch, WeightFormat::kHuggingFace, R::kSharedExpertGate, layer);
  if (!gate.empty()) shared_gate_ = upload_f32_row(ctx, gate, h, cfg.source);  // [1, H]; llama.cpp's [H]
}

Tensor FusedMoE::shared_expert_act(Backend& b, const Tensor& x, const MoeBuffers& buf, Activation act) const {
  const int64_t n = x.size(0);
  const Tensor a = buf.shared_act.rows(0, n);
  b.linear_act_mul(x, shared_gate_up_.weight(), buf.shared_gate_up.rows(0, n), a, act);
  if (!shared_gate_.empty()) b.sigmoid_gate_rows(x, shared_gate_, a);
  return a;
}

bool FusedMoE::forward_add_residual_norm(Backend& b, Communicator& comm, const NormPrologue* pro, const Tensor& x,
                                         const MoeBuffers& buf, const Tensor& residual, const Tensor& norm_weight,
                                         float eps, const Tensor& normed, Activation act) const {
  const int64_t n = x.size(0);
  const Tensor logits = buf.router_logits.rows(0, n), ids = buf.topk_ids.rows(0, n);
  const Tensor weights = buf.topk_weights.rows(0, n);
  MINIVLLM_CHECK(pro == nullptr || pro->normed.data() == x.data()) << "FusedMoE: the prologue's normed rows are not x";
  const bool direct = comm.world_size() == 1;  // straight into the residual stream
  const Tensor out = direct ? residual : buf.partial.rows(0, n);
  const bool shared = shared_down_.weight().defined(), biased = !score_bias_.empty();
  // The fused entries route by softmax without a router bias; a shared expert at world_size > 1 reads x
  // before the experts.
  if (pro != nullptr && (biased || !router_bias_.empty() || (!direct && shared))) {
    b.rms_norm(pro->residual, pro->weight, pro->eps, pro->normed);
    pro = nullptr;
  }
  if (!direct && shared) {  // the rank's share of the shared expert starts the partial sum
    b.linear(shared_expert_act(b, x, buf, act), shared_down_.weight(), nullptr, out);
  } else if (!direct) {
    b.fill_bytes(out, 0);  // zero bytes are 0.0 in f32 and bf16
  }
  if (pro != nullptr) {
    b.rms_norm_moe_experts_add(*pro, router_, logits, renormalize_, ids, weights, experts_, buf.scratch, out, act);
  } else {
    b.linear(x, router_, router_bias_.empty() ? nullptr : &router_bias_, logits);
    if (biased) {
      b.moe_route_biased(logits, score_bias_, sigmoid_scores_, groups_, topk_groups_, renormalize_, routed_scale_, ids,
                         weights);
    } else {
      b.moe_route(logits, renormalize_, ids, weights);
    }
    b.moe_experts_add(x, experts_, ids, weights, buf.scratch, out, act);
  }
  if (direct && shared) {  // x holds the normed rows now (the prologue's call wrote them)
    b.linear_add_residual(shared_expert_act(b, x, buf, act), shared_down_.weight(), buf.shared_out.rows(0, n),
                          residual);
  }
  if (direct) return false;
  return all_reduce_add_residual_norm(b, comm, out, residual, norm_weight, eps, normed);
}

}  // namespace minivllm
