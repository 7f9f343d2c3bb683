// Stream rate by grid shape: how fast the GPU reads a 75 MB weight stream (one MoE layer's experts)
// when the same bytes are pulled by one CTA an SM of 256 / 512 / 1024 threads, or by many small CTAs
// as the layer path's gemvs are. Each thread keeps U 16-byte loads in flight (the engine's own
// load_streaming), walking a contiguous slice of the CTA's share. Why: stops 93 and 96 found
// one-launch MLPs of one CTA an SM streaming at ~3 TB/s where the gemvs reach 3.2-4.1;
// PERFORMANCE.md ("Stop 96") has the figures.
//   nvcc -O3 -arch=sm_90a -std=c++17 -I src tools/gpu_probes/stream_rate.cu -o stream_rate
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "backend/cuda/device_utils.cuh"

using minivllm::cuda::load_streaming;
#define CK(x)                                                              \
  do {                                                                     \
    cudaError_t e = (x);                                                   \
    if (e != cudaSuccess) {                                                \
      printf("%s: %s\n", #x, cudaGetErrorString(e));                       \
      std::exit(1);                                                        \
    }                                                                      \
  } while (0)

// CTA b reads chunks [b * per, (b + 1) * per) of `base`; thread t its chunks t, t + T, ... in steps of
// U chunks a thread, every load of a step issued before any is used.
template <int U>
__global__ void stream(const uint4* base, int64_t per, unsigned* sink) {
  const uint4* p = base + blockIdx.x * per;
  uint32_t acc = 0;
  for (int64_t c0 = threadIdx.x; c0 < per; c0 += static_cast<int64_t>(blockDim.x) * U) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + static_cast<int64_t>(u) * blockDim.x;
      v[u] = c < per ? load_streaming(p + c) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x12345678u) sink[0] = acc;  // keeps the loads
}

// The MoE down projection's access: 8 experts of [2048 rows, 768 bf16] (1,536-byte rows); CTA (e, j)
// reads segment j (S bytes) of each of expert e's rows, as a block of S / 2 intermediate columns
// would. Thread t takes the CTA's 16-byte chunks t, t + T, ... (row-major over the segments).
template <int U>
__global__ void segments(const uint4* base, int seg_chunks, int blocks, unsigned* sink) {
  constexpr int kRows = 2048, kRowChunks = 96;
  const int e = blockIdx.x / blocks, j = blockIdx.x % blocks;
  const uint4* p = base + static_cast<int64_t>(e) * kRows * kRowChunks + j * seg_chunks;
  const int total = kRows * seg_chunks;
  uint32_t acc = 0;
  for (int c0 = threadIdx.x; c0 < total; c0 += blockDim.x * U) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + u * blockDim.x;
      v[u] = c < total ? load_streaming(p + (c / seg_chunks) * kRowChunks + c % seg_chunks) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x12345678u) sink[0] = acc;
}

// us a launch of `launch(region)`, 60 launches back to back over the regions in turn (after one
// warm-up launch each), so that no launch finds its bytes in L2.
template <typename Launch>
double time_launches(int regions, Launch launch) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int r = 0; r < regions; ++r) launch(r);
  const int reps = 60;
  CK(cudaEventRecord(a));
  for (int i = 0; i < reps; ++i) launch(i % regions);
  CK(cudaEventRecord(b));
  CK(cudaEventSynchronize(b));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return ms * 1e3 / reps;
}

double run_segments(const uint4* buf, int regions, int seg_bytes, int threads, unsigned* sink) {
  const int seg_chunks = seg_bytes / 16, blocks = 1536 / seg_bytes;
  const int64_t region = 8LL * 2048 * 96;  // chunks
  return time_launches(regions, [&](int r) {
    segments<4><<<8 * blocks, threads>>>(buf + r * region, seg_chunks, blocks, sink);
  });
}

template <int U>
double run(const uint4* buf, int64_t chunks, int regions, int ctas, int threads, unsigned* sink) {
  const int64_t per = chunks / ctas;
  return time_launches(regions, [&](int r) { stream<U><<<ctas, threads>>>(buf + r * chunks, per, sink); });
}

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int64_t bytes = 75500000 / 16 / 4096 * 4096 * 16;  // ~75 MB, a multiple of every grid's share
  const int64_t chunks = bytes / 16;
  const int regions = 4;  // rotated, so nothing is left in the 50 MB L2
  uint4* buf = nullptr;
  CK(cudaMalloc(&buf, bytes * regions));
  CK(cudaMemset(buf, 1, bytes * regions));
  unsigned* sink = nullptr;  // written only if a sum hits its sentinel: keeps the loads
  CK(cudaMalloc(&sink, 4));
  struct Shape { int ctas_per_sm, threads, u; };
  const Shape shapes[] = {{1, 256, 8}, {1, 256, 16}, {1, 512, 4}, {1, 512, 8}, {1, 1024, 2}, {1, 1024, 4},
                          {2, 512, 4}, {4, 256, 4}, {8, 128, 4}, {12, 128, 2}, {12, 128, 4}};
  printf("%d SMs, %.1f MB a launch, us and TB/s (launches back to back, each a kernel boundary)\n", sms, bytes / 1e6);
  for (const Shape& s : shapes) {
    const int ctas = s.ctas_per_sm * sms;
    double us = 0;
    switch (s.u) {
      case 2: us = run<2>(buf, chunks, regions, ctas, s.threads, sink); break;
      case 4: us = run<4>(buf, chunks, regions, ctas, s.threads, sink); break;
      case 8: us = run<8>(buf, chunks, regions, ctas, s.threads, sink); break;
      default: us = run<16>(buf, chunks, regions, ctas, s.threads, sink); break;
    }
    printf("%2d CTAs an SM x %4d threads, %2d loads in flight a thread (%3lld KB an SM): %7.2f us  %.2f TB/s\n",
           s.ctas_per_sm, s.threads, s.u, static_cast<long long>(s.ctas_per_sm) * s.threads * s.u * 16 / 1024, us,
           bytes / us / 1e6);
  }
  printf("the experts' down rows (25.2 MB), CTA (expert, block of columns), 1024 threads, 4 loads in flight a thread:\n");
  for (int seg : {32, 64, 96, 128, 192, 1536}) {
    const double us = run_segments(buf, regions, seg, 1024, sink);
    printf("  %4d-byte segments, %3d CTAs: %6.2f us  %.2f TB/s\n", seg, 8 * (1536 / seg), us, 8.0 * 2048 * 1536 / us / 1e6);
  }
  CK(cudaFree(sink));
  CK(cudaFree(buf));
  return 0;
}
