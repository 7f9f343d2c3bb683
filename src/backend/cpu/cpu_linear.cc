// Linear layers: out[T, N] = x[T, K] * W[N, K]^T (+ bias), W in its stored format.
// The OpenMP team splits the output features N into one contiguous slice per thread: the weight,
// which dominates the traffic at decode time, is read once, by one core per slice, and only one
// thread pool ever runs.
//
// - fp32 W: single-threaded OpenBLAS sgemv / sgemm on each thread's slice (the reference path).
// - f16 / bf16 / ggml block-quantised W (q8_0 ... q6_k), few rows (decode): dot products on the stored format
//   (quant_kernels.h); quantised weights take int16-quantised activations.
// - the same, many rows (prefill): each thread decodes its rows, a panel of up to 4 MiB at a time,
//   into an fp32 scratch and multiplies it with sgemm; the decoding is paid once per step and
//   spread over all T rows. Batches of a few rows (decode) cut the panels small enough for
//   OpenBLAS's small-matrix kernel where the running set has one.
// - Q4_K / Q5_K / Q6_K / IQ4_XS W and 2-64 rows (decode of several sequences): the ISA's GEMM on
//   the stored codes (quant_gemm_avx512.h), neither dot products nor panels, where it has one.
// linear_act_mul and linear_add_residual run in the same team: each thread finishes its own columns
// (their activation, their residual add), so nothing runs on one thread after the join.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <vector>

#include "backend/cpu/blas_core.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_checks.h"
#include "backend/cpu/cpu_row_ops.h"
#include "backend/cpu/quant_kernels.h"
#include "common/quant_blocks.h"
#include "common/tuning.h"

namespace minivllm {
namespace {

// Below this many multiply-adds one thread is faster than waking the team.
constexpr int64_t kParallelMacs = int64_t{1} << 16;
// Slices start on whole cache lines of the output row.
constexpr int64_t kSliceAlign = 16;
// Up to this many rows the stored-format dot products beat decoding panels for sgemm (measured on
// SmolLM2 Q4_1, docs/PERFORMANCE.md).
constexpr int64_t kMaxDotRows = 4;
// fp32 bytes of one decoded panel: a thread's whole slice of a small model's weight, so that each
// thread makes one sgemm call per layer. OpenBLAS packs all T rows of x again for every call, so
// L2-sized panels (192 KiB, ~85 rows) cost more than they saved: 4 MiB made SmolLM2's prompt
// processing faster (measured: docs/PERFORMANCE.md, "CPU: weights in their stored format against
// llama.cpp", "Prompt processing mended"). The scratch is per thread and allocated once.
constexpr int64_t kPanelBytes = int64_t{4} << 20;
// Up to this many rows of x, where OpenBLAS runs a set with small-matrix kernels (blas_core.h), the
// panels are cut to the rows that kernel takes unpacked, if that is at least kMinSmallPanelRows: at
// few rows, packing a 4 MiB panel costs more than its products (bounds measured: docs/PERFORMANCE.md,
// "Stop 111").
constexpr int64_t kMaxSmallPanelT = 64;
constexpr int64_t kMinSmallPanelRows = 4;
// From 2 to 64 rows, Q4_K / Q5_K / Q6_K / IQ4_XS weights take the ISA's GEMM on their stored codes
// where it has one, ahead of the dot products: one decoding of each weight row serves every row of
// x (quant_kernels.h; measured: docs/PERFORMANCE.md, "Stop 112"). One row stays on the dot products.
constexpr int64_t kMinGemmRows = 2;
constexpr int64_t kMaxGemmRows = 64;

void add_bias(const float* bias, int64_t t, int64_t n, int64_t n0, int64_t n1, float* out) {
  if (bias == nullptr) return;
  for (int64_t r = 0; r < t; ++r) {
    float* row = out + r * n;
#pragma omp simd
    for (int64_t j = n0; j < n1; ++j) row[j] += bias[j];
  }
}

void sgemm_slice(const float* x, const float* w, int64_t t, int64_t k, int64_t n, int64_t width, float* out) {
  if (t == 1) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(width), static_cast<int>(k), 1.0f, w,
                static_cast<int>(k), x, 1, 0.0f, out, 1);
  } else {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(t), static_cast<int>(width),
                static_cast<int>(k), 1.0f, x, static_cast<int>(k), w, static_cast<int>(k), 0.0f, out,
                static_cast<int>(n));
  }
}

