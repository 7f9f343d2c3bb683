// Loaded latency: how long one dependent load takes (a pointer chase, one thread) while (1) the
// other SMs stream DRAM with a given number of bytes in flight, and (2) the chasing thread's own SM
// streams (its CTA's other warps). Why: batch-1 kernels wait on chains of dependent loads while
// weights stream; PERFORMANCE.md ("Stop 80") has the figures.
//   nvcc -O3 -arch=sm_90a -std=c++17 tools/gpu_probes/loaded_latency.cu -o loaded_latency
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <vector>
#include <random>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); std::exit(1); } } while (0)

__device__ __forceinline__ uint64_t gtime() { uint64_t t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }

// One thread follows `hops` pointers (each a 128-byte line apart, random order): ns a hop.
__global__ void chase(const uint64_t* __restrict__ ring, int start, int hops, volatile int* go, uint64_t* out) {
  if (go) while (*go == 0) {}
  uint64_t i = start;
  uint64_t t0 = gtime();
  for (int h = 0; h < hops; ++h) i = __ldcg(ring + i);
  uint64_t t1 = gtime();
  out[0] = (t1 - t0);
  out[1] = i;
}

// Streamers: each thread keeps U 16-byte loads in flight, walking its own stride of the buffer,
// `iters` rounds. Signals `go` after its first round.
template <int U>
__global__ void __launch_bounds__(1024) stream(const uint4* __restrict__ buf, size_t n16, int iters, int* go, float* sink) {
  extern __shared__ uint8_t pad[];  // holds the SM alone
  const size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x, nth = (size_t)gridDim.x * blockDim.x;
  float acc = 0;
  size_t p = tid;
  for (int it = 0; it < iters; ++it) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) { v[u] = __ldcs(buf + (p & (n16 - 1))); p += nth; }
#pragma unroll
    for (int u = 0; u < U; ++u) acc += __uint_as_float(v[u].x ^ v[u].w);
    if (it == 2 && blockIdx.x == 0 && threadIdx.x == 0) { __threadfence(); *go = 1; }
  }
  if (acc == 1.2345f) sink[0] = acc + pad[0];
}


// The chase on warp 0 of a CTA whose other warps stream (each thread U 16-byte loads in flight) into
// the same SM: does a dependent load wait behind its own SM's incoming stream?
template <int U>
__global__ void __launch_bounds__(1024) chase_local(const uint64_t* __restrict__ ring, int hops, const uint4* __restrict__ buf,
                                                   size_t n16, uint64_t* out, float* sink) {
  __shared__ volatile int done;
  if (threadIdx.x == 0) done = 0;
  __syncthreads();
  if (threadIdx.x < 32) {
    if (threadIdx.x == 0) {
      uint64_t i = 0;
      for (int h = 0; h < 50; ++h) i = __ldcg(ring + i);  // streams ramp up
      uint64_t t0 = gtime();
      for (int h = 0; h < hops; ++h) i = __ldcg(ring + i);
      uint64_t t1 = gtime();
      out[0] = t1 - t0; out[1] = i; done = 1;
    }
    return;
  }
  float acc = 0;
  size_t p = threadIdx.x * 4096;
  while (!done) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) { v[u] = __ldcs(buf + (p & (n16 - 1))); p += 1024 * 4096 + 1; }
#pragma unroll
    for (int u = 0; u < U; ++u) acc += __uint_as_float(v[u].x ^ v[u].w);
  }
  if (acc == 1.2345f) sink[0] = acc;
}

