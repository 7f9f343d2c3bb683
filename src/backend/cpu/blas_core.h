// Which of OpenBLAS's kernel sets runs the CPU backend's sgemm / sgemv (prefill, batches past
// kMaxDotRows tokens, fp32 weights). Debian's OpenBLAS is built with DYNAMIC_ARCH: at load it picks a
// kernel set from the CPU's family and model, and a CPU newer than the library gets its fallback,
// Prescott's SSE3 set, as Debian 12's 0.3.21 does on an Emerald Rapids Xeon (its cost measured in
// docs/PERFORMANCE.md, "Stop 110"). OPENBLAS_CORETYPE names a set, but it
// is read only when the library loads, before main; so where it is unset and the library chose a set
// older than the CPU's vector units, fit_blas_core sets it and asks OpenBLAS to choose again.
#pragma once

#include <cstdint>
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

// Whether `core` is one of the AVX-512 sets (SkylakeX, Cooperlake, SapphireRapids) that carry
// OpenBLAS's small-matrix sgemm kernels (SMALL_MATRIX_OPT, in Debian 12's 0.3.21). Those multiply the
// operands where they lie, without packing them, for a product within blas_small_gemm_rows' limits.
bool blas_core_has_small_gemm(std::string_view core);

// The most rows m of an m x k matrix that OpenBLAS's small-matrix kernel multiplies by the transpose of
// a t x k one, unpacked (sgemm_small_kernel_permit_skylakex.c's limits for a transposed A: m t <= 1,200,
// m t k <= 100^3, k >= 32); 0 where it takes none.
int64_t blas_small_gemm_rows(int64_t t, int64_t k);

}  // namespace minivllm::cpu
