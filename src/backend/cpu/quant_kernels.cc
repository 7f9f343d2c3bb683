// The portable side of quant_kernels.h: run-time ISA choice, the activation quantiser and the scalar
// dot products. This file is compiled without AVX (CMakeLists.txt), so its code runs on any x86-64
// and is the reference the vector kernels are tested against.
#include "backend/cpu/quant_kernels.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/check.h"
#include "common/quant_blocks.h"
#include "common/tuning.h"

namespace minivllm::cpu {

const QuantKernels& quant_kernels_avx2();    // quant_kernels_avx2.cc
const QuantKernels& quant_kernels_avx512();       // quant_kernels_avx512.cc
const QuantKernels& quant_kernels_avx512_vnni();  // quant_kernels_avx512_vnni.cc

namespace {

float load_f16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return f16_to_f32(v);
}

int32_t dot_i16(const int16_t* w, const int16_t* x) {
  int32_t s = 0;
  for (int i = 0; i < 32; ++i) s += static_cast<int32_t>(w[i]) * x[i];
  return s;
}

float dot_q8_0(const uint8_t* w, const ActRow& x, int64_t blocks) {
  float acc = 0;
  for (int64_t b = 0; b < blocks; ++b, w += 34) {
    int16_t q[32];
    for (int i = 0; i < 32; ++i) q[i] = static_cast<int8_t>(w[2 + i]);
    acc += load_f16(w) * x.d[b] * static_cast<float>(dot_i16(q, x.q + 32 * b));
  }
  return acc;
}

void unpack_nibbles(const uint8_t* qs, int16_t* q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = static_cast<int16_t>(qs[j] & 15);
    q[j + 16] = static_cast<int16_t>(qs[j] >> 4);
  }
}

float dot_q4_0(const uint8_t* w, const ActRow& x, int64_t blocks) {
  float acc = 0;
  for (int64_t b = 0; b < blocks; ++b, w += 18) {
    int16_t q[32];
    unpack_nibbles(w + 2, q);
    const float d = load_f16(w);
    // sum ((q - 8) d) (dx qx) = d dx sum(q qx) - 8 d sum
    acc += d * x.d[b] * static_cast<float>(dot_i16(q, x.q + 32 * b)) - 8.0f * d * x.sum[b];
  }
  return acc;
}

float dot_q4_1(const uint8_t* w, const ActRow& x, int64_t blocks) {
  float acc = 0;
  for (int64_t b = 0; b < blocks; ++b, w += 20) {
    int16_t q[32];
    unpack_nibbles(w + 4, q);
    acc += load_f16(w) * x.d[b] * static_cast<float>(dot_i16(q, x.q + 32 * b)) + load_f16(w + 2) * x.sum[b];
  }
  return acc;
}

// The decode_block formats: each block decoded to its integer codes, then per sub-block
// d dx sum(q qx) + c dx sum(qx), which covers Q2_K's mins per 16 elements as well.
template <DType T>
float dot_codes(const uint8_t* w, const ActRow& x, int64_t blocks) {
  const int64_t n = dtype_block(T);
  const size_t bytes = dtype_size(T);
  BlockCodes c;
  float acc = 0;
  for (int64_t u = 0; u < blocks * 32 / n; ++u, w += bytes) {
    decode_block(T, w, &c);
    for (int s = 0; s < c.n / c.sub; ++s) {
      const int64_t e = u * n + s * c.sub;  // first element of the sub-block in the row
      const int16_t* xq = x.q + e;
      int32_t qx = 0, xs = 0;
      for (int i = 0; i < c.sub; ++i) {
        qx += static_cast<int32_t>(c.q[s * c.sub + i]) * xq[i];
        xs += xq[i];
      }
      acc += x.d[e / 32] * (c.d[s] * static_cast<float>(qx) + c.c[s] * static_cast<float>(xs));
    }
  }
  return acc;
}

