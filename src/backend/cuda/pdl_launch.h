// Launching with programmatic dependent launch (sm_90): the kernel may start while its predecessor
// in the stream still runs, once that predecessor has called pdl_launch_dependents(); it must call
// pdl_wait() (device_utils.cuh) before it reads anything an earlier kernel wrote or writes
// anything an earlier kernel reads. What it does before the wait (weight prefetches, loads of the
// step's host-uploaded inputs) overlaps the predecessor's tail and the launch latency.
// MINIVLLM_NO_PDL=1 turns it off (plain stream order).
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "common/tuning.h"

namespace minivllm::cuda {

inline bool pdl_enabled() {
  static const bool enabled = !knob_flag("MINIVLLM_NO_PDL");
  return enabled;
}

// A kernel taking more than 48 KB of dynamic shared memory must opt in, per device: once for each
// (kernel, device) pair, before its first launch or graph capture (a process may drive several
// GPUs, so a once-per-process flag would leave the second device's launches failing).
// The kernel is a template argument so that each kernel has its own flags (kernels of one
// signature would otherwise share them).
template <auto kKernel>
void allow_dynamic_smem(int bytes) {
  static std::atomic<uint64_t> done_on{0};  // bit d: set on device d
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  const uint64_t bit = uint64_t{1} << (dev & 63);
  if ((done_on.load() & bit) != 0) return;
  CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  done_on.fetch_or(bit);
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
