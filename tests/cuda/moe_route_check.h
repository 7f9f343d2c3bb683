// Checks shared by the tests of the GPU's fused MoE routes (cuda_moe_norm_route_test.cc,
// cuda_moe_route_in_gate_test.cc): the CPU's route as the reference, and router rows that tie.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cuda_test_util.h"

namespace minivllm::cuda_test {

// The CPU's route of `logits` (f32 [tokens, experts], the GPU's own) gives `ids` exactly and
// `weights` within 1e-6.
inline void expect_route_of(Backend& cpu, const std::vector<float>& logits, int64_t tokens, int64_t experts, int k,
                            bool renormalize, const std::vector<int32_t>& ids, const std::vector<float>& weights,
                            const std::string& what) {
  Tensor host = host_tensor(DType::kF32, {tokens, experts});
  std::copy(logits.begin(), logits.end(), host.ptr<float>());
  Tensor want_ids = cpu.empty(DType::kI32, {tokens, k}), want_weights = cpu.empty(DType::kF32, {tokens, k});
  cpu.moe_route(upload_f32(cpu, host), renormalize, want_ids, want_weights);
  std::vector<int32_t> want(static_cast<size_t>(want_ids.numel()));
  cpu.copy_to_host(want.data(), want_ids);
  EXPECT_EQ(ids, want) << what << ": ids";
  expect_close(weights, download(cpu, want_weights), 1e-12, 1e-6, what + ": weights");
}

// Router rows (f32 host [experts, hidden]) repeated every 5 experts: every warp sums a row in the
// same order, so equal rows give equal logits, and the lower id must come first.
inline void tie_router_rows(Tensor& router, int64_t experts, int64_t hidden) {
  float* r = router.ptr<float>();
  for (int64_t e = 5; e < experts; ++e) std::copy(r + (e % 5) * hidden, r + (e % 5 + 1) * hidden, r + e * hidden);
}

}  // namespace minivllm::cuda_test
