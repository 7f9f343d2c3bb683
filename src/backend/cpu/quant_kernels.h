// Dot products of one weight row, kept in the checkpoint's format, with one activation row: the
// inner loop of CpuBackend::linear on f16 / bf16 and ggml's block-quantised weights (cpu_linear.cc):
// q8_0 / q4_0 / q4_1 / q5_0 / q5_1 / iq4_nl and the K-quants q2_k .. q6_k, iq4_xs.
//
// Activations stay fp32 for 16-bit weights. For the block-quantised weights each activation row is
// first quantised to int16 per 32-element block (ActRow), so the inner loop is integer
// multiply-adds (vpmaddwd) with one float scale per block. int16, not llama.cpp's int8: the
// relative error of an activation is below 2^-15 of its block's largest magnitude, so greedy
// decoding follows the fp32 reference where 8-bit activations can flip near-ties (docs/DESIGN.md).
//
// The K-quants' sub-block scales are applied in fp32 per 16 or 32 elements, so the same int16
// activations serve them (no Q8_K activation quantisation as in llama.cpp).
//
// Implementations: a portable scalar one (quant_kernels.cc, built without AVX), AVX2+FMA+F16C
// (quant_kernels_avx2.cc) and AVX-512 F/BW/VL, still 256-bit vectors (quant_kernels_avx512.cc), the
// same with VNNI (quant_kernels_avx512_vnni.cc), each file built with its own flags, chosen at run
// time from cpuid: the widest the CPU has (MINIVLLM_CPU_ISA=scalar|avx2|avx512|avx512vnni forces
// one). Tests run every one the CPU has, through set_isa.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/dtype.h"

namespace minivllm::cpu {

// One activation row of k elements (k a multiple of 32), quantised per 32-element block b:
// x[32 b + i] ~= d[b] * q[32 b + i], and sum[b] = d[b] * (the block's codes summed), the term that
// Q4_1's offset m and Q4_0's bias -8 multiply. The per-block scales are arrays of their own, not
// fields beside the codes, so that the AVX2 kernels load eight blocks' scales with one instruction.
struct ActRow {
  const int16_t* q;
  const float* d;
  const float* sum;
};

// Storage for quantised activation rows, grown on demand and reused (one per backend).
class ActScratch {
 public:
  // Quantises `rows` rows of k fp32 values (row r at x + r * k).
  void quantize(const float* x, int64_t rows, int64_t k);
  ActRow row(int64_t r) const {
    const int64_t blocks = k_ / 32;
    return ActRow{q_.data() + r * k_, d_.data() + r * blocks, sum_.data() + r * blocks};
  }

 private:
  int64_t k_ = 0;
  std::vector<int16_t> q_;
  std::vector<float> d_, sum_;
};

// Activation rows quantised per 256-element super-block, for the super-block GEMMs (QuantKernels::gemm):
// x[256 b + i] ~= d[b] * q[256 b + i], and sum[j] = d[j / 8] * (the codes of 32-element block j
// summed), the term Q4_K's mins multiply. One scale a super-block, not ActRow's one per 32
// elements, so that a super-block's products sum in one integer register once the weights'
// sub-block scales are folded into their codes. Still int16: an activation errs by less than 2^-16
// of its super-block's largest magnitude.
struct SuperActs {
  const int16_t* q;  // rows x k
  const float* d;    // rows x k / 256
  const float* sum;  // rows x k / 32
  int64_t k;
};

// Storage for SuperActs, grown on demand and reused (one per backend).
class SuperActScratch {
 public:
  // Quantises `rows` rows of k fp32 values (row r at x + r * k; k a multiple of 256).
  void quantize(const float* x, int64_t rows, int64_t k);
  SuperActs acts() const { return SuperActs{q_.data(), d_.data(), sum_.data(), k_}; }

