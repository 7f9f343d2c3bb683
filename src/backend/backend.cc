#include "backend/backend.h"

#include <algorithm>

#include "common/check.h"
#include "common/fp8.h"
#include "common/fp8_weight.h"
#include "common/quant_blocks.h"

namespace minivllm {

// Without a stream to overlap with, sampling happens at once; the device copy of the tokens is
// what the next step's pending ids are resolved from.
void Backend::sample_async(const Tensor& logits, const SamplingBatch& batch, const Tensor& tokens) {
  const int rows = batch.size();
  MINIVLLM_CHECK(tokens.dtype() == DType::kI32 && tokens.numel() >= rows)
      << "sample_async: tokens " << tokens.describe() << " for " << rows << " rows";
  MINIVLLM_CHECK_LT(sampled_on_host_.size(), 2u) << "sample_async: two samplings already outstanding";
  std::vector<int32_t> out(static_cast<size_t>(rows));
  sample(logits, batch, out.data());
  if (rows > 0) copy_from_host(tokens.rows(0, rows), out.data());
  sampled_on_host_.push_back(std::move(out));
}

void Backend::queue_sampled(const Tensor& tokens, int rows) {
  MINIVLLM_CHECK(tokens.dtype() == DType::kI32 && tokens.numel() >= rows)
      << "queue_sampled: tokens " << tokens.describe() << " for " << rows << " rows";
  MINIVLLM_CHECK_LT(sampled_on_host_.size(), 2u) << "queue_sampled: two samplings already outstanding";
  std::vector<int32_t> out(static_cast<size_t>(rows));
  if (rows > 0) copy_to_host(out.data(), tokens.rows(0, rows));
  sampled_on_host_.push_back(std::move(out));
}

void Backend::take_sampled(int32_t* out_tokens, int rows) {
  MINIVLLM_CHECK(!sampled_on_host_.empty()) << "take_sampled: nothing was sampled";
  std::vector<int32_t> oldest = std::move(sampled_on_host_.front());
  sampled_on_host_.erase(sampled_on_host_.begin());
  MINIVLLM_CHECK_EQ(static_cast<int>(oldest.size()), rows) << "take_sampled: rows";
  std::copy(oldest.begin(), oldest.end(), out_tokens);
}

void Backend::norm_add_norm(const Tensor& x, const Tensor& out_norm, float out_eps, const Tensor& residual,
                            const Tensor& next_norm, float next_eps) {
  rms_norm(x, out_norm, out_eps, x);
  if (next_norm.empty()) {
    add_to_residual(x, residual);
    to_activation(residual, x);
  } else {
    add_rms_norm(x, residual, next_norm, next_eps);
  }
}

void Backend::set_attention_softcap(float cap) {
  MINIVLLM_CHECK(cap == 0.0f) << "this backend's attention implements no logit soft-capping (cap " << cap << ")";
}

void Backend::softcap(const Tensor&, float cap) {
  MINIVLLM_FAIL() << "this backend implements no logit soft-capping (cap " << cap << ")";
}

std::string Backend::moe_missing() const {
  return "the " + name() + " backend has no mixture-of-experts kernels yet (routing, grouping by expert, the "
         "expert MLPs: Backend::moe_route and moe_experts_add); run the model on the cpu backend (--device cpu)";
}

MoeScratch Backend::allocate_moe_scratch(int64_t max_tokens, int64_t hidden, int64_t inter, int k, int64_t num_local) {
  const int64_t t = max_tokens;
  const DType act = activation_dtype();
  MoeScratch s;
  s.x = empty(act, {t, hidden});
  s.gate_up = empty(act, {t, 2 * inter});
  s.act = empty(act, {t, inter});
  s.y = empty(act, {t, hidden});
  s.entries = empty(DType::kI32, {t * k});
  s.offsets = empty(DType::kI32, {num_local + 1});
  return s;
}

std::string Backend::prepare_persistent_decode(PersistentDecodeModel&) {
  return "the " + name() + " backend has no persistent decode kernel";
}

void Backend::persistent_decode(const PersistentDecodeModel&, const Tensor&, const Tensor&, const std::vector<KVCache>&,
                                const AttentionMetadata&) {
  MINIVLLM_FAIL() << "the " << name() << " backend has no persistent decode kernel";
}

void Backend::moe_route(const Tensor&, bool, const Tensor&, const Tensor&) { MINIVLLM_FAIL() << moe_missing(); }

void Backend::moe_experts_add(const Tensor&, const MoeExpertWeights&, const Tensor&, const Tensor&, const MoeScratch&,
                              const Tensor&, Activation) {
  MINIVLLM_FAIL() << moe_missing();
}

Tensor Backend::upload_weight(const Tensor& host_f32, bool keep_f32) {
  MINIVLLM_CHECK(host_f32.dtype() == DType::kF32 && host_f32.device() == DeviceKind::kCpu)
      << "upload_weight takes a host f32 tensor, got " << host_f32.describe();
  DType target = keep_f32 ? DType::kF32 : weight_dtype();
  Tensor dst = empty(target, host_f32.shape());
  if (target == DType::kF32) {
    copy_from_host(dst, host_f32.data());
  } else {
    Tensor staged = host_tensor(target, host_f32.shape());
    convert_from_f32(host_f32.ptr<float>(), target, staged.data(), static_cast<size_t>(host_f32.numel()));
    copy_from_host(dst, staged.data());
  }
  synchronize();  // the staging buffer dies here
  return dst;
}

Tensor Backend::upload_stored_weight(const Tensor& host) {
  MINIVLLM_CHECK(host.device() == DeviceKind::kCpu) << "upload_stored_weight takes a host tensor, got "
                                                    << host.describe();
  if (host.dtype() == DType::kF8E4M3) {  // an FP8 weight: its codes and scale grid, or its values
    if (!keeps_weight_dtype(DType::kF8E4M3)) return upload_weight(dequantize_fp8_weight(host));
    const Tensor w = canonical_fp8_weight(host);
    const WeightScales& s = *w.scales();
    Tensor codes = empty(DType::kF8E4M3, w.shape());
    Tensor grid = empty(DType::kF32, s.grid.shape());
    copy_from_host(codes, w.data());
    copy_from_host(grid, s.grid.data());
    synchronize();
    auto scales = std::make_shared<WeightScales>(WeightScales{grid, s.block_rows, s.block_cols, Tensor()});
    scales->decoded = decoded_fp8_copy(codes.with_scales(scales));
    return codes.with_scales(std::move(scales));
  }
  if (host.dtype() == DType::kF32 || !keeps_weight_dtype(host.dtype())) {
    if (host.dtype() == DType::kF32) return upload_weight(host);
    Tensor f32 = host_tensor(DType::kF32, host.shape());
    dequantize_to_f32(host.dtype(), host.data(), f32.ptr<float>(), host.numel());
    return upload_weight(f32);
  }
  Tensor dst = empty(host.dtype(), host.shape());
  const Tensor laid_out = stored_layout(host);
  copy_from_host(dst, laid_out.data());
  synchronize();
  return dst;
}

// Through the host: the device weight read back as f32, each row quantized (common/fp8.h), and
// uploaded as upload_stored_weight keeps FP8 weights. A backend with a kernel for it overrides this.
void Backend::fill_hashed_e4m3(const Tensor& dst, const HashedUniform& h, float scale, int64_t base,
                               int64_t row_stride) {
  MINIVLLM_CHECK(dst.dtype() == DType::kF8E4M3 && dst.ndim() == 2 && scale > 0.0f)
      << "fill_hashed_e4m3: dst " << dst.describe() << " must be an FP8 [rows, cols] tensor, scale " << scale
      << " positive";
  const int64_t rows = dst.size(0), cols = dst.size(1);
  Tensor codes = host_tensor(DType::kF8E4M3, {rows, cols});
  uint8_t* out = static_cast<uint8_t*>(codes.data());
#pragma omp parallel for schedule(static) if (rows * cols >= (1 << 16))
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      out[r * cols + c] = hashed_e4m3_code(h, scale, static_cast<uint64_t>(base + r * row_stride + c));
    }
  }
  copy_from_host(dst, codes.data());
  synchronize();  // the staging buffer dies here
}

Tensor Backend::quantize_weight_fp8(const Tensor& w, int64_t col_begin, int64_t col_end) {
  MINIVLLM_CHECK(w.ndim() == 2 && (w.dtype() == DType::kF32 || w.dtype() == DType::kBF16))
      << "quantize_weight_fp8: " << w.describe() << " must be a 2-D f32 or bf16 weight";
  Tensor raw = host_tensor(w.dtype(), w.shape());
  copy_to_host(raw.data(), w);
  Tensor f32 = raw;
  if (w.dtype() != DType::kF32) {
    f32 = host_tensor(DType::kF32, w.shape());
    convert_to_f32(raw.data(), w.dtype(), f32.ptr<float>(), static_cast<size_t>(w.numel()));
  }
  return upload_stored_weight(quantize_fp8_rows(f32, col_begin, col_end));
}

}  // namespace minivllm