int main() {
  int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  // chase rings: DRAM-sized (256 MB of lines) and L2-sized (4 MB)
  auto make_ring = [](size_t lines, std::vector<uint64_t>& h) {
    std::vector<uint64_t> order(lines); for (size_t i = 0; i < lines; ++i) order[i] = i;
    std::mt19937_64 rng(1); std::shuffle(order.begin(), order.end(), rng);
    h.assign(lines * 16, 0);
    for (size_t i = 0; i < lines; ++i) h[order[i] * 16] = order[(i + 1) % lines] * 16;
  };
  std::vector<uint64_t> hd, hl;
  make_ring((256u << 20) / 128, hd); make_ring((4u << 20) / 128, hl);
  uint64_t *dram_ring, *l2_ring, *out, hout[2];
  CK(cudaMalloc(&dram_ring, hd.size() * 8)); CK(cudaMemcpy(dram_ring, hd.data(), hd.size() * 8, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&l2_ring, hl.size() * 8)); CK(cudaMemcpy(l2_ring, hl.data(), hl.size() * 8, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&out, 64));
  const size_t bytes = size_t(2) << 30;
  uint4* buf; CK(cudaMalloc(&buf, bytes)); CK(cudaMemset(buf, 1, bytes));
  float* sink; CK(cudaMalloc(&sink, 64));
  int* go; CK(cudaMalloc(&go, 4));
  cudaStream_t s1, s2; CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking)); CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  const int smem = 120 * 1024;
  auto run_chase = [&](const uint64_t* ring, int hops, bool wait) -> double {
    chase<<<1, 1, 0, s2>>>(ring, 0, hops, wait ? go : nullptr, out);
    CK(cudaGetLastError());
    CK(cudaMemcpyAsync(hout, out, 16, cudaMemcpyDeviceToHost, s2));
    CK(cudaStreamSynchronize(s2));
    return hout[0] / double(hops);
  };
  // idle
  run_chase(l2_ring, 2000, false);
  printf("idle: L2 chase %.0f ns/hop, DRAM chase %.0f ns/hop\n", run_chase(l2_ring, 4000, false), run_chase(dram_ring, 2000, false));
  auto loaded = [&](auto kern, int U, int threads) {
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const int grid = sms - 1;
    const double inflight_mb = double(grid) * threads * U * 16 / 1e6;
    const int iters = int(std::min<double>(1000000, 16e9 / (double(grid) * threads * U * 16)));  // ~16 GB: longer than the chase
    for (int which = 0; which < 2; ++which) {
      CK(cudaMemsetAsync(go, 0, 4, s1)); CK(cudaStreamSynchronize(s1));
      cudaEvent_t e0, e1;
      CK(cudaEventCreate(&e0));
      CK(cudaEventCreate(&e1));
      CK(cudaEventRecord(e0, s1));
      kern<<<grid, threads, smem, s1>>>(buf, bytes / 16, iters, go, sink);
      CK(cudaGetLastError());
      CK(cudaEventRecord(e1, s1));
      double ns = run_chase(which ? dram_ring : l2_ring, which ? 1000 : 2000, true);
      CK(cudaStreamSynchronize(s1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      CK(cudaEventDestroy(e0));
      CK(cudaEventDestroy(e1));
      const double tbs = double(grid) * threads * U * 16 * iters / (ms * 1e-3) / 1e12;
      printf("stream %4d thr x U=%2d on %d SMs: %6.1f MB in flight, %.2f TB/s: %s chase %5.0f ns/hop\n", threads, U, grid,
             inflight_mb, tbs, which ? "DRAM" : "L2  ", ns);
    }
    return 0;
  };
  loaded(stream<1>, 1, 128);
  loaded(stream<1>, 1, 256);
  loaded(stream<2>, 2, 256);
  loaded(stream<4>, 4, 256);
  loaded(stream<4>, 4, 512);
  loaded(stream<8>, 8, 512);
  loaded(stream<8>, 8, 1024);
  loaded(stream<16>, 16, 1024);

  auto local = [&](auto kern, int U, int threads) {
    for (int which = 0; which < 2; ++which) {
      const int hops = which ? 500 : 1000;
      kern<<<1, threads, 0, s2>>>(which ? dram_ring : l2_ring, hops, buf, bytes / 16, out, sink);
      CK(cudaGetLastError());
      CK(cudaMemcpyAsync(hout, out, 16, cudaMemcpyDeviceToHost, s2)); CK(cudaStreamSynchronize(s2));
      printf("same SM: %4d streaming threads x U=%2d (%.0f KB in flight): %s chase %5.0f ns/hop\n", threads - 32, U,
             (threads - 32) * U * 16 / 1024.0, which ? "DRAM" : "L2  ", hout[0] / double(hops));
    }
    return 0;
  };
  local(chase_local<1>, 1, 64);
  local(chase_local<4>, 4, 128);
  local(chase_local<4>, 4, 256);
  local(chase_local<8>, 8, 256);
  local(chase_local<8>, 8, 512);
  local(chase_local<8>, 8, 1024);
  return 0;
}
