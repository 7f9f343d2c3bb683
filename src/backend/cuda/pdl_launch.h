// Launching with programmatic dependent launch (sm_90): the kernel may start while its predecessor
// in the stream still runs, once that predecessor has called pdl_launch_dependents(); it must call
// pdl_wait() (device_utils.cuh) before it reads anything an earlier kernel wrote or writes
// anything an earlier kernel reads. What it does before the wait (weight prefetches, loads of the
// step's host-uploaded inputs) overlaps the predecessor's tail and the launch latency.
// MINIVLLM_NO_PDL=1 turns it off (plain stream order).
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "common/tuning.h"

namespace minivllm::cuda {

inline bool pdl_enabled() {
  static const bool enabled = !knob_flag("MINIVLLM_NO_PDL");
  return enabled;
}

// A kernel taking more than 48 KB of dynamic shared memory must opt in, per device: for each
// (kernel, device) pair, before its first launch or graph capture with that many bytes (a process
// may drive several GPUs, so a once-per-process flag would leave the second device's launches
// failing). The opt-in is raised to the most bytes asked so far on that device: a kernel whose
// shared memory follows its shape (the persistent decode kernel's ring) calls it before every
// launch, and only a larger request reaches the driver.
// The kernel is a template argument so that each kernel has its own record (kernels of one
// signature would otherwise share it).
template <auto kKernel>
void allow_dynamic_smem(int bytes) {
  static std::array<std::atomic<int>, 64> allowed{};  // by device: the opt-in set so far
  static std::mutex raise;
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  std::atomic<int>& set = allowed[static_cast<size_t>(dev & 63)];
  if (bytes <= set.load()) return;
  std::lock_guard<std::mutex> lock(raise);  // two raises at once must not leave the smaller one set
  if (bytes <= set.load()) return;
  CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  set.store(bytes);
}

// The same, the grid in clusters of cluster_x CTAs (grid.x a multiple of it; 0: no clusters).
template <typename... KernelArgs, typename... Args>
void launch_cluster_with_pdl(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, unsigned cluster_x, size_t smem,
                             cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (pdl_enabled()) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  if (cluster_x > 0) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = cluster_x;
    attr[n].val.clusterDim.y = 1;
    attr[n].val.clusterDim.z = 1;
    ++n;
  }
  cfg.attrs = attr;
  cfg.numAttrs = n;
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

template <typename... KernelArgs, typename... Args>
void launch_with_pdl(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                     Args&&... args) {
  launch_cluster_with_pdl(kernel, grid, block, 0, smem, stream, std::forward<Args>(args)...);
}

}  // namespace minivllm::cuda
