// Linear and embedding on the block formats decoded by common/quant_blocks.h's decode_block (Q5_0,
// Q5_1, IQ4_NL; the K-quants Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS), kept in their stored format,
// against dequantise-then-fp64: every ISA this CPU can run (forced with cpu::set_isa), odd shapes,
// the dot path (few rows) and the decoded-panel path (many rows), one and two threads. Weights are
// random bytes (every bit pattern is a valid code) with sane f16 scales; the decoding itself is
// checked against gguf-py's on llama-quantize files by the GGUF golden test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/quant_kernels.h"
#include "common/quant_blocks.h"
#include "cpu_test_util.h"

namespace minivllm {
namespace {

using cpu_test::download;
using cpu_test::random_floats;
using cpu_test::upload;

const DType kFormats[] = {DType::kQ5_0, DType::kQ5_1, DType::kIQ4_NL, DType::kQ2_K,  DType::kQ3_K,
                          DType::kQ4_K, DType::kQ5_K, DType::kQ6_K,   DType::kIQ4_XS, DType::kMXFP4};

// n rows of k elements of random blocks, and their decoding.
struct StoredWeight {
  Tensor host;
  std::vector<float> decoded;
};

StoredWeight random_weight(DType t, int64_t n, int64_t k, uint32_t seed) {
  StoredWeight w{cpu_test::random_blocks(t, n, k, seed), std::vector<float>(static_cast<size_t>(n * k))};
  dequantize_to_f32(t, w.host.data(), w.decoded.data(), n * k);
  return w;
}

// out[r, j] = x[r] . w[j] in fp64, and the scale of each sum (sum |x_i w_i|) for the tolerance.
void reference(const std::vector<float>& x, const std::vector<float>& w, int64_t t, int64_t n, int64_t k,
               std::vector<double>* out, std::vector<double>* mag) {
  out->assign(static_cast<size_t>(t * n), 0);
  mag->assign(static_cast<size_t>(t * n), 0);
  for (int64_t r = 0; r < t; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0, m = 0;
      for (int64_t i = 0; i < k; ++i) {
        const double p = static_cast<double>(x[static_cast<size_t>(r * k + i)]) * w[static_cast<size_t>(j * k + i)];
        acc += p;
        m += std::abs(p);
      }
      (*out)[static_cast<size_t>(r * n + j)] = acc;
      (*mag)[static_cast<size_t>(r * n + j)] = m;
    }
  }
}

struct Shape {
  int64_t t, n, k;
};

void check_linear(DType dtype, cpu::Isa isa, int threads, const Shape& s) {
  SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + cpu::isa_name(isa) + " threads " + std::to_string(threads) +
               " t " + std::to_string(s.t) + " n " + std::to_string(s.n) + " k " + std::to_string(s.k));
  cpu_test::IsaGuard guard(isa);
  CpuBackend b(threads);
  ASSERT_TRUE(b.keeps_weight_dtype(dtype));
  const StoredWeight w = random_weight(dtype, s.n, s.k, static_cast<uint32_t>(s.n * 31 + s.k));
  const Tensor weight = b.upload_stored_weight(w.host);
  ASSERT_EQ(weight.dtype(), dtype);
  const std::vector<float> x = random_floats(static_cast<size_t>(s.t * s.k), 7 + static_cast<uint32_t>(s.t), -2, 2);
  const Tensor out = cpu_test::poisoned(b, {s.t, s.n});
  b.linear(upload(b, x, {s.t, s.k}), weight, nullptr, out);
  std::vector<double> want, mag;
  reference(x, w.decoded, s.t, s.n, s.k, &want, &mag);
  const std::vector<float> got = download(b, out);
  // int16 activations err by < 2^-16 of a block's largest |x|: well inside 1e-4 of sum |x w|.
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-4 * mag[i] + 1e-6) << "output " << i;
  }
}

class CodesLinear : public ::testing::TestWithParam<DType> {};

