// Which block-scaled FP8 GEMMs cuBLASLt takes on this GPU: VEC128_32F (a scale per 128 values of a
// row) and BLK128x128_32F (a scale per 128 x 128 block) on A and B, both operand orders (weights as
// A, y = [T, N]; or activations as A), D in bf16 or fp32, column or row order, timed at a prefill
// and two decode shapes (PROBE_RANDOM=1: random codes). First it checks the scale layouts against
// the CPU on random codes and scales (PROBE_CHECK_ONLY=1: only that). Why: Qwen3-*-FP8 carries
// 128 x 128 weight blocks, and a 2026-11-29 check had found no algorithm for them; on cuBLASLt 13.1
// the heuristic finds one once the scale pointers are set (PERFORMANCE.md, "Stop 85").
//   nvcc -O2 -std=c++17 tools/gpu_probes/cublaslt_block_scales.cu -lcublasLt -o cublaslt_block_scales
#include <cublasLt.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <algorithm>
#include <vector>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); std::exit(1); } } while (0)
#define LK(x) do { cublasStatus_t s = (x); if (s != CUBLAS_STATUS_SUCCESS) { printf("%s: %d\n", #x, (int)s); std::exit(1); } } while (0)

static const char* mode_name(int m) { return m == CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F ? "VEC128" : m == CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F ? "BLK128" : "SCALAR"; }

struct Case {
  bool weights_a;  // A = W [N, K] (y [T, N] column-major as [N x T]); else A = X (y^T)
  int a_mode, b_mode;
  cudaDataType_t d_type;
  bool d_row;
};


static float e4m3_value(uint8_t b) {
  const int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  const float v = e == 0 ? std::ldexp(m / 8.0f, -6) : std::ldexp(1.0f + m / 8.0f, e - 7);
  return s ? -v : v;
}

// One GEMM with random codes and scales, against the CPU's sums for each candidate scale layout:
// x's VEC128 scales token-major [T][K/128] or block-major [K/128][T]; W's 128 x 128 scales
// [N/128][K/128] or [K/128][N/128]. Prints each layout pair's largest relative error.
static void check_layouts(cublasLtHandle_t h, bool weights_a, int64_t T = 256, int64_t N = 384, int64_t K = 512,
                          int64_t ldx = 0, bool pad_w = false) {
  const int64_t KB = pad_w ? (K / 128 + 3) / 4 * 4 : K / 128, NB = (N + 127) / 128;
  if (ldx == 0) ldx = T;
  std::vector<uint8_t> hx(T * K), hw(N * K);
  std::vector<float> hsx(std::max(T, ldx) * KB), hsw(NB * KB);
  uint32_t r = 12345;
  auto rnd = [&]() { r = r * 1664525u + 1013904223u; return r >> 8; };
  auto code = [&]() { uint8_t b; do { b = static_cast<uint8_t>(rnd()); } while ((b & 0x7f) == 0x7f || ((b >> 3) & 15) > 9); return b; };
  for (auto& b : hx) b = code();
  for (auto& b : hw) b = code();
  for (auto& f : hsx) f = 0.25f + (rnd() % 1000) / 250.0f;
  for (auto& f : hsw) f = 0.25f + (rnd() % 1000) / 250.0f;
  void *x, *w, *sx, *sw, *d;
  CK(cudaMalloc(&x, T * K)); CK(cudaMalloc(&w, N * K)); CK(cudaMalloc(&sx, std::max(T, ldx) * KB * 4)); CK(cudaMalloc(&sw, NB * KB * 4));
  CK(cudaMalloc(&d, T * N * 4));
  CK(cudaMemcpy(x, hx.data(), T * K, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(w, hw.data(), N * K, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(sx, hsx.data(), std::max(T, ldx) * KB * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(sw, hsw.data(), NB * KB * 4, cudaMemcpyHostToDevice));
  const int64_t m = weights_a ? N : T, n = weights_a ? T : N;
  cublasLtMatmulDesc_t op;
  LK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  const int V = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, B = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
  const int am = weights_a ? B : V, bm = weights_a ? V : B;
  LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &am, sizeof(int)));
  LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &bm, sizeof(int)));
  void* pa = weights_a ? sw : sx;
  void* pb = weights_a ? sx : sw;
  LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &pa, sizeof(pa)));
  LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &pb, sizeof(pb)));
  cublasLtMatrixLayout_t la, lb, lc;
  LK(cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, K, m, K));
  LK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, K, n, K));
  // y [T, N] row-major: W as A gives D = [N x T] column-major; X as A, D = [T x N] in row order.
  LK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, m, n, weights_a ? m : n));
  if (!weights_a) {
    cublasLtOrder_t o = CUBLASLT_ORDER_ROW;
    LK(cublasLtMatrixLayoutSetAttribute(lc, CUBLASLT_MATRIX_LAYOUT_ORDER, &o, sizeof(o)));
  }
  cublasLtMatmulPreference_t pref;
  LK(cublasLtMatmulPreferenceCreate(&pref));
  cublasLtMatmulHeuristicResult_t res;
  int found = 0;
  void* ws = nullptr;
  const size_t ws_bytes = 64 << 20;
  CK(cudaMalloc(&ws, ws_bytes));
  LK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof(ws_bytes)));
  const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, lc, pref, 1, &res, &found);
  if (hs != CUBLAS_STATUS_SUCCESS || found == 0) {
    printf("check %s T %lld N %lld: no algorithm (status %d)\n", weights_a ? "W as A" : "X as A", (long long)T,
           (long long)N, (int)hs);
    return;
  }
  const float alpha = 1.0f, beta = 0.0f;
  LK(cublasLtMatmul(h, op, &alpha, weights_a ? w : x, la, weights_a ? x : w, lb, &beta, d, lc, d, lc, &res.algo,
                    ws, ws_bytes, 0));
  CK(cudaDeviceSynchronize());
  std::vector<float> y(T * N);
  CK(cudaMemcpy(y.data(), d, T * N * 4, cudaMemcpyDeviceToHost));
  for (int xl = 1; xl < 2; ++xl) {  // (the other layouts were wrong at T 256: PERFORMANCE.md)
    for (int wl = 0; wl < 1; ++wl) {
      double worst = 0;
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t j = 0; j < N; ++j) {
          double sum = 0, mag = 0;
          for (int64_t kb = 0; kb < K / 128; ++kb) {
            double part = 0;
            for (int64_t k = kb * 128; k < kb * 128 + 128; ++k) part += (double)e4m3_value(hx[t * K + k]) * e4m3_value(hw[j * K + k]);
            const double s = (xl ? hsx[kb * ldx + t] : hsx[t * KB + kb]) * (double)(wl ? hsw[kb * NB + j / 128] : hsw[(j / 128) * KB + kb]);
            sum += part * s;
            mag += std::fabs(part * s);
          }
          worst = std::max(worst, std::fabs(sum - y[t * N + j]) / (mag + 1e-9));
        }
      }
      if (xl == 1 && wl == 0)
        printf("check %s T %lld N %lld K %lld, x scales [K/128][ld %lld], W [N/128][K/128]: worst %.2e\n",
               weights_a ? "W as A" : "X as A", (long long)T, (long long)N, (long long)K, (long long)ldx, worst);
    }
  }
  cudaFree(x); cudaFree(w); cudaFree(sx); cudaFree(sw); cudaFree(d);
}

