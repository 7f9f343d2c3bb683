// Linear and embedding on weights kept in their stored format (f16, bf16, q8_0, q4_0, q4_1) against
// dequantise-then-fp64: every format, every ISA path this CPU can run (forced with cpu::set_isa,
// so the scalar path is tested on an AVX2 machine too), odd shapes, the dot-product path (few rows)
// and the decoded-panel sgemm path (many rows), one and two threads, with and without bias.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/quant_kernels.h"
#include "common/quant_blocks.h"
#include "cpu_test_util.h"

namespace minivllm {
namespace {

using cpu_test::download;
using cpu_test::expect_close;
using cpu_test::random_floats;
using cpu_test::upload;

// A host weight [n, k] in `dtype` made from random values, and its exact fp32 decoding.
struct StoredWeight {
  Tensor host;
  std::vector<float> decoded;
};

StoredWeight make_weight(DType dtype, int64_t n, int64_t k, uint32_t seed) {
  std::vector<float> v = random_floats(static_cast<size_t>(n * k), seed, -0.7f, 0.9f);  // q4_1 needs an offset
  StoredWeight w{host_tensor(dtype, {n, k}), std::vector<float>(v.size())};
  if (dtype_is_quantized(dtype)) {
    quantize_from_f32(dtype, v.data(), w.host.data(), n * k);
  } else {
    convert_from_f32(v.data(), dtype, w.host.data(), v.size());
  }
  dequantize_to_f32(dtype, w.host.data(), w.decoded.data(), n * k);
  return w;
}

std::vector<double> reference(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& bias,
                              int64_t t, int64_t n, int64_t k) {
  std::vector<double> out(static_cast<size_t>(t * n));
  for (int64_t r = 0; r < t; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = bias.empty() ? 0.0 : bias[static_cast<size_t>(j)];
      for (int64_t i = 0; i < k; ++i) {
        acc += static_cast<double>(x[static_cast<size_t>(r * k + i)]) * w[static_cast<size_t>(j * k + i)];
      }
      out[static_cast<size_t>(r * n + j)] = acc;
    }
  }
  return out;
}

struct Shape {
  int64_t t, n, k;
};

void check_linear(DType dtype, cpu::Isa isa, int threads, const Shape& s, bool with_bias) {
  SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + cpu::isa_name(isa) + " threads " + std::to_string(threads) +
               " t " + std::to_string(s.t) + " n " + std::to_string(s.n) + " k " + std::to_string(s.k) +
               (with_bias ? " bias" : ""));
  cpu_test::IsaGuard guard(isa);
  CpuBackend b(threads);
  ASSERT_TRUE(b.keeps_weight_dtype(dtype));
  const StoredWeight w = make_weight(dtype, s.n, s.k, static_cast<uint32_t>(s.n * 31 + s.k));
  const Tensor weight = b.upload_stored_weight(w.host);
  ASSERT_EQ(weight.dtype(), dtype);
  const std::vector<float> x = random_floats(static_cast<size_t>(s.t * s.k), 7 + static_cast<uint32_t>(s.t), -2, 2);
  const std::vector<float> bias = with_bias ? random_floats(static_cast<size_t>(s.n), 3) : std::vector<float>{};
  const Tensor xt = upload(b, x, {s.t, s.k});
  const Tensor bt = with_bias ? upload(b, bias, {s.n}) : Tensor();
  const Tensor out = cpu_test::poisoned(b, {s.t, s.n});
  b.linear(xt, weight, with_bias ? &bt : nullptr, out);
  // int16 activations (quantised weights, few rows) err by < 2^-15 of a block's largest |x|;
  // everything else is fp32 arithmetic on exactly decoded weights.
  const bool quantised_x = dtype_is_quantized(dtype) && s.t <= 4;
  expect_close(download(b, out), reference(x, w.decoded, bias, s.t, s.n, s.k), "linear",
               quantised_x ? 2e-4 : 2e-5, quantised_x ? 2e-4 : 2e-5);
}

class StoredLinear : public ::testing::TestWithParam<DType> {};

