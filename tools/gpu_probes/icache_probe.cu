// Does cold instruction fetch cost a kernel its time? Straight-line kernels of N FMAs (16 bytes of
// SASS each), timed inside (globaltimer, thread 0 of each CTA), hot (relaunched) and cold (after
// other kernels' code ran on every SM). Why: batch-1 steps run dozens of kernels of 10-110 KB of
// SASS each; PERFORMANCE.md ("Stop 80") has the figures.
//   nvcc -O3 -arch=sm_90a -std=c++17 tools/gpu_probes/icache_probe.cu -o icache_probe
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); std::exit(1); } } while (0)

__device__ __forceinline__ uint64_t gtime() { uint64_t t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }

template <int N, int SALT>
__global__ void straight(float* out, uint64_t* t, float x) {
  uint64_t t0 = gtime();
  float a0 = x, a1 = x + 1, a2 = x + 2, a3 = x + 3, a4 = x + 4, a5 = x + 5, a6 = x + 6, a7 = x + 7;
  const float b = 1.0001f + SALT * 1e-7f, c = 0.5f;
#pragma unroll
  for (int i = 0; i < N / 8; ++i) {
    asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(a0) : "f"(b), "f"(c));
    asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(a1) : "f"(b), "f"(c));
    asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(a2) : "f"(b), "f"(c));
    asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(a3) : "f"(b), "f"(c));
    asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(a4) : "f"(b), "f"(c));
    asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(a5) : "f"(b), "f"(c));
    asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(a6) : "f"(b), "f"(c));
    asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(a7) : "f"(b), "f"(c));
  }
  __syncthreads();
  uint64_t t1 = gtime();
  if (threadIdx.x == 0) t[blockIdx.x] = t1 - t0;
  out[blockIdx.x * blockDim.x + threadIdx.x] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}

template <int N, int SALT>
int run(const char* name, int grid, int threads, float* out, uint64_t* t, uint64_t* th, cudaStream_t s) {
  auto k = straight<N, SALT>;
  // flushers: 4 x 64 KB of other code, on every SM
  auto f0 = straight<4096, 1001>; auto f1 = straight<4096, 1002>; auto f2 = straight<4096, 1003>; auto f3 = straight<4096, 1004>;
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  // k once: its slowest CTA's time, us.
  auto timed_k = [&] {
    k<<<grid, threads, 0, s>>>(out, t, 1.0f);
    CK(cudaGetLastError());
    CK(cudaMemcpyAsync(th, t, grid * 8, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    return *std::max_element(th, th + grid) / 1000.0;
  };
  std::vector<double> hot, cold;
  for (int rep = 0; rep < 12; ++rep) {
    // cold: flush, then k
    f0<<<sms * 4, 256, 0, s>>>(out, t + 4096, 1.0f); f1<<<sms * 4, 256, 0, s>>>(out, t + 4096, 1.0f);
    f2<<<sms * 4, 256, 0, s>>>(out, t + 4096, 1.0f); f3<<<sms * 4, 256, 0, s>>>(out, t + 4096, 1.0f);
    const double c = timed_k();
    const double h = timed_k();  // hot: the same kernel again
    if (rep >= 2) {
      cold.push_back(c);
      hot.push_back(h);
    }
  }
  std::sort(hot.begin(), hot.end()); std::sort(cold.begin(), cold.end());
  printf("%-8s N=%5d (%3d KB) grid %4d x %3d: hot %7.2f us  cold %7.2f us  (cold-hot %6.2f us, %.1f ns/KB)\n", name, N, N * 16 / 1024,
         grid, threads, hot[hot.size() / 2], cold[cold.size() / 2], cold[cold.size() / 2] - hot[hot.size() / 2],
         1000.0 * (cold[cold.size() / 2] - hot[hot.size() / 2]) / (N * 16 / 1024));
  return 0;
}

int main() {
  float* out; uint64_t* t; uint64_t* th;
  CK(cudaMalloc(&out, 1 << 24)); CK(cudaMalloc(&t, 8 * 8192)); CK(cudaMallocHost(&th, 8 * 8192));
  cudaStream_t s; CK(cudaStreamCreate(&s));
  for (int g : {1, 132}) for (int th_ : {128, 512}) {
    run<512, 1>("8KB", g, th_, out, t, th, s);
    run<1024, 2>("16KB", g, th_, out, t, th, s);
    run<2048, 3>("32KB", g, th_, out, t, th, s);
    run<4096, 4>("64KB", g, th_, out, t, th, s);
    run<6144, 5>("96KB", g, th_, out, t, th, s);
    run<8192, 6>("128KB", g, th_, out, t, th, s);
  }
  return 0;
}