float dot_bf16(const uint8_t* w, const float* x, int64_t k) {
  float acc = 0;
  for (int64_t i = 0; i < k; ++i) {
    uint16_t v;
    std::memcpy(&v, w + 2 * i, 2);
    acc += bf16_to_f32(v) * x[i];
  }
  return acc;
}

float dot_f16(const uint8_t* w, const float* x, int64_t k) {
  float acc = 0;
  for (int64_t i = 0; i < k; ++i) acc += load_f16(w + 2 * i) * x[i];
  return acc;
}

void dequant(DType dtype, const uint8_t* w, float* out, int64_t n) { dequantize_to_f32(dtype, w, out, n); }

template <float (*Dot)(const uint8_t*, const ActRow&, int64_t)>
void dot_rows(const uint8_t* w, size_t row_bytes, int rows, const ActRow& x, int64_t blocks, float* out) {
  for (int r = 0; r < rows; ++r) out[r] = Dot(w + r * row_bytes, x, blocks);
}

const QuantKernels kScalar{dot_rows<dot_q8_0>,
                           dot_rows<dot_q4_0>,
                           dot_rows<dot_q4_1>,
                           {dot_rows<dot_codes<DType::kQ5_0>>, dot_rows<dot_codes<DType::kQ5_1>>,
                            dot_rows<dot_codes<DType::kIQ4_NL>>, dot_rows<dot_codes<DType::kQ2_K>>,
                            dot_rows<dot_codes<DType::kQ3_K>>, dot_rows<dot_codes<DType::kQ4_K>>,
                            dot_rows<dot_codes<DType::kQ5_K>>, dot_rows<dot_codes<DType::kQ6_K>>,
                            dot_rows<dot_codes<DType::kIQ4_XS>>, dot_rows<dot_codes<DType::kMXFP4>>},
                           dot_bf16,
                           dot_f16,
                           dequant};

Isa parse_isa(const std::string& v) {
  std::string names;
  for (Isa isa : kIsas) {
    if (v == isa_name(isa)) return isa;
    names += (names.empty() ? "" : ", ") + std::string(isa_name(isa));
  }
  MINIVLLM_FAIL() << "MINIVLLM_CPU_ISA=" << v << ": expected one of " << names;
  return Isa::kScalar;  // not reached: MINIVLLM_FAIL throws
}

Isa detect() {
  if (const std::optional<std::string> env = knob_word("MINIVLLM_CPU_ISA")) {
    const std::string& v = *env;
    const Isa isa = parse_isa(v);
    MINIVLLM_CHECK(isa_supported(isa)) << "MINIVLLM_CPU_ISA=" << v << ": this CPU lacks it";
    return isa;
  }
  // The widest the CPU has. The AVX-512 tables take, format by format, the faster of their 256-bit
  // build (mask registers, 32 vector registers) and AVX2's (docs/PERFORMANCE.md, "CPU: 256-bit
  // AVX-512 kernels", and "VNNI" in stop 104).
  Isa best = Isa::kScalar;
  for (Isa isa : kIsas) best = isa_supported(isa) ? isa : best;
  return best;
}

std::atomic<int>& chosen() {
  static std::atomic<int> isa{static_cast<int>(detect())};
  return isa;
}

// dot_codes' index of a dtype of decode_block (in DType order from q5_0).
int codes_index(DType dtype) {
  MINIVLLM_CHECK(has_block_codes(dtype)) << "no quantised dot product for " << dtype_name(dtype);
  return static_cast<int>(dtype) - static_cast<int>(DType::kQ5_0);
}

}  // namespace

bool has_quant_dot(DType dtype) {
  return dtype == DType::kQ8_0 || dtype == DType::kQ4_0 || dtype == DType::kQ4_1 || has_block_codes(dtype);
}

DotFn QuantKernels::dot(DType dtype) const {
  switch (dtype) {
    case DType::kQ8_0: return dot_q8_0;
    case DType::kQ4_0: return dot_q4_0;
    case DType::kQ4_1: return dot_q4_1;
    default: break;
  }
  return dot_codes[codes_index(dtype)];
}