TEST_P(CodesLinear, MatchesDequantizedReference) {
  const DType dtype = GetParam();
  const int64_t blk = dtype_block(dtype);
  // k: 1, 3 and 9 blocks (K-quants: a group of eight 32-element blocks each). t: the dot path (1, 3)
  // and the panel path (6). n: odd, below and above a thread slice.
  const std::vector<Shape> shapes{{1, 1, blk}, {1, 33, 3 * blk}, {3, 17, 9 * blk}, {6, 19, 3 * blk},
                                  {1, 129, 9 * blk}};
  for (cpu::Isa isa : cpu_test::runnable_isas()) {
    for (int threads : {1, 2}) {
      for (const Shape& s : shapes) check_linear(dtype, isa, threads, s);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, CodesLinear, ::testing::ValuesIn(kFormats),
                         [](const ::testing::TestParamInfo<DType>& i) { return std::string(dtype_name(i.param)); });

// Batches of 2-64 rows on Q4_K / Q5_K / Q6_K / IQ4_XS take the AVX-512 tables' GEMM on the stored codes
// (quant_gemm_avx512.h): odd weight rows (its tiles of 4), activation rows that leave every tail
// of its tiles of 3, and 9 super-blocks (one past its k chunk of 8), one and two threads.
TEST(CodesGemm, MatchesDequantizedReferenceOnOddShapes) {
  int ran = 0;
  for (cpu::Isa isa : cpu_test::runnable_isas()) {
    for (DType dtype : {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kIQ4_XS}) {
      if (cpu::quant_kernels(isa).gemm(dtype) == nullptr) continue;  // the panels serve (CodesLinear)
      for (const Shape& s : std::vector<Shape>{{2, 5, 512}, {5, 7, 256}, {7, 37, 2304}, {16, 9, 768}, {64, 6, 512}}) {
        for (int threads : {1, 2}) check_linear(dtype, isa, threads, s);
      }
      ++ran;
    }
  }
  if (ran == 0) GTEST_SKIP() << "no AVX-512 on this CPU: no K-quant GEMM to test";
}

// The GEMM's int32 lane sums at their bound: Q6_K codes of -32 times scales of -128 (4,096 each)
// against activation codes of -32,767, 16 products a lane; and Q4_K's largest, 15 x 63 with mins.
// A sum that wrapped would be off by 2^32 times the scales.
TEST(CodesGemm, LaneSumsAtTheirBoundDoNotWrap) {
  const int64_t t = 5, n = 3, k = 512;
  for (cpu::Isa isa : cpu_test::runnable_isas()) {
    for (DType dtype : {DType::kQ4_K, DType::kQ6_K}) {
      if (cpu::quant_kernels(isa).gemm(dtype) == nullptr) continue;
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + cpu::isa_name(isa));
      std::vector<uint8_t> bytes(dtype_nbytes(dtype, n * k), 0);
      const uint16_t d = f32_to_f16(1.0f / 4096);
      for (size_t b = 0; b < bytes.size() / dtype_size(dtype); ++b) {
        uint8_t* blk = bytes.data() + b * dtype_size(dtype);
        if (dtype == DType::kQ6_K) {  // ql = qh = 0: every code -32; scales -128
          std::memset(blk + 192, 0x80, 16);
          std::memcpy(blk + 208, &d, 2);
        } else {  // every nibble 15, every 6-bit scale and min 63
          std::memcpy(blk, &d, 2);
          std::memcpy(blk + 2, &d, 2);
          std::memset(blk + 4, 0xff, 12);
          std::memset(blk + 16, 0xff, 128);
        }
      }
      std::vector<float> decoded(static_cast<size_t>(n * k));
      dequantize_to_f32(dtype, bytes.data(), decoded.data(), n * k);
      cpu_test::IsaGuard guard(isa);
      CpuBackend b(1);
      Tensor host = host_tensor(dtype, {n, k});
      std::memcpy(host.data(), bytes.data(), bytes.size());
      const Tensor weight = b.upload_stored_weight(host);
      const std::vector<float> x(static_cast<size_t>(t * k), -3.0f);  // every code -32,767
      const Tensor out = cpu_test::poisoned(b, {t, n});
      b.linear(upload(b, x, {t, k}), weight, nullptr, out);
      std::vector<double> want, mag;
      reference(x, decoded, t, n, k, &want, &mag);
      const std::vector<float> got = download(b, out);
      for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5 * mag[i]) << "output " << i;
    }
  }
}