// Everything a thread needs to compute its slice [n0, n1) of the output.
struct LinearArgs {
  const float* x;
  const uint8_t* w;  // row r at w + r * row_bytes
  DType dtype;
  size_t row_bytes;
  const float* bias;
  int64_t t, k, n;
  const cpu::ActScratch* act;  // quantised x (quantised weights, dot path), t rows
  cpu::SuperActs super_act;    // quantised x per super-block (gemm path), t rows
  const cpu::QuantKernels* kernels;
  float* out;
};

// Weight rows a sgemm call for t rows of x takes where OpenBLAS's small-matrix kernel should do it
// (kMaxSmallPanelT); 0 where it should not.
int64_t small_gemm_rows(int64_t t, int64_t k) {
  static const bool small_gemm = cpu::blas_core_has_small_gemm(cpu::blas_core());  // after the backend's fit
  const int64_t rows = cpu::blas_small_gemm_rows(t, k);
  return small_gemm && t > 1 && t <= kMaxSmallPanelT && rows >= kMinSmallPanelRows ? rows : 0;
}

void f32_slice(const LinearArgs& a, int64_t n0, int64_t n1) {
  const int64_t small = small_gemm_rows(a.t, a.k);
  const int64_t chunk = small > 0 ? small : n1 - n0;
  const float* w = reinterpret_cast<const float*>(a.w);
  for (int64_t j = n0; j < n1; j += chunk) {
    sgemm_slice(a.x, w + j * a.k, a.t, a.k, a.n, std::min(chunk, n1 - j), a.out + j);
  }
}

void dot_slice(const LinearArgs& a, int64_t n0, int64_t n1) {
  const cpu::QuantKernels& q = *a.kernels;
  if (!dtype_is_quantized(a.dtype)) {
    float (*fdot)(const uint8_t*, const float*, int64_t) = a.dtype == DType::kBF16 ? q.dot_bf16 : q.dot_f16;
    for (int64_t j = n0; j < n1; ++j) {
      const uint8_t* row = a.w + static_cast<size_t>(j) * a.row_bytes;
      for (int64_t r = 0; r < a.t; ++r) a.out[r * a.n + j] = fdot(row, a.x + r * a.k, a.k);
    }
    return;
  }
  const cpu::DotFn qdot = q.dot(a.dtype);
  const int64_t blocks = a.k / kQuantBlock;
  // kDotRows weight rows at a time, against every activation row while they are in L1.
  for (int64_t j = n0; j < n1; j += cpu::kDotRows) {
    const int rows = static_cast<int>(std::min<int64_t>(cpu::kDotRows, n1 - j));
    const uint8_t* w = a.w + static_cast<size_t>(j) * a.row_bytes;
    for (int64_t r = 0; r < a.t; ++r) qdot(w, a.row_bytes, rows, a.act->row(r), blocks, a.out + r * a.n + j);
  }
}

void panel_slice(const LinearArgs& a, int64_t n0, int64_t n1) {
  const int64_t small = small_gemm_rows(a.t, a.k);
  const int64_t panel = small > 0 ? small : std::max<int64_t>(8, kPanelBytes / (4 * a.k));
  thread_local std::vector<float> scratch;
  if (scratch.size() < static_cast<size_t>(panel * a.k)) scratch.resize(static_cast<size_t>(panel * a.k));
  for (int64_t p0 = n0; p0 < n1; p0 += panel) {
    const int64_t rows = std::min(panel, n1 - p0);
    a.kernels->dequant(a.dtype, a.w + static_cast<size_t>(p0) * a.row_bytes, scratch.data(), rows * a.k);
    sgemm_slice(a.x, scratch.data(), a.t, a.k, a.n, rows, a.out + p0);
  }
}

// K-quant weights and 2-64 rows: the ISA's GEMM on the stored codes, where it has one.
bool takes_gemm(const LinearArgs& a) {
  static const bool on = knob_flag("MINIVLLM_CPU_QUANT_GEMM");
  return on && a.t >= kMinGemmRows && a.t <= kMaxGemmRows && a.kernels->gemm(a.dtype) != nullptr;
}

