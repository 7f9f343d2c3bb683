// CpuBackend construction, identity and the sampling glue.
#include "backend/cpu/cpu_backend.h"

#include <cblas.h>
#include <omp.h>

#include "backend/cpu/blas_core.h"
#include "backend/cpu/cpu_checks.h"
#include "backend/cpu/quant_kernels.h"
#include "common/check.h"

namespace minivllm {

CpuBackend::CpuBackend(int num_threads) : num_threads_(num_threads > 0 ? num_threads : omp_get_max_threads()) {
  // A CPU newer than the OpenBLAS build gets its SSE3 kernels unless told otherwise (blas_core.h).
  cpu::fit_blas_core();
  // The OpenMP team owns the cores; OpenBLAS is called from inside it on per-thread slices
  // (see cpu_linear.cc), so its own pool stays at one thread.
  openblas_set_num_threads(1);
  // A bad MINIVLLM_CPU_ISA fails here, naming the variable, rather than inside the first request.
  (void)cpu::active_isa();
}

std::string CpuBackend::name() const { return "cpu(" + std::to_string(num_threads_) + " threads)"; }

void CpuBackend::sample(const Tensor& logits, const SamplingBatch& batch, int32_t* out_tokens) {
  cpu::check_tensor(logits, DType::kF32, "sample", "logits");
  MINIVLLM_CHECK(logits.ndim() == 2) << "sample: logits " << logits.describe() << " must be [seqs, vocab]";
  MINIVLLM_CHECK_EQ(logits.size(0), static_cast<int64_t>(batch.size())) << "sample: logits rows vs batch size";
  sample_on_host(logits.ptr<float>(), logits.size(1), batch, out_tokens);
}

std::unique_ptr<Backend> make_cpu_backend(int num_threads) { return std::make_unique<CpuBackend>(num_threads); }

}  // namespace minivllm