// Each ISA's kernels against the scalar ones directly: 1..kDotRows rows per call, each as the scalar
// single-row result to rounding, with 0xff bytes (f16 NaN) after the last block; the panel
// decoding bit for bit.
TEST(CodesKernels, EveryIsaAgreesWithScalar) {
  const std::vector<cpu::Isa> isas = cpu_test::runnable_isas();
  if (isas.size() == 1) GTEST_SKIP() << "no AVX2 on this CPU: only the scalar path runs";
  const cpu::QuantKernels& ref = cpu::quant_kernels(cpu::Isa::kScalar);
  for (size_t i = 1; i < isas.size(); ++i) {
    const cpu::QuantKernels& vec = cpu::quant_kernels(isas[i]);
    for (DType dtype : kFormats) {
      const int64_t k = 3 * dtype_block(dtype) + (dtype_block(dtype) == 32 ? 8 * 32 : 0);  // 11 legacy blocks
      SCOPED_TRACE(std::string(cpu::isa_name(isas[i])) + " " + dtype_name(dtype) + " k=" + std::to_string(k));
      const std::vector<float> x = random_floats(static_cast<size_t>(k), 11, -3, 3);
      cpu::ActScratch scratch;
      scratch.quantize(x.data(), 1, k);
      const cpu::ActRow act = scratch.row(0);
      const size_t row_bytes = dtype_nbytes(dtype, k);
      const StoredWeight w = random_weight(dtype, cpu::kDotRows, k, 6);
      for (int rows = 1; rows <= cpu::kDotRows; ++rows) {
        std::vector<uint8_t> buf(row_bytes * static_cast<size_t>(rows) + 1024, 0xff);
        std::memcpy(buf.data(), w.host.data(), row_bytes * static_cast<size_t>(rows));
        float got[cpu::kDotRows], want[cpu::kDotRows];
        vec.dot(dtype)(buf.data(), row_bytes, rows, act, k / 32, got);
        ref.dot(dtype)(buf.data(), row_bytes, rows, act, k / 32, want);
        for (int r = 0; r < rows; ++r) {
          double mag = 0;
          for (int64_t e = 0; e < k; ++e) mag += std::abs(x[e] * w.decoded[static_cast<size_t>(r * k + e)]);
          EXPECT_NEAR(got[r], want[r], 1e-5 * mag + 1e-6) << "row " << r << " of " << rows;
        }
      }
      // The prefill panels' decoding: bit for bit the scalar one.
      std::vector<float> d_vec(static_cast<size_t>(k));
      vec.dequant(dtype, static_cast<const uint8_t*>(w.host.data()), d_vec.data(), k);
      EXPECT_EQ(0, std::memcmp(d_vec.data(), w.decoded.data(), d_vec.size() * sizeof(float)));
    }
  }
}

// The VNNI table is the AVX-512 one with vpdpwssd for a vpmaddwd and its add: the same integer
// sums, then the same float operations, so the same bits, for every format and row count.
TEST(CodesKernels, VnniIsAvx512BitForBit) {
  if (!cpu::isa_supported(cpu::Isa::kAvx512Vnni)) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  const cpu::QuantKernels& plain = cpu::quant_kernels(cpu::Isa::kAvx512);
  const cpu::QuantKernels& vnni = cpu::quant_kernels(cpu::Isa::kAvx512Vnni);
  ASSERT_NE(plain.dot(DType::kQ5_0), vnni.dot(DType::kQ5_0)) << "the two tables must be two builds";
  std::vector<DType> formats(std::begin(kFormats), std::end(kFormats));
  formats.insert(formats.end(), {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1});
  for (DType dtype : formats) {
    const int64_t k = 3 * dtype_block(dtype) + (dtype_block(dtype) == 32 ? 8 * 32 : 0);  // 11 legacy blocks
    SCOPED_TRACE(std::string(dtype_name(dtype)) + " k=" + std::to_string(k));
    std::vector<float> x = random_floats(static_cast<size_t>(k), 12, -3, 3);
    for (int64_t e = 0; e < k; e += 32) x[static_cast<size_t>(e)] = e % 64 == 0 ? 40.0f : -40.0f;  // codes of +-32767
    cpu::ActScratch scratch;
    scratch.quantize(x.data(), 1, k);
    const StoredWeight w = random_weight(dtype, cpu::kDotRows, k, 7);
    const size_t row_bytes = dtype_nbytes(dtype, k);
    for (int rows = 1; rows <= cpu::kDotRows; ++rows) {
      float a[cpu::kDotRows], b[cpu::kDotRows];
      const auto* p = static_cast<const uint8_t*>(w.host.data());
      plain.dot(dtype)(p, row_bytes, rows, scratch.row(0), k / 32, a);
      vnni.dot(dtype)(p, row_bytes, rows, scratch.row(0), k / 32, b);
      EXPECT_EQ(0, std::memcmp(a, b, sizeof(float) * static_cast<size_t>(rows))) << rows << " rows";
      for (int r = 0; r < rows; ++r) EXPECT_TRUE(std::isfinite(a[r])) << "row " << r;
    }
  }
}

