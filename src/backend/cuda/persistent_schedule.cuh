// The persistent decode kernel's scheduling: which weight tiles a CTA owns, and the grid-wide
// barrier between the step's dependent phases.
//
// Deadlock. A CTA that waits at the grid barrier spins until every CTA of the grid has arrived, so
// every CTA must be resident at once: one that is still waiting for an SM behind a spinning one
// would never arrive. The launch makes that impossible rather than unlikely: the grid is one CTA
// per SM (the kernel's shared memory leaves room for one), and it is a cooperative launch, which
// the driver refuses (an error, not a hang) unless the whole grid fits on the device at once,
// whatever else runs beside it. Within a CTA the producer warp never waits on the consumers'
// barrier, only on ring slots they free, and the consumers free every slot they take, so the ring
// cannot stall a barrier either.
#pragma once

#include <cstdint>

#include "backend/cuda/device_utils.cuh"

namespace minivllm::cuda {

// CTA `cta` of `grid` owns tiles [begin, end) of `tiles`: contiguous, sizes differing by one at most.
__device__ __forceinline__ void pd_tile_range(int tiles, int cta, int grid, int& begin, int& end) {
  begin = static_cast<int>(static_cast<int64_t>(tiles) * cta / grid);
  end = static_cast<int>(static_cast<int64_t>(tiles) * (cta + 1) / grid);
}

__device__ __forceinline__ unsigned pd_load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Every CTA's `threads` consumer threads (named barrier `bar_id`) arrive; returns once all `grid`
// CTAs have, the `n`-th barrier of the launch (counter counts arrivals, never reset mid-launch).
// Writes before it (any CTA) are visible to reads after it through L2: the readers use ld.global.cg.
__device__ __forceinline__ void pd_grid_barrier(unsigned* counter, unsigned n, unsigned grid, int ctid, int bar_id,
                                                int threads) {
  named_bar_sync(bar_id, threads);
  if (ctid == 0) {
    // Release (cumulative: it covers what the CTA's threads wrote before the named barrier), then
    // acquire; the named barrier after it orders the others' reads behind this thread's acquire.
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;\n" ::"l"(counter) : "memory");
    const unsigned target = n * grid;
    while (pd_load_acquire(counter) < target) {
    }
  }
  named_bar_sync(bar_id, threads);
}

}  // namespace minivllm::cuda
