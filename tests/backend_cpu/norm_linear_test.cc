// rms_norm, add_rms_norm and linear of the CPU backend against double-precision loops.
#include <gtest/gtest.h>

#include "cpu_test_util.h"

namespace minivllm::cpu_test {
namespace {

std::vector<double> rms_norm_ref(const std::vector<float>& x, const std::vector<float>& w, double eps) {
  const size_t n = w.size();
  std::vector<double> out(x.size());
  for (size_t r = 0; r < x.size() / n; ++r) {
    double ss = 0;
    for (size_t i = 0; i < n; ++i) ss += static_cast<double>(x[r * n + i]) * x[r * n + i];
    const double inv = 1.0 / std::sqrt(ss / n + eps);
    for (size_t i = 0; i < n; ++i) out[r * n + i] = x[r * n + i] * inv * w[i];
  }
  return out;
}

class NormLinearTest : public ::testing::TestWithParam<int> {
 protected:
  std::unique_ptr<Backend> b = make_cpu_backend();
};

TEST_P(NormLinearTest, RmsNormOutOfPlaceAndInPlace) {
  const int64_t t = GetParam(), n = 576;
  auto xv = random_floats(t * n, 1, -3, 3);
  auto wv = random_floats(n, 2, 0.5, 1.5);
  Tensor x = upload(*b, xv, {t, n}), w = upload(*b, wv, {n});
  Tensor out = poisoned(*b, {t, n});
  b->rms_norm(x, w, 1e-6f, out);
  auto ref = rms_norm_ref(xv, wv, 1e-6);
  expect_close(download(*b, out), ref, "rms_norm");
  b->rms_norm(x, w, 1e-6f, x);  // out aliases x
  expect_close(download(*b, x), ref, "rms_norm in place");
}

TEST_P(NormLinearTest, AddRmsNorm) {
  const int64_t t = GetParam(), n = 1024;
  auto xv = random_floats(t * n, 3, -2, 2);
  auto rv = random_floats(t * n, 4, -2, 2);
  auto wv = random_floats(n, 5, 0.5, 1.5);
  Tensor x = upload(*b, xv, {t, n}), r = upload(*b, rv, {t, n}), w = upload(*b, wv, {n});
  b->add_rms_norm(x, r, w, 1e-5f);
  std::vector<double> sum(xv.size());
  std::vector<float> sum_f(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) {
    sum[i] = static_cast<double>(xv[i]) + rv[i];
    sum_f[i] = static_cast<float>(sum[i]);
  }
  expect_close(download(*b, r), sum, "add_rms_norm residual");
  expect_close(download(*b, x), rms_norm_ref(sum_f, wv, 1e-5), "add_rms_norm x");
}

void check_linear(Backend& b, int64_t t, int64_t k, int64_t n, bool with_bias) {
  auto xv = random_floats(t * k, 10 + t, -1, 1);
  auto wv = random_floats(n * k, 11 + n, -0.2f, 0.2f);
  auto bv = random_floats(n, 12, -1, 1);
  Tensor x = upload(b, xv, {t, k}), w = upload(b, wv, {n, k}), bias = upload(b, bv, {n});
  Tensor out = poisoned(b, {t, n});
  b.linear(x, w, with_bias ? &bias : nullptr, out);
  std::vector<double> ref(t * n);
  for (int64_t r = 0; r < t; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = with_bias ? bv[j] : 0.0;
      for (int64_t i = 0; i < k; ++i) acc += static_cast<double>(xv[r * k + i]) * wv[j * k + i];
      ref[r * n + j] = acc;
    }
  }
  expect_close(download(b, out), ref, "linear");
}

TEST_P(NormLinearTest, LinearSmolLM2Shapes) {
  const int64_t t = GetParam();
  check_linear(*b, t, 576, 960, false);   // qkv: (9 + 2 * 3) * 64
  check_linear(*b, t, 576, 3072, false);  // gate_up
  check_linear(*b, t, 1536, 576, false);  // down
}

TEST_P(NormLinearTest, LinearOddShapesWithBias) {
  const int64_t t = GetParam();
  check_linear(*b, t, 33, 17, true);    // below the threshold: one thread
  check_linear(*b, t, 257, 1001, true); // slices that do not divide evenly
}

INSTANTIATE_TEST_SUITE_P(Tokens, NormLinearTest, ::testing::Values(1, 7, 129));

TEST(NormLinearChecks, ShapeMismatchNamesTheTensor) {
  auto b = make_cpu_backend();
  Tensor x = b->empty(DType::kF32, {3, 8}), w = b->empty(DType::kF32, {4, 9}), out = b->empty(DType::kF32, {3, 4});
  try {
    b->linear(x, w, nullptr, out);
    FAIL() << "linear accepted x[3, 8] with weight[4, 9]";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f32[3, 8]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace minivllm::cpu_test