 private:
  int64_t k_ = 0;
  std::vector<int16_t> q_;
  std::vector<float> d_, sum_;
};

// `n` weight rows of a K-quant (row_bytes apart, k = x.k elements each) times `t` activation rows:
// out[r * ldo + j] = x[r] . w[j].
using GemmFn = void (*)(const uint8_t* w, size_t row_bytes, int64_t n, const SuperActs& x, int64_t t, float* out,
                        int64_t ldo);

// Narrowest first: each needs what the one before it needs. kAvx512Vnni is kAvx512's code built
// with VNNI as well (quant_kernels_avx512_vnni.cc).
enum class Isa { kScalar, kAvx2, kAvx512, kAvx512Vnni };
inline constexpr Isa kIsas[] = {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Vnni};
const char* isa_name(Isa isa);

// Weight rows per call of the quantised dot products.
constexpr int kDotRows = 4;

// `rows` (1..kDotRows) consecutive weight rows of `blocks` 32-element blocks, row_bytes apart, each
// . one activation row, into out[0..rows).
using DotFn = void (*)(const uint8_t* w, size_t row_bytes, int rows, const ActRow& x, int64_t blocks, float* out);

struct QuantKernels {
  // `rows` (1..kDotRows) consecutive weight rows of `blocks` blocks, row_bytes apart, each . one
  // activation row, into out[0..rows).
  void (*dot_q8_0)(const uint8_t* w, size_t row_bytes, int rows, const ActRow& x, int64_t blocks, float* out);
  void (*dot_q4_0)(const uint8_t* w, size_t row_bytes, int rows, const ActRow& x, int64_t blocks, float* out);
  void (*dot_q4_1)(const uint8_t* w, size_t row_bytes, int rows, const ActRow& x, int64_t blocks, float* out);
  // The formats of common/quant_blocks.h's decode_block, in DType order: q5_0, q5_1, iq4_nl, q2_k,
  // q3_k, q4_k, q5_k, q6_k, iq4_xs, mxfp4 (blocks counts 32-element blocks here too). Reached through dot().
  DotFn dot_codes[10];
  // One 16-bit weight row of k elements . an fp32 activation row.
  float (*dot_bf16)(const uint8_t* w, const float* x, int64_t k);
  float (*dot_f16)(const uint8_t* w, const float* x, int64_t k);
  // Decodes n elements (whole blocks) stored as dtype into fp32: the prefill panels.
  void (*dequant)(DType dtype, const uint8_t* w, float* out, int64_t n);
  // Batches of a few rows on Q4_K / Q5_K / Q6_K / IQ4_XS weights without decoding them to fp32
  // panels; nullptr where this ISA has none (the panels serve).
  GemmFn gemm_q4_k = nullptr;
  GemmFn gemm_q5_k = nullptr;
  GemmFn gemm_q6_k = nullptr;
  GemmFn gemm_iq4_xs = nullptr;

  // The dot product of a block-quantised dtype (checked).
  DotFn dot(DType dtype) const;
  // The GEMM of a dtype, or nullptr.
  GemmFn gemm(DType dtype) const {
    switch (dtype) {
      case DType::kQ4_K: return gemm_q4_k;
      case DType::kQ5_K: return gemm_q5_k;
      case DType::kQ6_K: return gemm_q6_k;
      case DType::kIQ4_XS: return gemm_iq4_xs;
      default: return nullptr;
    }
  }
  // Sets dot_codes' entry for a dtype of decode_block (checked): the ISA tables' one index rule.
  void set_codes(DType dtype, DotFn f);
};

// True for the block-quantised dtypes that have dot products here.
bool has_quant_dot(DType dtype);

// The implementation for `isa` (which the CPU must support: check isa_supported).
const QuantKernels& quant_kernels(Isa isa);
bool isa_supported(Isa isa);
// The widest kIsas entry the CPU supports, unless MINIVLLM_CPU_ISA=scalar|avx2|avx512|avx512vnni
// (benchmarks) or set_isa (tests) chose one.
Isa active_isa();
// Test hook: forces `isa` (must be supported) for every later linear; returns the previous choice.
Isa set_isa(Isa isa);

// Quantises k fp32 values (k a multiple of 32): k codes into q, k / 32 values into d and sum.
void quantize_activations(const float* x, int64_t k, int16_t* q, float* d, float* sum);

}  // namespace minivllm::cpu
