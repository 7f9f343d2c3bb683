#include "runtime/backend_select.h"

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/shm_communicator.h"
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

BackendKind resolve_backend_kind(BackendKind kind) {
  if (kind == BackendKind::kAuto) return cuda_available() ? BackendKind::kCuda : BackendKind::kCpu;
  return kind;
}

int visible_gpu_count() {
#ifdef MINIVLLM_WITH_CUDA
  return cuda_device_count();
#else
  return 0;
#endif
}

std::string make_comm_bootstrap(BackendKind resolved, int world_size) {
  if (world_size == 1) return "";
  if (resolved == BackendKind::kCpu) return make_cpu_comm_bootstrap(world_size);
#ifdef MINIVLLM_WITH_CUDA
  return make_cuda_comm_bootstrap();
#else
  MINIVLLM_FAIL() << "device 'cuda' requested but this build has no CUDA backend";
#endif
}

void abort_comm_bootstrap(BackendKind resolved, const std::string& bootstrap, const std::string& why) {
  if (bootstrap.empty()) return;
  if (resolved == BackendKind::kCpu) abort_cpu_comm_bootstrap(bootstrap, why);
#ifdef MINIVLLM_WITH_CUDA
  if (resolved == BackendKind::kCuda) abort_cuda_comm_bootstrap(bootstrap, why);
#endif
}

void release_comm_bootstrap(BackendKind resolved, const std::string& bootstrap) {
  if (!bootstrap.empty() && resolved == BackendKind::kCpu) release_cpu_comm_bootstrap(bootstrap);
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
