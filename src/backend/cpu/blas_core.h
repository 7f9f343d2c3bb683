// Which of OpenBLAS's kernel sets runs the CPU backend's sgemm / sgemv (prefill, batches past
// kMaxDotRows tokens, fp32 weights). Debian's OpenBLAS is built with DYNAMIC_ARCH: at load it picks a
// kernel set from the CPU's family and model, and a CPU newer than the library gets its fallback,
// Prescott's SSE3 set, as Debian 12's 0.3.21 does on an Emerald Rapids Xeon (its cost measured in
// docs/PERFORMANCE.md, "Stop 110"). OPENBLAS_CORETYPE names a set, but it
// is read only when the library loads, before main; so where it is unset and the library chose a set
// older than the CPU's vector units, fit_blas_core sets it and asks OpenBLAS to choose again.
#pragma once

#include <string>
#include <string_view>

namespace minivllm::cpu {

// The set a CPU with these units calls for (an OPENBLAS_CORETYPE name): "SkylakeX" with AVX-512
// (F, CD, BW, DQ and VL), "Haswell" with AVX2 (isa_supported's: FMA and F16C with it); nullptr below
// that (OpenBLAS's own choice).
const char* blas_core_for(bool avx512, bool avx2);

// Whether `core`, a name openblas_get_corename() returns, is a set without AVX2 and FMA: one that a
// CPU with those units should not run.
bool blas_core_lacks_avx2(std::string_view core);

// Once a process (CpuBackend's constructor calls it): where OPENBLAS_CORETYPE is unset and OpenBLAS
// runs a set without AVX2 on a CPU that has it, sets OPENBLAS_CORETYPE to blas_core_for's set and
// has OpenBLAS choose again. The first backend is made before the engine's first BLAS call; while
// OpenBLAS chooses, a BLAS call from another thread would find no set.
void fit_blas_core();

// The set OpenBLAS runs now (openblas_get_corename).
std::string blas_core();

}  // namespace minivllm::cpu
