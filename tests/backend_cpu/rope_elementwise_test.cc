// qk_norm_rope, embedding, act_mul, gather_rows and to_f32 against double-precision loops.
#include <gtest/gtest.h>

#include "cpu_test_util.h"

namespace minivllm::cpu_test {
namespace {

// cos_sin[pos, d]: cos in the first d / 2 columns, sin in the rest (theta as Llama / Qwen).
std::vector<float> rope_table(int64_t max_pos, int64_t d, double theta) {
  std::vector<float> t(max_pos * d);
  for (int64_t p = 0; p < max_pos; ++p) {
    for (int64_t i = 0; i < d / 2; ++i) {
      const double angle = p * std::pow(theta, -2.0 * i / d);
      t[p * d + i] = static_cast<float>(std::cos(angle));
      t[p * d + d / 2 + i] = static_cast<float>(std::sin(angle));
    }
  }
  return t;
}

struct RopeCase {
  int tokens, nq, nkv, hd;
  bool qk_norm;
  int rotary = 0;  // the leading dims that rotate (partial_rotary_factor); 0: hd
};

void PrintTo(const RopeCase& c, std::ostream* os) {
  *os << c.tokens << " tokens, heads " << c.nq << "/" << c.nkv << ", hd " << c.hd << (c.qk_norm ? ", qk_norm" : "")
      << ", rotary " << (c.rotary > 0 ? c.rotary : c.hd);
}

class RopeTest : public ::testing::TestWithParam<RopeCase> {};

TEST_P(RopeTest, MatchesReference) {
  const RopeCase c = GetParam();
  auto b = make_cpu_backend();
  const int64_t stride = (c.nq + 2 * c.nkv) * c.hd, max_pos = 4096;
  auto qkv_v = random_floats(c.tokens * stride, 20 + c.hd, -2, 2);
  auto qn_v = random_floats(c.hd, 21, 0.5, 1.5), kn_v = random_floats(c.hd, 22, 0.5, 1.5);
  const int rd = c.rotary > 0 ? c.rotary : c.hd;
  auto table = rope_table(max_pos, rd, 1e6);
  std::vector<int32_t> pos(c.tokens);
  for (int t = 0; t < c.tokens; ++t) pos[t] = (t * 977 + 13) % max_pos;
  Tensor qkv = upload(*b, qkv_v, {c.tokens, stride});
  Tensor qn = upload(*b, qn_v, {c.hd}), kn = upload(*b, kn_v, {c.hd});
  b->qk_norm_rope(qkv, c.nq, c.nkv, c.hd, c.qk_norm ? &qn : nullptr, c.qk_norm ? &kn : nullptr, 1e-6f,
                  upload_i32(*b, pos, {c.tokens}), upload(*b, table, {max_pos, rd}));

  std::vector<double> ref(qkv_v.begin(), qkv_v.end());
  const int half = rd / 2;  // dims from rd on pass through
  for (int t = 0; t < c.tokens; ++t) {
    for (int h = 0; h < c.nq + c.nkv; ++h) {
      double* x = ref.data() + t * stride + h * c.hd;
      if (c.qk_norm) {
        const auto& w = h < c.nq ? qn_v : kn_v;
        double ss = 0;
        for (int i = 0; i < c.hd; ++i) ss += x[i] * x[i];
        const double inv = 1.0 / std::sqrt(ss / c.hd + 1e-6);
        for (int i = 0; i < c.hd; ++i) x[i] = x[i] * inv * w[i];
      }
      for (int i = 0; i < half; ++i) {
        const double angle = pos[t] * std::pow(1e6, -2.0 * i / rd);
        const double x1 = x[i], x2 = x[i + half];
        x[i] = x1 * std::cos(angle) - x2 * std::sin(angle);
        x[i + half] = x2 * std::cos(angle) + x1 * std::sin(angle);
      }
    }
  }
  // The table is fp32, so compare against rounded cos/sin within fp32 accuracy.
  expect_close(download(*b, qkv), ref, "qk_norm_rope", 1e-5, 2e-5);
}

INSTANTIATE_TEST_SUITE_P(Shapes, RopeTest,
                         ::testing::Values(RopeCase{1, 9, 3, 64, false}, RopeCase{7, 16, 8, 128, true},
                                           RopeCase{129, 8, 2, 64, true}, RopeCase{129, 4, 4, 128, false},
                                           RopeCase{7, 4, 2, 128, true, 96}, RopeCase{5, 3, 1, 64, false, 16}));

TEST(ElementwiseTest, EmbeddingVocabParallel) {
  auto b = make_cpu_backend();
  const int64_t rows = 100, hidden = 72, vocab_start = 200;
  auto wv = random_floats(rows * hidden, 30);
  std::vector<int32_t> ids = {200, 299, 199, 300, 250, 0, 1000, 201, 250};
  Tensor out = poisoned(*b, {static_cast<int64_t>(ids.size()), hidden});
  b->embedding(upload_i32(*b, ids, {static_cast<int64_t>(ids.size())}), upload(*b, wv, {rows, hidden}),
               vocab_start, out);
  std::vector<double> ref(ids.size() * hidden, 0.0);
  for (size_t t = 0; t < ids.size(); ++t) {
    const int64_t local = ids[t] - vocab_start;
    if (local < 0 || local >= rows) continue;
    for (int64_t i = 0; i < hidden; ++i) ref[t * hidden + i] = wv[local * hidden + i];
  }
  expect_close(download(*b, out), ref, "embedding", 1e-12, 0);
}

TEST(ElementwiseTest, ActMul) {
  auto b = make_cpu_backend();
  for (Activation act : {Activation::kSilu, Activation::kGeluTanh, Activation::kSwigluOai}) {
    for (int64_t t : {1, 7, 129}) {
      const int64_t inter = 1536;
      auto gu = random_floats(t * 2 * inter, 40 + t, -8, 8);
      Tensor out = poisoned(*b, {t, inter});
      b->act_mul(upload(*b, gu, {t, 2 * inter}), out, act);
      std::vector<double> ref(t * inter);
      for (int64_t r = 0; r < t; ++r) {
        for (int64_t i = 0; i < inter; ++i) {
          const double g = gu[r * 2 * inter + i], u = gu[r * 2 * inter + inter + i];
          // SiLU, PyTorch's gelu(approximate="tanh"), or gpt-oss's clamped form (|values| up to 8 pass its
          // limit of 7), in double.
          if (act == Activation::kSwigluOai) {
            const double gc = std::min(g, 7.0), uc = std::clamp(u, -7.0, 7.0);
            ref[r * inter + i] = gc / (1.0 + std::exp(-1.702 * gc)) * (uc + 1.0);
            continue;
          }
          const double a = act == Activation::kSilu
                               ? g / (1.0 + std::exp(-g))
                               : 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g)));
          ref[r * inter + i] = a * u;
        }
      }
      expect_close(download(*b, out), ref, (std::string("act_mul ") + activation_name(act)).c_str());
    }
  }
}

