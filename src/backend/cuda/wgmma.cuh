// Hopper warpgroup MMA (wgmma, sm_90a) helpers shared by the kernels that use it: the
// shared-memory matrix descriptor, the fence / commit / wait of an asynchronous group, and the
// register pin that keeps the compiler from moving accumulator accesses across them.
// wgmma_ss.cuh (generated) holds the MMA of every N with both operands in shared memory.
#pragma once

#include <cstdint>

#include "backend/cuda/wgmma_ss.cuh"

namespace minivllm::cuda {

// Shared-memory matrix descriptor, 128-byte swizzle: start address, leading and stride byte
// offsets (PTX ISA, "Matrix Descriptor Format"). K-major: the stride is 1024 bytes between groups
// of 8 rows (the leading offset is unused). MN-major: leading = the next 64 columns (a column
// block), stride = the next 8 rows of K.
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lead_bytes, uint32_t stride_bytes) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lead_bytes >> 4) << 16) |
         (static_cast<uint64_t>(stride_bytes >> 4) << 32) | (1ull << 62);
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
// The wgmma asm statements name the accumulators as outputs, but the values land only at
// wgmma.wait_group: pinning each register with an empty volatile asm keeps the compiler from
// moving its reads (or writes) across the fence or the wait.
template <int N>
__device__ __forceinline__ void pin(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

}  // namespace minivllm::cuda
