// A CTA's slice of an L2Prefetch (cuda_kernels.h): the ranges laid end to end, split into equal
// 16-byte-aligned slices, one a CTA of the grid. Issued before a kernel's PDL wait, the fetches run
// while the kernel waits on its predecessor and then on its own latency chain; nothing waits for
// them (a prefetch is a hint: the later reads are correct whether or not they hit).
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_kernels.h"

namespace minivllm::cuda {

__device__ __forceinline__ void l2_prefetch_bytes(const char* p, uint64_t n, L2PrefetchForm form) {
  if (form == L2PrefetchForm::kLines) {
    for (uint64_t off = static_cast<uint64_t>(threadIdx.x) * 128; off < n; off += static_cast<uint64_t>(blockDim.x) * 128) {
      asm volatile("prefetch.global.L2 [%0];" ::"l"(p + off));
    }
    return;
  }
  if (threadIdx.x != 0) return;
  constexpr uint64_t kPiece = 1u << 30;  // the instruction's size is 32-bit
  for (uint64_t off = 0; off < n; off += kPiece) {
    const uint32_t size = static_cast<uint32_t>(n - off < kPiece ? n - off : kPiece);
    if (form == L2PrefetchForm::kBulkLast) {
      uint64_t policy;
      asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
      asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;" ::"l"(p + off), "r"(size),
                   "l"(policy)
                   : "memory");
    } else {
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + off), "r"(size) : "memory");
    }
  }
}

// This CTA's slice of `pf` (every CTA of the grid calls it; a grid of one takes everything).
__device__ __forceinline__ void l2_prefetch_share(const L2Prefetch& pf) {
  if (pf.count == 0) return;
  uint64_t total = 0;
  for (int i = 0; i < pf.count; ++i) total += pf.bytes[i];
  const uint64_t ctas = static_cast<uint64_t>(gridDim.x) * gridDim.y * gridDim.z;
  const uint64_t cta = blockIdx.x + static_cast<uint64_t>(gridDim.x) * (blockIdx.y + static_cast<uint64_t>(gridDim.y) * blockIdx.z);
  const uint64_t slice = (total / ctas + 15) & ~uint64_t{15};
  uint64_t lo = cta * slice, hi = lo + slice < total ? lo + slice : total;
  uint64_t base = 0;  // the current range's offset in the concatenation
  for (int i = 0; i < pf.count && lo < hi; ++i) {
    const uint64_t end = base + pf.bytes[i];
    if (lo < end) {
      const uint64_t stop = hi < end ? hi : end;
      l2_prefetch_bytes(pf.ptr[i] + (lo - base), stop - lo, pf.form);
      lo = stop;
    }
    base = end;
  }
}

}  // namespace minivllm::cuda
