// A stand-in for a latency-bound kernel that carries an L2Prefetch (the decode attention kernels
// call l2_prefetch_share the same way): its CTAs issue their slices, let the next kernel launch,
// and then spin for a fixed time. CudaL2PrefetchBench times a gemv after it, with and without the
// prefetch of that gemv's weights.
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/l2_prefetch.cuh"
#include "backend/cuda/pdl_launch.h"

namespace minivllm::cuda {
namespace {

__global__ void l2_prefetch_probe_kernel(L2Prefetch pf, int64_t spin_ns) {
  pdl_launch_dependents();
  l2_prefetch_share(pf);
  pdl_wait();  // ordered after the kernel before, as the attention is
  uint64_t t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (;;) {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (static_cast<int64_t>(t - t0) >= spin_ns) break;
    __nanosleep(200);
  }
}

}  // namespace

void launch_l2_prefetch_probe(const L2Prefetch& pf, int ctas, int64_t spin_ns, cudaStream_t stream) {
  launch_with_pdl(l2_prefetch_probe_kernel, dim3(ctas), dim3(128), 0, stream, pf, spin_ns);
}

}  // namespace minivllm::cuda