void QuantKernels::set_codes(DType dtype, DotFn f) { dot_codes[codes_index(dtype)] = f; }

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAvx512Vnni: return "avx512vnni";
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx2: return "avx2";
    default: return "scalar";
  }
}

bool isa_supported(Isa isa) {
  if (isa == Isa::kScalar) return true;
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  if (isa == Isa::kAvx2) return avx2;
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl");
  if (isa == Isa::kAvx512) return avx512;
  return avx512 && __builtin_cpu_supports("avx512vnni");
}

const QuantKernels& quant_kernels(Isa isa) {
  switch (isa) {
    case Isa::kAvx512Vnni: return quant_kernels_avx512_vnni();
    case Isa::kAvx512: return quant_kernels_avx512();
    case Isa::kAvx2: return quant_kernels_avx2();
    default: return kScalar;
  }
}

Isa active_isa() { return static_cast<Isa>(chosen().load(std::memory_order_relaxed)); }

Isa set_isa(Isa isa) {
  MINIVLLM_CHECK(isa_supported(isa)) << "set_isa: this CPU lacks " << isa_name(isa);
  return static_cast<Isa>(chosen().exchange(static_cast<int>(isa)));
}

namespace {

// x times 32767 / amax, rounded, as an int16 code: clamped so that a rounding up of inv cannot wrap.
int16_t activation_code(float x, float inv) {
  return static_cast<int16_t>(std::min(32767.0f, std::max(-32767.0f, std::nearbyint(x * inv))));
}

}  // namespace

void quantize_activations(const float* x, int64_t k, int16_t* q, float* d, float* sum) {
  for (int64_t b = 0; b < k / 32; ++b, x += 32, q += 32) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    d[b] = amax / 32767.0f;
    const float inv = amax > 0 ? 32767.0f / amax : 0.0f;
    int32_t codes = 0;
    for (int i = 0; i < 32; ++i) {
      q[i] = activation_code(x[i], inv);
      codes += q[i];
    }
    sum[b] = d[b] * static_cast<float>(codes);
  }
}

void ActScratch::quantize(const float* x, int64_t rows, int64_t k) {
  MINIVLLM_CHECK(k % 32 == 0 && rows >= 0) << "quantize: " << rows << " rows of " << k << " (k must be whole blocks)";
  k_ = k;
  const auto codes = static_cast<size_t>(rows * k), blocks = codes / 32;
  if (q_.size() < codes) q_.resize(codes);
  if (d_.size() < blocks) {
    d_.resize(blocks);
    sum_.resize(blocks);
  }
  for (int64_t r = 0; r < rows; ++r) {
    quantize_activations(x + r * k, k, q_.data() + r * k, d_.data() + r * (k / 32), sum_.data() + r * (k / 32));
  }
}

void SuperActScratch::quantize(const float* x, int64_t rows, int64_t k) {
  MINIVLLM_CHECK(k % 256 == 0 && rows >= 0) << "quantize: " << rows << " rows of " << k << " (k must be super-blocks)";
  k_ = k;
  const auto codes = static_cast<size_t>(rows * k);
  if (q_.size() < codes) q_.resize(codes);
  if (d_.size() < codes / 256) d_.resize(codes / 256);
  if (sum_.size() < codes / 32) sum_.resize(codes / 32);
  for (size_t b = 0; b < codes / 256; ++b) {
    const float* xb = x + 256 * b;
    int16_t* q = q_.data() + 256 * b;
    float amax = 0;
    for (int i = 0; i < 256; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const float d = amax / 32767.0f, inv = amax > 0 ? 32767.0f / amax : 0.0f;
    d_[b] = d;
    for (int j = 0; j < 8; ++j) {
      int32_t codes_sum = 0;
      for (int i = 32 * j; i < 32 * j + 32; ++i) {
        q[i] = activation_code(xb[i], inv);
        codes_sum += q[i];
      }
      sum_[8 * b + j] = d * static_cast<float>(codes_sum);
    }
  }
}

}  // namespace minivllm::cpu
