// The CPU backend's fused projections (cpu_linear.cc), bit for bit against the ops they fuse:
// linear_act_mul against linear then act_mul, linear_add_residual against linear then
// add_to_residual. Each thread computes its own output columns and finishes them (the activation,
// the residual add) in the projection's team, so a slice boundary that split gate from up, or a
// column computed twice or never, shows here. Odd shapes: column counts that are not whole slices
// of 16, one to three threads, the dot-product path (few rows) and the decoded-panel path (many).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/quant_blocks.h"
#include "cpu_test_util.h"

namespace minivllm {
namespace {

using cpu_test::download;
using cpu_test::poisoned;
using cpu_test::random_floats;
using cpu_test::upload;

Tensor stored_weight(Backend& b, DType dtype, int64_t n, int64_t k, uint32_t seed) {
  const std::vector<float> v = random_floats(static_cast<size_t>(n * k), seed, -0.3f, 0.3f);
  if (dtype == DType::kF32) return upload(b, v, {n, k});
  if (dtype_is_quantized(dtype)) return b.upload_stored_weight(cpu_test::random_blocks(dtype, n, k, seed));
  Tensor host = host_tensor(dtype, {n, k});
  convert_from_f32(v.data(), dtype, host.data(), v.size());
  return b.upload_stored_weight(host);
}

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t differ = 0, first = got.size();
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      first = differ++ == 0 ? i : first;
    }
  }
  EXPECT_EQ(differ, 0u) << what << ": first at " << first << " (" << (first < got.size() ? got[first] : 0.0f)
                        << " vs " << (first < want.size() ? want[first] : 0.0f) << ")";
}

struct Case {
  DType dtype;
  int64_t t, inter, k;
};

class LinearFusion : public ::testing::TestWithParam<int> {};

TEST_P(LinearFusion, ActMulIsLinearThenActMul) {
  const int threads = GetParam();
  std::unique_ptr<Backend> b = make_cpu_backend(threads);
  // inter 200: columns past the parallel threshold, not whole slices of 16; inter 40: one thread.
  for (const Case c : {Case{DType::kQ5_0, 1, 200, 96}, Case{DType::kQ8_0, 3, 200, 96}, Case{DType::kQ4_K, 1, 200, 256},
                       Case{DType::kBF16, 2, 200, 96}, Case{DType::kF32, 1, 200, 96}, Case{DType::kQ6_K, 7, 200, 256},
                       Case{DType::kQ5_0, 1, 40, 96}, Case{DType::kF32, 9, 130, 64}}) {
    for (Activation act : {Activation::kSilu, Activation::kGeluTanh, Activation::kSwigluOai}) {
      const std::string what = std::string(dtype_name(c.dtype)) + " t=" + std::to_string(c.t) + " inter=" +
                               std::to_string(c.inter) + " " + activation_name(act);
      SCOPED_TRACE(what);
      const Tensor w = stored_weight(*b, c.dtype, 2 * c.inter, c.k, 3);
      const Tensor x = upload(*b, random_floats(static_cast<size_t>(c.t * c.k), 4, -2, 2), {c.t, c.k});
      const Tensor scratch = poisoned(*b, {c.t, 2 * c.inter}), out = poisoned(*b, {c.t, c.inter});
      const Tensor ref_scratch = poisoned(*b, {c.t, 2 * c.inter}), ref = poisoned(*b, {c.t, c.inter});
      b->linear_act_mul(x, w, scratch, out, act);
      b->linear(x, w, nullptr, ref_scratch);
      b->act_mul(ref_scratch, ref, act);
      expect_same_bits(download(*b, out), download(*b, ref), what);
    }
  }
}

TEST_P(LinearFusion, AddResidualIsLinearThenAdd) {
  const int threads = GetParam();
  std::unique_ptr<Backend> b = make_cpu_backend(threads);
  for (const Case c : {Case{DType::kQ5_0, 1, 576, 96}, Case{DType::kQ6_K, 2, 333, 256}, Case{DType::kQ8_0, 7, 576, 64},
                       Case{DType::kF32, 1, 100, 64}, Case{DType::kBF16, 3, 250, 96}}) {
    const std::string what = std::string(dtype_name(c.dtype)) + " t=" + std::to_string(c.t) + " n=" +
                             std::to_string(c.inter);
    SCOPED_TRACE(what);
    const int64_t n = c.inter;
    const Tensor w = stored_weight(*b, c.dtype, n, c.k, 5);
    const Tensor x = upload(*b, random_floats(static_cast<size_t>(c.t * c.k), 6, -2, 2), {c.t, c.k});
    const std::vector<float> r0 = random_floats(static_cast<size_t>(c.t * n), 7, -4, 4);
    const Tensor residual = upload(*b, r0, {c.t, n}), ref_residual = upload(*b, r0, {c.t, n});
    const Tensor scratch = poisoned(*b, {c.t, n}), ref_scratch = poisoned(*b, {c.t, n});
    b->linear_add_residual(x, w, scratch, residual);
    b->linear(x, w, nullptr, ref_scratch);
    b->add_to_residual(ref_scratch, ref_residual);
    expect_same_bits(download(*b, residual), download(*b, ref_residual), what);
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, LinearFusion, ::testing::Values(1, 2, 3));

TEST(LinearFusionChecks, ShapesAreNamed) {
  std::unique_ptr<Backend> b = make_cpu_backend(2);
  const Tensor w = stored_weight(*b, DType::kBF16, 64, 32, 1);  // the fused path (f32 weights take linear's)
  const Tensor x = upload(*b, random_floats(32, 2), {1, 32});
  const Tensor scratch = poisoned(*b, {1, 64});
  EXPECT_THROW(
      {
        try {
          b->linear_act_mul(x, w, scratch, poisoned(*b, {1, 31}), Activation::kSilu);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("linear_act_mul: out"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  EXPECT_THROW(b->linear_add_residual(x, w, scratch, poisoned(*b, {1, 63})), Error);
}

}  // namespace
}  // namespace minivllm
