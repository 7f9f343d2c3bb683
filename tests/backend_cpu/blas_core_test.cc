// cpu::fit_blas_core (backend/cpu/blas_core.h): OpenBLAS runs a kernel set that the CPU's vector units
// call for, not the SSE3 fallback it picks for a CPU newer than itself.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "backend/cpu/blas_core.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/quant_kernels.h"

namespace minivllm::cpu {
namespace {

TEST(BlasCore, TheSetFollowsTheVectorUnits) {
  EXPECT_STREQ(blas_core_for(/*avx512=*/true, /*avx2=*/true), "SkylakeX");
  EXPECT_STREQ(blas_core_for(false, true), "Haswell");
  EXPECT_EQ(blas_core_for(false, false), nullptr);
}

TEST(BlasCore, KnowsWhichSetsLackAvx2) {
  for (const char* older : {"Prescott", "Core2", "Nehalem", "Sandybridge", "Barcelona", "Opteron_SSE3", "Unknown"}) {
    EXPECT_TRUE(blas_core_lacks_avx2(older)) << older;
  }
  for (const char* newer : {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids"}) {
    EXPECT_FALSE(blas_core_lacks_avx2(newer)) << newer;
  }
}

// On a CPU that OpenBLAS 0.3.21 does not know (this workplace's Emerald Rapids Xeon) it ran Prescott's
// kernels until the backend fitted them; on one it knows there is nothing to fit and this holds too.
TEST(BlasCore, TheCpuBackendRunsASetWithAvx2WhereTheCpuHasIt) {
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "no AVX2 here";
  const char* env = std::getenv("OPENBLAS_CORETYPE");
  if (env != nullptr && blas_core_lacks_avx2(env)) GTEST_SKIP() << "OPENBLAS_CORETYPE=" << env << " asks for it";
  const auto backend = make_cpu_backend(1);
  const std::string core = blas_core();
  EXPECT_FALSE(blas_core_lacks_avx2(core)) << "OpenBLAS runs " << core;
  const auto second = make_cpu_backend(1);  // once a process: a second backend changes nothing
  EXPECT_EQ(blas_core(), core);
}

TEST(BlasCore, OnlyTheAvx512SetsHaveSmallGemms) {
  for (const char* core : {"SkylakeX", "Cooperlake", "SapphireRapids"}) {
    EXPECT_TRUE(blas_core_has_small_gemm(core)) << core;
  }
  for (const char* core : {"Haswell", "Zen", "Prescott", "skylakex"}) {
    EXPECT_FALSE(blas_core_has_small_gemm(core)) << core;
  }
}

// The small-matrix kernel's limits for a transposed A: m t <= 1,200 cells, m t k <= 100^3, k >= 32.
TEST(BlasCore, SmallGemmRowsKeepToTheKernelsLimits) {
  EXPECT_EQ(blas_small_gemm_rows(16, 576), 75);    // the cells bound: 75 x 16 = 1,200
  EXPECT_EQ(blas_small_gemm_rows(16, 1536), 40);   // the products bound: 40 x 16 x 1,536 < 100^3 < 41 x ...
  EXPECT_EQ(blas_small_gemm_rows(128, 576), 9);
  EXPECT_EQ(blas_small_gemm_rows(2000, 32), 0);    // not one row
  EXPECT_EQ(blas_small_gemm_rows(16, 31), 0);      // k below 32
  EXPECT_EQ(blas_small_gemm_rows(0, 576), 0);
  for (int64_t t : {2, 5, 16, 33, 64})
    for (int64_t k : {32, 100, 576, 4096}) {
      const int64_t m = blas_small_gemm_rows(t, k);
      EXPECT_LE(m * t, 1200) << t << " x " << k;
      EXPECT_LE(m * t * k, 1000000) << t << " x " << k;
      EXPECT_TRUE((m + 1) * t > 1200 || (m + 1) * t * k > 1000000)
          << t << " x " << k << ": " << m << " is not the most";
    }
}

}  // namespace
}  // namespace minivllm::cpu