TEST(ElementwiseTest, GatherRows) {
  auto b = make_cpu_backend();
  const int64_t rows = 9, cols = 13;
  auto xv = random_floats(rows * cols, 50);
  std::vector<int32_t> idx = {8, 0, 3, 3};
  Tensor out = poisoned(*b, {4, cols});
  b->gather_rows(upload(*b, xv, {rows, cols}), upload_i32(*b, idx, {4}), out);
  std::vector<double> ref;
  for (int32_t i : idx) ref.insert(ref.end(), xv.begin() + i * cols, xv.begin() + (i + 1) * cols);
  expect_close(download(*b, out), ref, "gather_rows", 1e-12, 0);
  EXPECT_THROW(b->gather_rows(upload(*b, xv, {rows, cols}), upload_i32(*b, {9}, {1}), out.rows(0, 1)), Error);
}

TEST(ElementwiseTest, ToF32FromBf16AndF32) {
  auto b = make_cpu_backend();
  std::vector<uint16_t> half = {f32_to_bf16(1.5f), f32_to_bf16(-2.25f), f32_to_bf16(1e-3f)};
  Tensor x = b->empty(DType::kBF16, {3});
  b->copy_from_host(x, half.data());
  Tensor out = poisoned(*b, {3});
  b->to_f32(x, out);
  expect_close(download(*b, out), {1.5, -2.25, bf16_to_f32(f32_to_bf16(1e-3f))}, "to_f32 bf16", 1e-12, 0);
  Tensor out2 = poisoned(*b, {3});
  b->to_f32(out, out2);
  expect_close(download(*b, out2), {1.5, -2.25, bf16_to_f32(f32_to_bf16(1e-3f))}, "to_f32 f32", 1e-12, 0);
}

TEST(MemoryTest, PeakTracksAllocationsAndResets) {
  CpuBackend b(1);
  const size_t base = b.memory_used();
  {
    Tensor a = b.empty(DType::kF32, {1000, 1000});
    EXPECT_GE(b.memory_used(), base + 4000000);
    EXPECT_GE(b.peak_memory_used(), base + 4000000);
  }
  EXPECT_EQ(b.memory_used(), base);
  EXPECT_GE(b.peak_memory_used(), base + 4000000);
  b.reset_peak_memory();
  EXPECT_EQ(b.peak_memory_used(), base);
  size_t free_bytes = 0, total_bytes = 0;
  b.memory_info(&free_bytes, &total_bytes);
  EXPECT_GT(total_bytes, size_t{1} << 26);
  EXPECT_GT(free_bytes, 0u);
  EXPECT_LE(free_bytes, total_bytes);
  EXPECT_EQ(b.activation_dtype(), DType::kF32);
  EXPECT_EQ(b.device(), DeviceKind::kCpu);
}

TEST(MemoryTest, CopiesAndFill) {
  auto b = make_cpu_backend();
  auto v = random_floats(37, 60);
  Tensor a = upload(*b, v, {37}), c = poisoned(*b, {37});
  b->copy(c, a);
  std::vector<double> ref(v.begin(), v.end());
  expect_close(download(*b, c), ref, "copy", 1e-12, 0);
  b->fill_bytes(c, 0);
  expect_close(download(*b, c), std::vector<double>(37, 0.0), "fill_bytes", 1e-12, 0);
  EXPECT_THROW(b->copy(c, a.rows(0, 36)), Error);
}

}  // namespace
}  // namespace minivllm::cpu_test
