// fit_blas_core: see blas_core.h.
#include "backend/cpu/blas_core.h"

#include <cblas.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <mutex>

#include "backend/cpu/quant_kernels.h"

namespace minivllm::cpu {

const char* blas_core_for(bool avx512, bool avx2) {
  if (avx512) return "SkylakeX";
  if (avx2) return "Haswell";
  return nullptr;
}

bool blas_core_lacks_avx2(std::string_view core) {
  // OpenBLAS's x86-64 names for sets older than Haswell (SSE to AVX without FMA), and its "Unknown".
  static constexpr std::array<std::string_view, 14> kOlder = {
      "Unknown", "Katmai", "Coppermine", "Northwood", "Prescott", "Banias", "Atom", "Core2",
      "Penryn", "Dunnington", "Nehalem", "Athlon", "Barcelona", "Sandybridge"};
  for (std::string_view older : kOlder) {
    if (core == older) return true;
  }
  return core.rfind("Opteron", 0) == 0;  // Opteron, Opteron_SSE3
}

namespace {

// The quantised kernels' AVX-512 (F, BW, VL), plus the CD and DQ that OpenBLAS's SkylakeX build may use.
bool cpu_has_avx512() {
  return isa_supported(Isa::kAvx512) && __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq");
}

void fit_once() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;  // the user's choice
  if (!blas_core_lacks_avx2(openblas_get_corename())) return;
  const char* core = blas_core_for(cpu_has_avx512(), isa_supported(Isa::kAvx2));
  if (core == nullptr) return;
  // gotoblas_dynamic_quit / _init are DYNAMIC_ARCH's own entry points (exported, not in cblas.h): the
  // first forgets the chosen set, the second chooses again, reading OPENBLAS_CORETYPE. A build without
  // them (one set compiled in) has nothing to choose.
  auto* quit = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit"));
  auto* init = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init"));
  if (quit == nullptr || init == nullptr) return;
  setenv("OPENBLAS_CORETYPE", core, /*overwrite=*/0);
  quit();
  init();
}

}  // namespace

void fit_blas_core() {
  static std::once_flag once;
  std::call_once(once, fit_once);
}

std::string blas_core() { return openblas_get_corename(); }

bool blas_core_has_small_gemm(std::string_view core) {
  return core == "SkylakeX" || core == "Cooperlake" || core == "SapphireRapids";
}

int64_t blas_small_gemm_rows(int64_t t, int64_t k) {
  constexpr int64_t kMaxCells = 1200, kMaxMacs = 100 * 100 * 100, kMinK = 32;
  if (t <= 0 || k < kMinK) return 0;
  return std::min(kMaxCells / t, kMaxMacs / (t * k));
}

}  // namespace minivllm::cpu
