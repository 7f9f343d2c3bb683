// The mixture-of-experts ops of CudaBackend: argument checks that name the tensor at fault, the
// rank's experts as the kernels' pointer table, and the choice of path by batch size: up to
// moe_gemv_tokens_ tokens the gemvs over the (token, slot) pairs (moe_gemv.cu), past that the pairs
// grouped by expert and the grouped GEMMs (moe.cu, moe_gemm.cu), kMoeChunkTokens tokens at a time.
// Nothing here allocates or synchronises, and every grid follows from T: a layer can be captured.
#include <algorithm>
#include <cstdint>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/moe.h"
#include "common/check.h"

namespace minivllm::cuda {
namespace {

void check_on_gpu(const Tensor& t, DType dtype, const char* op, const char* what) {
  MINIVLLM_CHECK(t.defined() && !t.empty() && t.device() == DeviceKind::kCuda && t.dtype() == dtype)
      << op << ": " << what << " " << t.describe() << " must be a " << dtype_name(dtype) << " CUDA tensor";
}

// The kernels move 16 bytes at a time.
void check_aligned16(const Tensor& t, const char* op, const char* what) {
  MINIVLLM_CHECK(reinterpret_cast<uintptr_t>(t.data()) % 16 == 0)
      << op << ": " << what << " " << t.describe() << " is not 16-byte aligned";
}

// The rank's experts into the tables; returns their width I_r. bf16 weights only (GGUF block and
// FP8 experts arrive decoded: CudaBackend::keeps_expert_dtype).
int64_t expert_tables(const MoeExpertWeights& w, int64_t hidden, MoeExpertTable* gate_up, MoeExpertTable* down) {
  const int64_t local = w.num_local();
  MINIVLLM_CHECK(local >= 1 && local <= kMoeMaxLocalExperts && static_cast<int64_t>(w.down.size()) == local)
      << "moe_experts_add: " << local << " gate_up and " << w.down.size() << " down weights (the CUDA kernels take 1.."
      << kMoeMaxLocalExperts << " experts a rank)";
  MINIVLLM_CHECK(w.gate_up_bias.empty() && w.down_bias.empty())
      << "moe_experts_add: the CUDA kernels take no expert biases (gpt-oss's are the CPU backend's)";
  MINIVLLM_CHECK(w.first_expert >= 0 && w.first_expert + local <= w.num_experts)
      << "moe_experts_add: experts [" << w.first_expert << ", " << w.first_expert + local << ") of " << w.num_experts;
  MINIVLLM_CHECK(w.gate_up[0].ndim() == 2 && w.gate_up[0].size(0) % 2 == 0)
      << "moe_experts_add: gate_up " << w.gate_up[0].describe() << " must be [2 * inter, hidden]";
  const int64_t inter = w.gate_up[0].size(0) / 2;
  MINIVLLM_CHECK(inter > 0 && inter % 8 == 0)
      << "moe_experts_add: the experts' width " << inter << " must be a multiple of 8 (16-byte rows)";
  for (int64_t i = 0; i < local; ++i) {
    const Tensor& gu = w.gate_up[i];
    const Tensor& d = w.down[i];
    const int64_t e = w.first_expert + i;
    MINIVLLM_CHECK(gu.dtype() == DType::kBF16 && d.dtype() == DType::kBF16)
        << "moe_experts_add: expert " << e << "'s weights are " << dtype_name(gu.dtype()) << " / "
        << dtype_name(d.dtype())
        << "; the CUDA mixture-of-experts kernels take bf16 experts only (the loader decodes GGUF block and "
           "FP8 experts to bf16)";
    MINIVLLM_CHECK(gu.device() == DeviceKind::kCuda && d.device() == DeviceKind::kCuda && gu.ndim() == 2 &&
                   d.ndim() == 2 && gu.size(0) == 2 * inter && gu.size(1) == hidden && d.size(0) == hidden &&
                   d.size(1) == inter)
        << "moe_experts_add: expert " << e << ": gate_up " << gu.describe() << ", down " << d.describe() << " for ["
        << 2 * inter << ", " << hidden << "] and [" << hidden << ", " << inter << "] CUDA tensors";
    check_aligned16(gu, "moe_experts_add", "gate_up");
    check_aligned16(d, "moe_experts_add", "down");
    gate_up->w[i] = gu.data();
    down->w[i] = d.data();
  }
  return inter;
}

// Tokens the scratch takes at once (allocate_moe_scratch's layout: every pair of a chunk).
int64_t scratch_tokens(const MoeScratch& s, int64_t hidden, int64_t inter, int k, int64_t local) {
  const char* op = "moe_experts_add";
  check_on_gpu(s.act, DType::kBF16, op, "scratch.act");
  check_on_gpu(s.y, DType::kBF16, op, "scratch.y");
  check_on_gpu(s.entries, DType::kI32, op, "scratch.entries");
  check_on_gpu(s.offsets, DType::kI32, op, "scratch.offsets");
  check_on_gpu(s.tiles, DType::kI32, op, "scratch.tiles");
  MINIVLLM_CHECK(s.act.ndim() == 2 && s.act.size(1) == inter && s.y.ndim() == 2 && s.y.size(1) == hidden &&
                 s.offsets.numel() >= local + 1 && s.tiles.numel() >= local + 1)
      << op << ": scratch act " << s.act.describe() << ", y " << s.y.describe() << ", offsets "
      << s.offsets.describe() << ", tiles " << s.tiles.describe() << " for width " << inter << ", hidden " << hidden
      << ", " << local << " experts (CudaBackend::allocate_moe_scratch makes them)";
  check_aligned16(s.act, op, "scratch.act");
  check_aligned16(s.y, op, "scratch.y");
  const int64_t tokens = std::min({s.act.size(0), s.y.size(0), s.entries.numel()}) / k;
  MINIVLLM_CHECK(tokens >= 1) << op << ": scratch for " << s.act.size(0) << " pairs, top-" << k;
  return tokens;
}

// Element `elems` of t (a chunk's first row).
char* byte_offset(const Tensor& t, int64_t elems) {
  return static_cast<char*>(t.data()) + dtype_nbytes(t.dtype(), elems);
}

}  // namespace

MoeScratch CudaBackend::allocate_moe_scratch(int64_t max_tokens, int64_t hidden, int64_t inter, int k,
                                             int64_t num_local) {
  const int64_t pairs = std::max<int64_t>(1, std::min(max_tokens, kMoeChunkTokens)) * k;
  MoeScratch s;
  s.act = empty(DType::kBF16, {pairs, inter});
  s.y = empty(DType::kBF16, {pairs, hidden});
  s.entries = empty(DType::kI32, {pairs});
  s.offsets = empty(DType::kI32, {num_local + 1});
  s.tiles = empty(DType::kI32, {num_local + 1});
  return s;
}

void CudaBackend::moe_route(const Tensor& router_logits, bool renormalize, const Tensor& topk_ids,
                            const Tensor& topk_weights) {
  check_on_gpu(router_logits, DType::kF32, "moe_route", "router_logits");
  check_on_gpu(topk_ids, DType::kI32, "moe_route", "topk_ids");
  check_on_gpu(topk_weights, DType::kF32, "moe_route", "topk_weights");
  MINIVLLM_CHECK(router_logits.ndim() == 2 && topk_ids.ndim() == 2 && topk_ids.shape() == topk_weights.shape() &&
                 topk_ids.size(0) == router_logits.size(0))
      << "moe_route: router_logits " << router_logits.describe() << ", topk_ids " << topk_ids.describe()
      << ", topk_weights " << topk_weights.describe();
  launch_moe_route(router_logits.ptr<float>(), router_logits.size(0), static_cast<int>(router_logits.size(1)),
                   static_cast<int>(topk_ids.size(1)), renormalize, topk_ids.ptr<int32_t>(),
                   topk_weights.ptr<float>(), moe_route_cta_, stream_);
}

void CudaBackend::moe_route_biased(const Tensor& router_logits, const Tensor& score_bias, bool sigmoid, int groups,
                                   int topk_groups, bool renormalize, float scale, const Tensor& topk_ids,
                                   const Tensor& topk_weights) {
  const char* op = "moe_route_biased";
  check_on_gpu(router_logits, DType::kF32, op, "router_logits");
  check_on_gpu(score_bias, DType::kF32, op, "score_bias");
  check_on_gpu(topk_ids, DType::kI32, op, "topk_ids");
  check_on_gpu(topk_weights, DType::kF32, op, "topk_weights");
  MINIVLLM_CHECK(router_logits.ndim() == 2 && topk_ids.ndim() == 2 && topk_ids.shape() == topk_weights.shape() &&
                 topk_ids.size(0) == router_logits.size(0) && score_bias.numel() == router_logits.size(1))
      << op << ": router_logits " << router_logits.describe() << ", score_bias " << score_bias.describe()
      << ", topk_ids " << topk_ids.describe() << ", topk_weights " << topk_weights.describe();
  launch_moe_route_biased(router_logits.ptr<float>(), score_bias.ptr<float>(), sigmoid, router_logits.size(0),
                          static_cast<int>(router_logits.size(1)), static_cast<int>(topk_ids.size(1)), groups,
                          topk_groups, renormalize, scale, topk_ids.ptr<int32_t>(), topk_weights.ptr<float>(), stream_);
}

// Whether the norm-route launch (moe_norm_route.cu) takes these tensors: up to moe_gemv_tokens_
// tokens of the shapes the kernel takes.
bool CudaBackend::norm_route_takes(const NormPrologue& pro, const Tensor& router_weight, const Tensor& router_logits,
                                   const Tensor& topk_ids, const Tensor& topk_weights) const {
  auto on_gpu = [](const Tensor& t, DType d) {
    return t.defined() && !t.empty() && t.device() == DeviceKind::kCuda && t.dtype() == d && t.ndim() == 2 &&
           reinterpret_cast<uintptr_t>(t.data()) % 16 == 0;
  };
  const Tensor& w = pro.weight;
  return moe_norm_route_ && on_gpu(pro.residual, DType::kF32) && on_gpu(pro.normed, DType::kBF16) &&
         on_gpu(router_weight, DType::kBF16) && on_gpu(router_logits, DType::kF32) && topk_ids.defined() &&
         topk_ids.dtype() == DType::kI32 && topk_ids.ndim() == 2 && topk_weights.defined() &&
         topk_weights.dtype() == DType::kF32 && topk_weights.shape() == topk_ids.shape() &&
         pro.normed.shape() == pro.residual.shape() && router_weight.size(1) == pro.residual.size(1) &&
         router_logits.size(0) == pro.residual.size(0) && router_logits.size(1) == router_weight.size(0) &&
         topk_ids.size(0) == pro.residual.size(0) && topk_ids.size(1) >= 1 &&
         topk_ids.size(1) <= router_weight.size(0) && w.defined() && w.device() == DeviceKind::kCuda &&
         (w.dtype() == DType::kBF16 || w.dtype() == DType::kF32) && w.numel() == pro.residual.size(1) &&
         reinterpret_cast<uintptr_t>(w.data()) % 16 == 0 && pro.residual.size(0) <= moe_gemv_tokens_ &&
         moe_norm_route_fits(pro.residual.size(0), pro.residual.size(1), static_cast<int>(router_weight.size(0)));
}

// One launch where it takes the shapes; anything else composes the three ops, whose checks name what
// is wrong.
void CudaBackend::rms_norm_moe_route(const NormPrologue& pro, const Tensor& router_weight, const Tensor& router_logits,
                                     bool renormalize, const Tensor& topk_ids, const Tensor& topk_weights) {
  if (!norm_route_takes(pro, router_weight, router_logits, topk_ids, topk_weights)) {
    Backend::rms_norm_moe_route(pro, router_weight, router_logits, renormalize, topk_ids, topk_weights);
    return;
  }
  launch_norm_route(pro, router_weight, router_logits, static_cast<int>(topk_ids.size(1)), renormalize,
                    topk_ids.ptr<int32_t>(), topk_weights.ptr<float>(), /*route=*/true);
}

// The norm-route launch where norm_route_takes says so; route false: it stops at the logits (ids and
// weights not written).
void CudaBackend::launch_norm_route(const NormPrologue& pro, const Tensor& router_weight, const Tensor& router_logits,
                                    int k, bool renormalize, int32_t* ids, float* weights, bool route) {
  folded_ = PendingNorm{};  // as rms_norm: a norm noted for a later add is not this one
  const Tensor& w = pro.weight;
  launch_moe_norm_route(pro.residual.ptr<float>(), w.data(), w.dtype() == DType::kF32, pro.eps, router_weight.data(),
                        pro.residual.size(0), pro.residual.size(1), static_cast<int>(router_weight.size(0)), k,
                        renormalize, pro.normed.data(), router_logits.ptr<float>(), ids, weights, stream_, route);
}

// The checks of moe_experts_add, which name the tensor at fault, and the launches' tables and shape.
CudaBackend::MoePlan CudaBackend::plan_moe_experts(const Tensor& x, const MoeExpertWeights& w, const Tensor& topk_ids,
                                                   const Tensor& topk_weights, const MoeScratch& scratch,
                                                   const Tensor& out) const {
  const char* op = "moe_experts_add";
  check_on_gpu(x, DType::kBF16, op, "x");
  check_on_gpu(topk_ids, DType::kI32, op, "topk_ids");
  check_on_gpu(topk_weights, DType::kF32, op, "topk_weights");
  MINIVLLM_CHECK(out.defined() && !out.empty() && out.device() == DeviceKind::kCuda &&
                 (out.dtype() == DType::kF32 || out.dtype() == DType::kBF16))
      << op << ": out " << out.describe() << " must be an f32 (the residual) or bf16 CUDA tensor";
  MINIVLLM_CHECK(x.ndim() == 2 && out.shape() == x.shape() && topk_ids.ndim() == 2 &&
                 topk_ids.size(0) == x.size(0) && topk_weights.shape() == topk_ids.shape())
      << op << ": x " << x.describe() << ", out " << out.describe() << ", topk_ids " << topk_ids.describe()
      << ", topk_weights " << topk_weights.describe();
  const int64_t tokens = x.size(0), hidden = x.size(1);
  const int k = static_cast<int>(topk_ids.size(1));
  MINIVLLM_CHECK(hidden % 8 == 0 && k >= 1) << op << ": hidden " << hidden << " must be a multiple of 8 (16-byte rows)";
  check_aligned16(x, op, "x");
  check_aligned16(out, op, "out");
  MoePlan p;  // the tables: 2 KB each, copied into the launches' parameters
  const int64_t inter = expert_tables(w, hidden, &p.gate_up, &p.down);
  p.chunk = scratch_tokens(scratch, hidden, inter, k, w.num_local());
  p.shape = MoeShape{tokens, k, hidden, inter, static_cast<int>(w.first_expert), static_cast<int>(w.num_local())};
  p.shape.down_rows = tokens == 1 ? moe_down_rows_one_ : moe_down_rows_;
  p.shape.gate_chunks = moe_gate_chunks_;
  p.out_f32 = out.dtype() == DType::kF32;
  p.gemv = tokens <= moe_gemv_tokens_ && tokens <= p.chunk;
  return p;
}

// The decode path: the gate/up gemv (routing for itself where route is given), then the down gemv.
void CudaBackend::launch_moe_gemvs(const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                                   const MoePlan& p, const MoeScratch& scratch, const Tensor& out, Activation act,
                                   const MoeGateRoute* route) {
  launch_moe_gemv_act_mul(x.data(), topk_ids.ptr<int32_t>(), p.gate_up, p.shape, act, scratch.act.data(), stream_,
                          route);
  launch_moe_gemv_down_add(scratch.act.data(), topk_ids.ptr<int32_t>(), topk_weights.ptr<float>(), p.down, p.shape,
                           out.data(), p.out_f32, stream_);
}

void CudaBackend::moe_experts_add(const Tensor& x, const MoeExpertWeights& w, const Tensor& topk_ids,
                                  const Tensor& topk_weights, const MoeScratch& scratch, const Tensor& out,
                                  Activation act) {
  const MoePlan p = plan_moe_experts(x, w, topk_ids, topk_weights, scratch, out);
  const MoeShape& shape = p.shape;
  const int64_t tokens = shape.tokens, hidden = shape.hidden, chunk = p.chunk;
  const int k = shape.k;
  const bool out_f32 = p.out_f32;
  const MoeExpertTable &gate_up = p.gate_up, &down = p.down;
  if (tokens == 0) return;
  if (p.gemv) {  // decode: only the chosen experts' rows are read
    launch_moe_gemvs(x, topk_ids, topk_weights, p, scratch, out, act, nullptr);
    return;
  }
  int32_t* offsets = scratch.offsets.ptr<int32_t>();
  int32_t* entries = scratch.entries.ptr<int32_t>();
  int32_t* tiles = scratch.tiles.ptr<int32_t>();
  for (int64_t t0 = 0; t0 < tokens; t0 += chunk) {
    MoeShape s = shape;
    s.tokens = std::min(chunk, tokens - t0);
    // Few rows an expert (decode batches): 32-row tiles, half of a 64-row tile's work being padding.
    s.tile_rows = s.tokens * k <= moe_small_tile_rows_ * s.num_local ? kMoeSmallTileRows : kMoeTileRows;
    const auto* ids = reinterpret_cast<const int32_t*>(byte_offset(topk_ids, t0 * k));
    const auto* weights = reinterpret_cast<const float*>(byte_offset(topk_weights, t0 * k));
    launch_moe_group(ids, s, offsets, entries, tiles, stream_);
    launch_moe_gemm_act_mul(byte_offset(x, t0 * hidden), offsets, entries, tiles, gate_up, s, act,
                            scratch.act.data(), stream_);
    launch_moe_gemm_down(scratch.act.data(), offsets, entries, tiles, down, s, scratch.y.data(), stream_);
    launch_moe_combine(scratch.y.data(), ids, weights, s, byte_offset(out, t0 * hidden), out_f32,
                       stream_);
  }
}

void CudaBackend::rms_norm_moe_experts_add(const NormPrologue& pro, const Tensor& router_weight,
                                           const Tensor& router_logits, bool renormalize, const Tensor& topk_ids,
                                           const Tensor& topk_weights, const MoeExpertWeights& w,
                                           const MoeScratch& scratch, const Tensor& out, Activation act) {
  // The norm-route launch takes only 1 to moe_gemv_tokens_ tokens; a scratch too small for them
  // (rare) sends the experts to the grouped path, so the layer composes the two ops there too.
  if (moe_route_in_gate_ && router_weight.size(0) <= kMoeWarpRouteMaxExperts &&
      norm_route_takes(pro, router_weight, router_logits, topk_ids, topk_weights)) {
    const MoePlan p = plan_moe_experts(pro.normed, w, topk_ids, topk_weights, scratch, out);
    if (p.gemv) {
      const int experts = static_cast<int>(router_weight.size(0));
      launch_norm_route(pro, router_weight, router_logits, p.shape.k, renormalize, nullptr, nullptr,
                        /*route=*/false);
      const MoeGateRoute route{router_logits.ptr<float>(), experts, renormalize, topk_ids.ptr<int32_t>(),
                               topk_weights.ptr<float>()};
      launch_moe_gemvs(pro.normed, topk_ids, topk_weights, p, scratch, out, act, &route);
      return;
    }
  }
  Backend::rms_norm_moe_experts_add(pro, router_weight, router_logits, renormalize, topk_ids, topk_weights, w, scratch,
                                    out, act);
}

void CudaBackend::sigmoid_gate_rows(const Tensor& x, const Tensor& gate, const Tensor& out) {
  const char* op = "sigmoid_gate_rows";
  check_on_gpu(x, DType::kBF16, op, "x");
  check_on_gpu(gate, DType::kF32, op, "gate");
  check_on_gpu(out, DType::kBF16, op, "out");
  const int64_t hidden = gate.numel();
  MINIVLLM_CHECK(x.ndim() == 2 && x.size(1) == hidden && out.ndim() == 2 && out.size(0) == x.size(0))
      << op << ": x " << x.describe() << ", gate " << gate.describe() << ", out " << out.describe()
      << " (x [T, H], gate [H], out [T, N])";
  MINIVLLM_CHECK(hidden % 8 == 0 && out.size(1) % 8 == 0)
      << op << ": the widths of x " << x.describe() << " and out " << out.describe() << " must be multiples of 8";
  check_aligned16(x, op, "x");
  check_aligned16(gate, op, "gate");
  check_aligned16(out, op, "out");
  launch_sigmoid_gate_rows(x.data(), gate.ptr<float>(), out.data(), x.size(0), hidden, out.size(1), stream_);
}

}  // namespace minivllm::cuda
