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

}  // namespace
}  // namespace minivllm::cpu
