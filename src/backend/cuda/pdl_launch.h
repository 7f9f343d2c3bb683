// Launching with programmatic dependent launch (sm_90): the kernel may start while its predecessor
// in the stream still runs, once that predecessor has called pdl_launch_dependents(); it must call
// pdl_wait() (device_utils.cuh) before it reads anything an earlier kernel wrote or writes
// anything an earlier kernel reads. What it does before the wait (weight prefetches, loads of the
// step's host-uploaded inputs) overlaps the predecessor's tail and the launch latency.
// MINIVLLM_NO_PDL=1 turns it off (plain stream order).
#pragma once

#include <cuda_runtime.h>

#include <cstdlib>
#include <utility>

#include "backend/cuda/cuda_check.h"

namespace minivllm::cuda {

inline bool pdl_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("MINIVLLM_NO_PDL");
    return v == nullptr || v[0] == '\0' || v[0] == '0';
  }();
  return enabled;
}

template <typename... KernelArgs, typename... Args>
void launch_with_pdl(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                     Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl_enabled() ? 1 : 0;
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

}  // namespace minivllm::cuda