// Stored-format weights and few rows (decode) that the GEMM does not take: dot products on the
// stored bytes, no sgemm.
bool takes_dot_products(const LinearArgs& a) { return a.dtype != DType::kF32 && a.t <= kMaxDotRows && !takes_gemm(a); }

void gemm_slice(const LinearArgs& a, int64_t n0, int64_t n1) {
  a.kernels->gemm(a.dtype)(a.w + static_cast<size_t>(n0) * a.row_bytes, a.row_bytes, n1 - n0, a.super_act, a.t,
                           a.out + n0, a.n);
}

void run_slice(const LinearArgs& a, int64_t n0, int64_t n1) {
  if (n1 <= n0 || a.t == 0) return;
  if (a.dtype == DType::kF32) {
    f32_slice(a, n0, n1);
  } else if (takes_dot_products(a)) {
    dot_slice(a, n0, n1);
  } else if (takes_gemm(a)) {
    gemm_slice(a, n0, n1);
  } else {
    panel_slice(a, n0, n1);
  }
  add_bias(a.bias, a.t, a.n, n0, n1, a.out);
}

}  // namespace

bool CpuBackend::keeps_weight_dtype(DType stored) const {
  switch (stored) {
    case DType::kF32: case DType::kF16: case DType::kBF16:
      return true;
    default:
      return cpu::has_quant_dot(stored);
  }
}