TEST_P(StoredLinear, MatchesDequantizedReference) {
  const DType dtype = GetParam();
  const bool q = dtype_is_quantized(dtype);
  // k: whole blocks for the quantised types; odd for 16-bit ones (vector tails). t: the dot path
  // (1, 3) and the panel path (5, 37, 6). n: odd, below and above a thread slice; with k = 4096
  // a thread's slice spans several 4 MiB panels.
  const std::vector<Shape> shapes = q ? std::vector<Shape>{{1, 1, 32}, {1, 33, 96}, {3, 17, 160}, {5, 19, 64},
                                                           {37, 70, 224}, {1, 300, 544}, {2, 257, 1056},
                                                           {6, 601, 4096}}
                                      : std::vector<Shape>{{1, 1, 7}, {1, 33, 37}, {3, 17, 100}, {5, 19, 9},
                                                           {37, 70, 129}, {1, 300, 575}, {2, 257, 1025},
                                                           {6, 601, 4095}};
  for (cpu::Isa isa : cpu_test::runnable_isas()) {
    for (int threads : {1, 2}) {
      for (const Shape& s : shapes) {
        check_linear(dtype, isa, threads, s, /*with_bias=*/s.n % 2 == 1);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, StoredLinear,
                         ::testing::Values(DType::kQ4_1, DType::kQ4_0, DType::kQ8_0, DType::kBF16, DType::kF16),
                         [](const ::testing::TestParamInfo<DType>& i) { return std::string(dtype_name(i.param)); });

// The kernels of each ISA directly: the same dot products as the scalar reference to rounding, and
// the panel decoding bit for bit (it is exact in fp32 on both paths).
TEST(QuantKernels, EveryIsaAgreesWithScalar) {
  const std::vector<cpu::Isa> isas = cpu_test::runnable_isas();
  if (isas.size() == 1) GTEST_SKIP() << "no AVX2 on this CPU: only the scalar path runs";
  if (!cpu::isa_supported(cpu::Isa::kAvx512)) std::cout << "[ note ] no AVX-512 on this CPU: its kernels are not run\n";
  const cpu::QuantKernels& ref = cpu::quant_kernels(cpu::Isa::kScalar);
  for (size_t i = 1; i < isas.size(); ++i) {
    SCOPED_TRACE(cpu::isa_name(isas[i]));
    const cpu::QuantKernels& vec = cpu::quant_kernels(isas[i]);
    ASSERT_NE(ref.dot_q4_1, vec.dot_q4_1) << "the test hook must reach two implementations";
    // 11 blocks: one group of eight in the AVX2 kernels and three on their own; 27: three groups and
    // three; 5: no whole group.
    for (const int64_t k : {352, 864, 160})
    for (DType dtype : {DType::kQ4_1, DType::kQ4_0, DType::kQ8_0, DType::kBF16, DType::kF16}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)).append(" k=").append(std::to_string(k)));
      const std::vector<float> x = random_floats(static_cast<size_t>(k), 11, -3, 3);
      cpu::ActScratch scratch;
      scratch.quantize(x.data(), 1, k);
      const cpu::ActRow act = scratch.row(0);
      const StoredWeight w = make_weight(dtype, 1, k, 5);
      const auto* p = static_cast<const uint8_t*>(w.host.data());
      if (dtype_is_quantized(dtype)) {
        // 1..kDotRows rows per call, each row as the scalar single-row dot product. The rows sit in a
        // buffer whose bytes after the last block are all 0xff (f16 NaN): a kernel that read the
        // scales of a padding block, or used them, would show it.
        const size_t row_bytes = dtype_nbytes(dtype, k);
        const StoredWeight w4 = make_weight(dtype, cpu::kDotRows, k, 6);
        for (int rows = 1; rows <= cpu::kDotRows; ++rows) {
          std::vector<uint8_t> buf(row_bytes * static_cast<size_t>(rows) + 1024, 0xff);
          std::memcpy(buf.data(), w4.host.data(), row_bytes * static_cast<size_t>(rows));
          const auto pick = [&](const cpu::QuantKernels& kern) {
            return dtype == DType::kQ4_1 ? kern.dot_q4_1 : dtype == DType::kQ4_0 ? kern.dot_q4_0 : kern.dot_q8_0;
          };
          float got[cpu::kDotRows], want[cpu::kDotRows];
          pick(vec)(buf.data(), row_bytes, rows, act, k / 32, got);
          pick(ref)(buf.data(), row_bytes, rows, act, k / 32, want);
          for (int r = 0; r < rows; ++r) {
            float one;
            pick(ref)(buf.data() + r * row_bytes, row_bytes, 1, act, k / 32, &one);
            EXPECT_EQ(want[r], one) << "row " << r << " of " << rows;
            EXPECT_NEAR(got[r], want[r], 1e-4 * (1 + std::abs(want[r]))) << "row " << r << " of " << rows;
          }
        }
      } else {
        const float a = dtype == DType::kBF16 ? ref.dot_bf16(p, x.data(), k) : ref.dot_f16(p, x.data(), k);
        const float v = dtype == DType::kBF16 ? vec.dot_bf16(p, x.data(), k) : vec.dot_f16(p, x.data(), k);
        EXPECT_NEAR(a, v, 1e-4 * (1 + std::abs(a)));
      }
      std::vector<float> d_ref(static_cast<size_t>(k)), d_vec(static_cast<size_t>(k));
      ref.dequant(dtype, p, d_ref.data(), k);
      vec.dequant(dtype, p, d_vec.data(), k);
      EXPECT_EQ(0, std::memcmp(d_ref.data(), d_vec.data(), d_ref.size() * sizeof(float)));
      EXPECT_EQ(0, std::memcmp(d_ref.data(), w.decoded.data(), d_ref.size() * sizeof(float)));
    }
  }
}

