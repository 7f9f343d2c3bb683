// Row-wise and element-wise ops of the CPU backend: embedding lookup (vocab-parallel), SiLU-and-
// multiply of the MLP, the residual add, row gathering and the conversion to fp32 of logits.
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_checks.h"
#include "backend/cpu/cpu_row_ops.h"
#include "common/quant_blocks.h"

namespace minivllm {

void CpuBackend::embedding(const Tensor& ids, const Tensor& weight, int64_t vocab_start, const Tensor& out) {
  cpu::check_tensor(ids, DType::kI32, "embedding", "ids");
  MINIVLLM_CHECK(weight.defined() && !weight.empty() && weight.device() == DeviceKind::kCpu &&
                 keeps_weight_dtype(weight.dtype()))
      << "embedding: weight " << weight.describe() << " must be a host f32, f16, bf16 or ggml block-quantised tensor";
  cpu::check_tensor(out, DType::kF32, "embedding", "out");
  MINIVLLM_CHECK(weight.ndim() == 2) << "embedding: weight " << weight.describe() << " must be [vocab, hidden]";
  const int64_t rows = weight.size(0);
  const int64_t hidden = weight.size(1);
  const int64_t tokens = ids.numel();
  MINIVLLM_CHECK(cpu::rows_with_cols(out, hidden, "embedding", "out") == tokens)
      << "embedding: out " << out.describe() << " for " << tokens << " ids";
  const int32_t* id = ids.ptr<int32_t>();
  const auto* table = static_cast<const uint8_t*>(weight.data());
  const DType wtype = weight.dtype();
  const size_t row_bytes = dtype_nbytes(wtype, hidden);
  float* dst = out.ptr<float>();
#pragma omp parallel for num_threads(num_threads_) if (tokens >= 64) schedule(static)
  for (int64_t t = 0; t < tokens; ++t) {
    // Ids of another rank's shard give a zero row; the all-reduce over ranks fills it in.
    const int64_t local = static_cast<int64_t>(id[t]) - vocab_start;
    float* row = dst + t * hidden;
    if (local >= 0 && local < rows) {
      dequantize_to_f32(wtype, table + static_cast<size_t>(local) * row_bytes, row, hidden);
    } else {
      std::memset(row, 0, hidden * sizeof(float));
    }
  }
}

void CpuBackend::act_mul(const Tensor& gate_up, const Tensor& out, Activation act) {
  cpu::check_tensor(gate_up, DType::kF32, "act_mul", "gate_up");
  cpu::check_tensor(out, DType::kF32, "act_mul", "out");
  const int64_t inter = out.size(-1);
  const int64_t tokens = cpu::rows_with_cols(gate_up, 2 * inter, "act_mul", "gate_up");
  MINIVLLM_CHECK(cpu::rows_with_cols(out, inter, "act_mul", "out") == tokens)
      << "act_mul: out " << out.describe() << " vs gate_up " << gate_up.describe();
  const float* src = gate_up.ptr<float>();
  float* dst = out.ptr<float>();
#pragma omp parallel for num_threads(num_threads_) if (tokens * inter >= (1 << 15)) schedule(static)
  for (int64_t t = 0; t < tokens; ++t) {
    const float* gate = src + t * 2 * inter;
    cpu::act_mul_range(gate, gate + inter, dst + t * inter, 0, inter, act);
  }
}

void CpuBackend::softcap(const Tensor& x, float cap) {
  MINIVLLM_CHECK(cap > 0.0f) << "softcap: the cap must be > 0, got " << cap;
  cpu::check_tensor(x, DType::kF32, "softcap", "x");
  float* p = x.ptr<float>();
  const int64_t n = x.numel();
#pragma omp parallel for num_threads(num_threads_) if (n >= 65536) schedule(static)
  for (int64_t i = 0; i < n; ++i) p[i] = cap * std::tanh(p[i] / cap);  // as transformers: x / cap, tanh, * cap
}

void CpuBackend::scale(const Tensor& x, float factor) {
  cpu::check_tensor(x, DType::kF32, "scale", "x");
  float* v = x.ptr<float>();
  const int64_t n = x.numel();
#pragma omp parallel for num_threads(num_threads_) if (n >= (1 << 16)) schedule(static)
  for (int64_t i = 0; i < n; ++i) v[i] *= factor;
}

void CpuBackend::add_to_residual(const Tensor& x, const Tensor& residual) {
  cpu::check_tensor(x, DType::kF32, "add_to_residual", "x");
  cpu::check_tensor(residual, DType::kF32, "add_to_residual", "residual");
  MINIVLLM_CHECK_EQ(x.numel(), residual.numel())
      << "add_to_residual: x " << x.describe() << " vs residual " << residual.describe();
  const float* src = x.ptr<float>();
  float* dst = residual.ptr<float>();
  const int64_t n = x.numel();
#pragma omp parallel for num_threads(num_threads_) if (n >= (1 << 16)) schedule(static)
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

void CpuBackend::to_activation(const Tensor& x, const Tensor& out) {  // the activations are f32 here
  cpu::check_tensor(x, DType::kF32, "to_activation", "x");
  cpu::check_tensor(out, DType::kF32, "to_activation", "out");
  MINIVLLM_CHECK_EQ(x.numel(), out.numel()) << "to_activation: x " << x.describe() << " vs out " << out.describe();
  copy(out, x);
}

void CpuBackend::gather_rows(const Tensor& x, const Tensor& indices, const Tensor& out) {
  cpu::check_tensor(indices, DType::kI32, "gather_rows", "indices");
  MINIVLLM_CHECK(x.device() == DeviceKind::kCpu && out.device() == DeviceKind::kCpu && x.dtype() == out.dtype())
      << "gather_rows: x " << x.describe() << " out " << out.describe();
  const int64_t rows = x.size(0);
  const int64_t n = indices.numel();
  MINIVLLM_CHECK(out.size(0) == n && out.numel() / std::max<int64_t>(n, 1) == x.numel() / std::max<int64_t>(rows, 1))
      << "gather_rows: out " << out.describe() << " for " << n << " rows of " << x.describe();
  const size_t row_bytes = rows == 0 ? 0 : x.nbytes() / rows;
  const int32_t* idx = indices.ptr<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    MINIVLLM_CHECK(idx[i] >= 0 && idx[i] < rows) << "gather_rows: index " << idx[i] << " outside " << x.describe();
    std::memcpy(static_cast<char*>(out.data()) + i * row_bytes, static_cast<const char*>(x.data()) + idx[i] * row_bytes,
                row_bytes);
  }
}

void CpuBackend::resolve_pending_ids(const Tensor& ids, const Tensor& sampled) {
  cpu::check_tensor(ids, DType::kI32, "resolve_pending_ids", "ids");
  cpu::check_tensor(sampled, DType::kI32, "resolve_pending_ids", "sampled");
  int32_t* p = ids.ptr<int32_t>();
  const int32_t* from = sampled.ptr<int32_t>();
  for (int64_t i = 0; i < ids.numel(); ++i) {
    if (p[i] >= 0) continue;
    const int64_t row = -static_cast<int64_t>(p[i]) - 1;
    MINIVLLM_CHECK_LT(row, sampled.numel()) << "resolve_pending_ids: sampled row " << row << " of " << sampled.describe();
    p[i] = from[row];
  }
}

void CpuBackend::to_f32(const Tensor& x, const Tensor& out) {
  cpu::check_tensor(out, DType::kF32, "to_f32", "out");
  MINIVLLM_CHECK(x.device() == DeviceKind::kCpu && x.numel() == out.numel())
      << "to_f32: x " << x.describe() << " out " << out.describe();
  if (x.dtype() == DType::kF32) {
    copy(out, x);
  } else {
    convert_to_f32(x.data(), x.dtype(), out.ptr<float>(), static_cast<size_t>(x.numel()));
  }
}

}  // namespace minivllm
