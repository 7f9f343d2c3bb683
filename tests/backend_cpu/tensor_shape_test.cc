// Tensor shapes from untrusted files: a zero dim makes the element count 0 whatever the other dims
// (which nothing then bounds), and a product past int64 is an error naming the shape, never
// signed overflow (a fuzzed GGUF had dims 0 x 1,179,648 x 2,336,462,209,024).
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "common/check.h"
#include "common/tensor.h"

namespace minivllm {
namespace {

void expect_error_containing(const std::function<void()>& fn, const std::string& part) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one containing '" << part << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(TensorShape, ZeroDimMeansNoElementsWhateverTheOthers) {
  const std::vector<int64_t> huge = {2336462209024, 5066549580791808, 0};
  EXPECT_EQ(checked_numel(huge), 0);
  const Tensor t = host_tensor(DType::kF32, huge);
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.nbytes(), 0u);
  auto cpu = make_cpu_backend();
  EXPECT_EQ(cpu->empty(DType::kF32, {0, 5066549580791808, 2336462209024}).numel(), 0);
  EXPECT_EQ(checked_numel({3, 4, 5}), 60);
}

TEST(TensorShape, OverflowAndNegativeDimsAreErrorsNamingTheShape) {
  expect_error_containing([] { (void)checked_numel({2336462209024, 5066549580791808}); },
                          "[2336462209024, 5066549580791808]");
  expect_error_containing([] { (void)host_tensor(DType::kF32, {4611686018427387904, 4}); }, "more elements");
  expect_error_containing([] { (void)checked_numel({3, -1}); }, "negative dimension");
  auto cpu = make_cpu_backend();
  expect_error_containing([&] { (void)cpu->empty(DType::kF32, {1ll << 40, 1ll << 40}); }, "[1099511627776, 1099511627776]");
}

}  // namespace
}  // namespace minivllm