// The activation quantiser: within half a step of x, and sum is d times the sum of the codes.
TEST(QuantKernels, ActivationQuantisationErrorIsHalfAStep) {
  std::vector<float> x = random_floats(96, 2, -5, 5);
  x[40] = 0;
  for (int i = 64; i < 96; ++i) x[static_cast<size_t>(i)] = 0;  // an all-zero block: d = 0, no NaN
  std::vector<int16_t> q(96);
  float d[3], s[3];
  cpu::quantize_activations(x.data(), 96, q.data(), d, s);
  for (int b = 0; b < 3; ++b) {
    int64_t sum = 0;
    for (int i = 0; i < 32; ++i) {
      const auto e = static_cast<size_t>(b * 32 + i);
      EXPECT_NEAR(d[b] * q[e], x[e], 0.5001 * d[b] + 1e-7);
      sum += q[e];
    }
    EXPECT_FLOAT_EQ(s[b], d[b] * static_cast<float>(sum));
  }
  EXPECT_EQ(d[2], 0.0f);
}

// Embedding rows of a stored table are its exact decoding; other ranks' ids give zero rows.
TEST(StoredEmbedding, RowsAreTheDecodedTable) {
  CpuBackend b(2);
  for (DType dtype : {DType::kQ4_1, DType::kQ4_0, DType::kQ8_0, DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const int64_t vocab = 13, hidden = 96;
    const StoredWeight w = make_weight(dtype, vocab, hidden, 9);
    const Tensor table = b.upload_stored_weight(w.host);
    const std::vector<int32_t> ids{12, 0, 5, 20, 2};
    const Tensor out = cpu_test::poisoned(b, {5, hidden});
    b.embedding(cpu_test::upload_i32(b, ids, {5}), table, 2, out);  // vocab_start 2: ids 2..14 are local
    const std::vector<float> got = download(b, out);
    for (size_t r = 0; r < ids.size(); ++r) {
      const int64_t local = ids[r] - 2;
      for (int64_t i = 0; i < hidden; ++i) {
        const float want = local >= 0 && local < vocab ? w.decoded[static_cast<size_t>(local * hidden + i)] : 0.0f;
        ASSERT_EQ(got[r * hidden + static_cast<size_t>(i)], want) << "row " << r << " element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace minivllm