namespace {

// One linear's arguments after its checks (cpu_linear's x, weight, bias and out), with x quantised
// for the dot products where they take it, and how many threads its n output features are worth.
struct Plan {
  LinearArgs a;
  int threads;
};

Plan plan(const CpuBackend& be, cpu::ActScratch& act, cpu::SuperActScratch& super_act, int num_threads,
          const Tensor& x, const Tensor& weight, const Tensor* bias, const Tensor& out) {
  cpu::check_tensor(x, DType::kF32, "linear", "x");
  MINIVLLM_CHECK(weight.defined() && !weight.empty() && weight.device() == DeviceKind::kCpu &&
                 be.keeps_weight_dtype(weight.dtype()))
      << "linear: weight " << weight.describe() << " must be a host f32, f16, bf16 or ggml block-quantised tensor";
  cpu::check_tensor(out, DType::kF32, "linear", "out");
  MINIVLLM_CHECK(weight.ndim() == 2) << "linear: weight " << weight.describe() << " must be [out, in]";
  const int64_t n = weight.size(0);
  const int64_t k = weight.size(1);
  const int64_t t = cpu::rows_with_cols(x, k, "linear", "x");
  MINIVLLM_CHECK(cpu::rows_with_cols(out, n, "linear", "out") == t)
      << "linear: out " << out.describe() << " vs x " << x.describe() << " and weight " << weight.describe();
  Plan p{{x.ptr<float>(), static_cast<const uint8_t*>(weight.data()), weight.dtype(), dtype_nbytes(weight.dtype(), k),
          nullptr, t, k, n, nullptr, {}, &cpu::quant_kernels(cpu::active_isa()), out.ptr<float>()},
         1};
  if (bias != nullptr) {
    cpu::check_tensor(*bias, DType::kF32, "linear", "bias");
    MINIVLLM_CHECK_EQ(bias->numel(), n) << "linear: bias " << bias->describe();
    p.a.bias = bias->ptr<float>();
  }
  if (dtype_is_quantized(p.a.dtype) && takes_dot_products(p.a)) {
    act.quantize(p.a.x, t, k);  // k is whole blocks: dtype_nbytes checked it
    p.a.act = &act;
  } else if (takes_gemm(p.a)) {
    super_act.quantize(p.a.x, t, k);  // k is whole super-blocks: dtype_nbytes checked it
    p.a.super_act = super_act.acts();
  }
  const int threads = static_cast<int>(std::min<int64_t>(num_threads, (n + kSliceAlign - 1) / kSliceAlign));
  p.threads = t * n * k < kParallelMacs ? 1 : std::max(1, threads);
  return p;
}

// Thread `id` of `team`: its contiguous slice [n0, n1) of n columns, starting on a whole cache line
// of the output row.
void slice_of(int64_t n, int64_t id, int64_t team, int64_t* n0, int64_t* n1) {
  const int64_t per = (n + team - 1) / team;
  const int64_t slice = (per + kSliceAlign - 1) / kSliceAlign * kSliceAlign;
  *n0 = std::min(n, id * slice);
  *n1 = std::min(n, *n0 + slice);
}

// fn(n0, n1) on each thread's slice of [0, n), or on all of it where one thread is enough.
template <class Fn>
void for_slices(int64_t n, int threads, const Fn& fn) {
  if (threads <= 1) {
    fn(int64_t{0}, n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    int64_t n0, n1;
    slice_of(n, omp_get_thread_num(), omp_get_num_threads(), &n0, &n1);
    if (n1 > n0) fn(n0, n1);
  }
}

}  // namespace

void CpuBackend::linear(const Tensor& x, const Tensor& weight, const Tensor* bias, const Tensor& out) {
  const Plan p = plan(*this, act_scratch_, super_act_scratch_, num_threads_, x, weight, bias, out);
  for_slices(p.a.n, p.threads, [&p](int64_t n0, int64_t n1) { run_slice(p.a, n0, n1); });
}

// The gated MLP's projection and activation in one team: each thread computes the same columns
// [i0, i1) of gate and of up, then their activation, so no thread waits on another and the
// activation is split over the team instead of running on one thread after the join. The same
// arithmetic as linear, then act_mul, bit for bit. Only on the dot products (decode): sgemm's
// results depend on how the columns are cut (OpenBLAS's edge kernels), so the f32 weights and the
// prefill panels keep linear's cut, then act_mul.
void CpuBackend::linear_act_mul(const Tensor& x, const Tensor& gate_up_weight, const Tensor& scratch,
                                const Tensor& out, Activation act) {
  const Plan p = plan(*this, act_scratch_, super_act_scratch_, num_threads_, x, gate_up_weight, nullptr, scratch);
  if (!takes_dot_products(p.a) && !takes_gemm(p.a)) {  // plan quantised nothing for these
    Backend::linear_act_mul(x, gate_up_weight, scratch, out, act);
    return;
  }
  cpu::check_tensor(out, DType::kF32, "linear_act_mul", "out");
  const int64_t inter = p.a.n / 2, t = p.a.t;
  MINIVLLM_CHECK(p.a.n % 2 == 0 && cpu::rows_with_cols(out, inter, "linear_act_mul", "out") == t)
      << "linear_act_mul: out " << out.describe() << " for gate/up " << gate_up_weight.describe();
  float* dst = out.ptr<float>();
  const auto columns = [&](int64_t i0, int64_t i1) {
    run_slice(p.a, i0, i1);
    run_slice(p.a, inter + i0, inter + i1);
    for (int64_t r = 0; r < t; ++r) {
      const float* gate = p.a.out + r * p.a.n;
      cpu::act_mul_range(gate, gate + inter, dst + r * inter, i0, i1, act);
    }
  };
  for_slices(inter, p.threads, columns);
}

// residual += x W^T with each thread adding its own columns right after computing them: no second
// pass over the rows after the join.
void CpuBackend::linear_add_residual(const Tensor& x, const Tensor& weight, const Tensor& scratch,
                                     const Tensor& residual) {
  const Plan p = plan(*this, act_scratch_, super_act_scratch_, num_threads_, x, weight, nullptr, scratch);
  cpu::check_tensor(residual, DType::kF32, "linear_add_residual", "residual");
  MINIVLLM_CHECK(cpu::rows_with_cols(residual, p.a.n, "linear_add_residual", "residual") == p.a.t)
      << "linear_add_residual: residual " << residual.describe() << " for " << weight.describe();
  float* res = residual.ptr<float>();
  const auto columns = [&](int64_t n0, int64_t n1) {
    run_slice(p.a, n0, n1);
    for (int64_t r = 0; r < p.a.t; ++r) {
      const float* src = p.a.out + r * p.a.n;
      float* dst = res + r * p.a.n;
#pragma omp simd
      for (int64_t j = n0; j < n1; ++j) dst[j] += src[j];
    }
  };
  for_slices(p.a.n, p.threads, columns);
}

}  // namespace minivllm