int main() {
  setvbuf(stdout, nullptr, _IONBF, 0);
  int ver = (int)cublasLtGetVersion();
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  printf("cublasLt %d, %s sm_%d%d\n", ver, p.name, p.major, p.minor);
  cublasLtHandle_t h;
  LK(cublasLtCreate(&h));
  check_layouts(h, false);
  auto rnd = [](int64_t v, int64_t m) { return (v + m - 1) / m * m; };
  for (int64_t T : {200, 256})
    for (int64_t K : {1024, 1152})
      for (bool pad : {false, true}) {
        printf("W grid row stride %s: ", pad ? "ceil(K/128) to a multiple of 4" : "ceil(K/128)");
        check_layouts(h, false, T, 1040, K, rnd(T, 1), pad);
      }
  if (getenv("PROBE_CHECK_ONLY")) return 0;
  const int64_t N = 12288, K = 4096, Tmax = 8192;
  void *w, *x, *d, *sw, *sx, *ws;
  CK(cudaMalloc(&w, N * K));
  CK(cudaMalloc(&x, Tmax * K));
  CK(cudaMalloc(&d, Tmax * N * 4));
  CK(cudaMalloc(&sw, 64 << 20));
  CK(cudaMalloc(&sx, 64 << 20));
  const size_t ws_bytes = 64 << 20;
  CK(cudaMalloc(&ws, ws_bytes));
  if (getenv("PROBE_RANDOM")) {  // random codes (no NaN, |v| <= 2): the tensor cores' power as in a model
    std::vector<uint8_t> hb(std::max(N, Tmax) * K);
    uint32_t r = 777;
    for (auto& b : hb) { do { r = r * 1664525u + 1013904223u; b = static_cast<uint8_t>(r >> 8); } while ((b & 0x7f) == 0x7f || ((b >> 3) & 15) > 8); }
    CK(cudaMemcpy(w, hb.data(), N * K, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(x, hb.data(), Tmax * K, cudaMemcpyHostToDevice));
  } else {
    CK(cudaMemset(w, 0x38, N * K));  // e4m3 1.0
    CK(cudaMemset(x, 0x38, Tmax * K));
  }
  {
    std::vector<float> ones(16 << 20, 1.0f);
    CK(cudaMemcpy(sw, ones.data(), 64 << 20, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(sx, ones.data(), 64 << 20, cudaMemcpyHostToDevice));
  }
  const int V = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, B = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
  std::vector<Case> cases;
  for (int wa = 0; wa < 2; ++wa)
    for (int am : {V, B})
      for (int bm : {V, B})
        for (cudaDataType_t dt : {CUDA_R_16BF, CUDA_R_32F})
          for (int row = 0; row < 2; ++row) cases.push_back({wa == 1, am, bm, dt, row == 1});
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (const Case& c : cases) {
    for (int64_t T : {int64_t{8192}, int64_t{256}, int64_t{64}}) {
      const int64_t m = c.weights_a ? N : T, n = c.weights_a ? T : N;
      cublasLtMatmulDesc_t op;
      LK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
      cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
      LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
      LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
      LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &c.a_mode, sizeof(int)));
      LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &c.b_mode, sizeof(int)));
      void* pa = c.weights_a ? sw : sx;
      void* pb = c.weights_a ? sx : sw;
      LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &pa, sizeof(pa)));
      LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &pb, sizeof(pb)));
      cublasLtMatrixLayout_t la, lb, lc;
      LK(cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, K, m, K));
      LK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, K, n, K));
      LK(cublasLtMatrixLayoutCreate(&lc, c.d_type, m, n, c.d_row ? n : m));
      if (c.d_row) {
        cublasLtOrder_t o = CUBLASLT_ORDER_ROW;
        LK(cublasLtMatrixLayoutSetAttribute(lc, CUBLASLT_MATRIX_LAYOUT_ORDER, &o, sizeof(o)));
      }
      cublasLtMatmulPreference_t pref;
      LK(cublasLtMatmulPreferenceCreate(&pref));
      LK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof(ws_bytes)));
      cublasLtMatmulHeuristicResult_t res[4];
      int found = 0;
      cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, lc, pref, 4, res, &found);
      printf("%-7s A %-6s B %-6s D %-4s %-3s T %5lld: ", c.weights_a ? "W as A" : "X as A", mode_name(c.a_mode),
             mode_name(c.b_mode), c.d_type == CUDA_R_16BF ? "bf16" : "f32", c.d_row ? "row" : "col", (long long)T);
      if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
        printf("no algorithm (status %d)\n", (int)st);
      } else {
        const float alpha = 1.0f, beta = 0.0f;
        cudaError_t le = cudaSuccess;
        cublasStatus_t rs = CUBLAS_STATUS_SUCCESS;
        for (int i = 0; i < 3 && rs == CUBLAS_STATUS_SUCCESS; ++i)
          rs = cublasLtMatmul(h, op, &alpha, c.weights_a ? w : x, la, c.weights_a ? x : w, lb, &beta, d, lc, d, lc,
                              &res[0].algo, ws, ws_bytes, 0);
        const int iters = 20;
        CK(cudaEventRecord(e0));
        for (int i = 0; i < iters && rs == CUBLAS_STATUS_SUCCESS; ++i)
          rs = cublasLtMatmul(h, op, &alpha, c.weights_a ? w : x, la, c.weights_a ? x : w, lb, &beta, d, lc, d, lc,
                              &res[0].algo, ws, ws_bytes, 0);
        CK(cudaEventRecord(e1));
        le = cudaEventSynchronize(e1);
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        const double us = 1000.0 * ms / iters;
        // Check one output: all codes 1.0 and scales 1 give K.
        float got = 0;
        if (c.d_type == CUDA_R_32F) {
          CK(cudaMemcpy(&got, d, 4, cudaMemcpyDeviceToHost));
        } else {
          uint16_t b16 = 0;
          CK(cudaMemcpy(&b16, d, 2, cudaMemcpyDeviceToHost));
          uint32_t u = static_cast<uint32_t>(b16) << 16;
          memcpy(&got, &u, 4);
        }
        printf("%d algos, run %d/%s, %.1f us = %.0f TFLOP/s, y[0] %.0f (want %lld)\n", found, (int)rs,
               cudaGetErrorString(le), us, 2.0 * T * N * K / us / 1e6, got, (long long)K);
      }
      cublasLtMatmulPreferenceDestroy(pref);
      cublasLtMatrixLayoutDestroy(la);
      cublasLtMatrixLayoutDestroy(lb);
      cublasLtMatrixLayoutDestroy(lc);
      cublasLtMatmulDescDestroy(op);
    }
  }
  return 0;
}
