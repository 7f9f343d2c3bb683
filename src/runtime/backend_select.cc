#include "runtime/backend_select.h"

#include "backend/cpu/cpu_backend.h"
#include "common/check.h"
#ifdef MINIVLLM_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace minivllm {

bool cuda_available() {
#ifdef MINIVLLM_WITH_CUDA
  return cuda_device_available();
#else
  return false;
#endif
}

std::unique_ptr<Backend> make_backend(BackendKind kind, int device_index, int num_threads) {
  if (kind == BackendKind::kAuto) kind = cuda_available() ? BackendKind::kCuda : BackendKind::kCpu;
  if (kind == BackendKind::kCpu) return make_cpu_backend(num_threads);
#ifdef MINIVLLM_WITH_CUDA
  MINIVLLM_CHECK(cuda_device_available()) << "device 'cuda' requested but no CUDA GPU is visible";
  return make_cuda_backend(device_index);
#else
  MINIVLLM_FAIL() << "device 'cuda' requested but this build has no CUDA backend (nvcc was not found at build time)";
#endif
}

}  // namespace minivllm