// decode_block's formula on hand-made blocks: Q4_K's 6-bit scale packing and Q6_K's bit layout, with
// values worked out from ggml-common.h's description, not from the decoder.
TEST(CodesDecode, HandMadeBlocks) {
  {  // Q4_K: d = 1, dmin = 0.5; sub-block 5: sc = 0x2a (42), m = 0x13 (19); codes: nibble 3 / 7
    std::vector<uint8_t> b(144, 0);
    const uint16_t one = f32_to_f16(1.0f), half = f32_to_f16(0.5f);
    std::memcpy(b.data(), &one, 2);
    std::memcpy(b.data() + 2, &half, 2);
    uint8_t* s = b.data() + 4;
    s[9] = 0x3a;        // j = 5: low 4 bits of sc (0xa) and of m (0x3)
    s[1] |= 2u << 6;    // high 2 bits of sc (0x2) in scales[j - 4]
    s[5] |= 1u << 6;    // high 2 bits of m (0x1) in scales[j]
    b[16 + 64 + 0] = 0x73;  // sub-block 5 = high nibbles of qs[64..95]: element 160 has code 7
    std::vector<float> x(256);
    dequantize_to_f32(DType::kQ4_K, b.data(), x.data(), 256);
    EXPECT_EQ(x[160], 42.0f * 7 - 0.5f * 19);
    EXPECT_EQ(x[161], -0.5f * 19);
    EXPECT_EQ(x[128], 0.0f);  // sub-block 4: sc = m = 0
  }
  {  // Q6_K: d = 0.25, scales[8 + 2 * 3 + 1] = -3; element 128 + 96 + 17 (n = 1, k = 3, l = 17)
    std::vector<uint8_t> b(210, 0);
    const uint16_t q = f32_to_f16(0.25f);
    std::memcpy(b.data() + 208, &q, 2);
    b[192 + 15] = static_cast<uint8_t>(-3);
    b[64 + 32 + 17] = 0x90;        // k = 3: high nibble of ql[64 n + 32 + l] = 9
    b[128 + 32 + 17] = 2u << 6;    // (qh >> 6) & 3 = 2: code = 9 | 2 << 4 = 41
    std::vector<float> x(256);
    dequantize_to_f32(DType::kQ6_K, b.data(), x.data(), 256);
    EXPECT_EQ(x[128 + 96 + 17], 0.25f * -3 * (41 - 32));
    EXPECT_EQ(x[128 + 96 + 16], 0.25f * -3 * -32);
  }
}

// Q8_0 holds Q4_0, Q5_0 and IQ4_NL value for value (parallel_linear.cc stacks a fused weight of
// mixed such parts as Q8_0): the widened blocks decode to exactly the originals' values, on random
// blocks; formats with an offset or sub-block scales are not taken.
TEST(CodesWiden, Q8_0HoldsTheSymmetricFormatsExactly) {
  for (DType t : {DType::kQ4_0, DType::kQ5_0, DType::kIQ4_NL, DType::kQ8_0}) {
    SCOPED_TRACE(dtype_name(t));
    ASSERT_TRUE(widens_to_q8_0(t));
    const int64_t n = 3 * 32 * 7;
    std::vector<uint8_t> src(dtype_nbytes(t, n));
    std::mt19937 gen(7);
    for (uint8_t& byte : src) byte = static_cast<uint8_t>(gen());
    for (size_t b = 0; b < src.size() / dtype_size(t); ++b) {  // finite f16 d in [0.01, 2)
      const uint16_t h = f32_to_f16(0.01f + static_cast<float>(gen() % 1000) / 500.0f);
      std::memcpy(src.data() + b * dtype_size(t), &h, 2);
    }
    std::vector<uint8_t> wide(dtype_nbytes(DType::kQ8_0, n));
    widen_to_q8_0(t, src.data(), wide.data(), n);
    std::vector<float> want(n), got(n);
    dequantize_to_f32(t, src.data(), want.data(), n);
    dequantize_to_f32(DType::kQ8_0, wide.data(), got.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], want[i]) << i;
  }
  for (DType t : {DType::kQ4_1, DType::kQ5_1, DType::kQ4_K, DType::kQ6_K, DType::kBF16}) EXPECT_FALSE(widens_to_q8_0(t));
}

// Embedding rows of a K-quant table are its exact decoding.
TEST(CodesEmbedding, RowsAreTheDecodedTable) {
  CpuBackend b(2);
  for (DType dtype : {DType::kQ4_K, DType::kQ6_K, DType::kQ5_0}) {
    SCOPED_TRACE(dtype_name(dtype));
    const int64_t vocab = 5, hidden = 512;
    const StoredWeight w = random_weight(dtype, vocab, hidden, 9);
    const Tensor table = b.upload_stored_weight(w.host);
    const std::vector<int32_t> ids{4, 0, 2};
    const Tensor out = cpu_test::poisoned(b, {3, hidden});
    b.embedding(cpu_test::upload_i32(b, ids, {3}), table, 0, out);
    const std::vector<float> got = download(b, out);
    for (size_t r = 0; r < ids.size(); ++r) {
      for (int64_t i = 0; i < hidden; ++i) {
        ASSERT_EQ(got[r * hidden + static_cast<size_t>(i)], w.decoded[static_cast<size_t>(ids[r] * hidden + i)]);
      }
    }
  }
}

}  // namespace
}  // namespace minivllm
