// Backend::rms_norm_moe_route on the GPU: a sparse layer's RMSNorm, router gemv and route, in one
// launch at decode sizes (moe_norm_route.cu), three kernels past them. Against the CPU backend (its
// composition of rms_norm, linear and moe_route) and against the GPU's three kernels
// (MINIVLLM_MOE_NORM_ROUTE=0), on odd shapes (hidden widths of 8 to 4,096 and past it, 9 to 512
// experts, top-2 to top-9, norm weights in f32 and bf16, 1 to 12 tokens): the normed rows are the norm
// kernel's bit for bit, the logits close to the CPU's, and the ids those the CPU's route gives on the
// GPU's own logits, exactly (ties and all), the weights within 1e-6. The kernel is also launched
// directly, so that a dispatch falling back to the three kernels cannot pass for it; graph replay
// equals eager.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>

#include "backend/cuda/moe.h"
#include "cuda_test_util.h"
#include "moe_route_check.h"

namespace minivllm::cuda_test {
namespace {

struct NormRouteCase {
  int64_t tokens, experts;
  int k;
  int64_t hidden;
  bool norm_f32;
  bool ties = false;  // router rows repeated every 5 experts: equal logits, the lower id first
};

void PrintTo(const NormRouteCase& c, std::ostream* os) {
  *os << c.tokens << " tokens, top-" << c.k << " of " << c.experts << ", hidden " << c.hidden
      << (c.norm_f32 ? ", f32 norm" : ", bf16 norm") << (c.ties ? ", tied rows" : "");
}

constexpr float kEps = 1e-6f;

// The host inputs of one case.
struct Inputs {
  Tensor residual, norm, router;  // f32 host
  explicit Inputs(const NormRouteCase& c) {
    std::mt19937 rng(static_cast<uint32_t>(c.tokens * 977 + c.experts * 31 + c.hidden));
    residual = random_values({c.tokens, c.hidden}, rng, 3.0f);
    norm = random_values({c.hidden}, rng, 0.3f, 1.0f);
    router = random_values({c.experts, c.hidden}, rng, 1.0f / std::sqrt(static_cast<float>(c.hidden)));
    if (c.ties) tie_router_rows(router, c.experts, c.hidden);
  }
};

struct Outputs {
  std::vector<float> normed, logits, weights;
  std::vector<int32_t> ids;
};

// The backend's tensors of one call: inputs uploaded, outputs poisoned.
struct Call {
  Tensor residual, norm, router, normed, logits, ids, weights;
  Call(Backend& b, const Inputs& in, const NormRouteCase& c) {
    residual = upload_f32(b, in.residual);
    norm = b.upload_weight(in.norm, c.norm_f32);
    router = upload(b, in.router);
    normed = b.empty(b.activation_dtype(), {c.tokens, c.hidden});
    logits = b.empty(DType::kF32, {c.tokens, c.experts});
    ids = b.empty(DType::kI32, {c.tokens, c.k});
    weights = b.empty(DType::kF32, {c.tokens, c.k});
    for (const Tensor* t : {&normed, &logits, &ids, &weights}) b.fill_bytes(*t, 0xFF);
  }
  void run(Backend& b, bool renormalize) const {
    b.rms_norm_moe_route(NormPrologue{residual, norm, kEps, normed}, router, logits, renormalize, ids, weights);
  }
  Outputs download_all(Backend& b) const {
    Outputs o{download(b, normed), download(b, logits), download(b, weights), {}};
    o.ids.resize(static_cast<size_t>(ids.numel()));
    b.copy_to_host(o.ids.data(), ids);
    return o;
  }
};

// The CPU's route on `logits` (the GPU's own) gives `o`'s ids and weights.
void expect_route_of(Backend& cpu, const std::vector<float>& logits, const NormRouteCase& c, bool renormalize,
                     const Outputs& o, const std::string& what) {
  cuda_test::expect_route_of(cpu, logits, c.tokens, c.experts, c.k, renormalize, o.ids, o.weights, what);
}

class CudaMoeNormRoute : public ::testing::TestWithParam<NormRouteCase> {};

TEST_P(CudaMoeNormRoute, MatchesTheCpuAndTheThreeKernels) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  const NormRouteCase c = GetParam();
  const Inputs in(c);
  Backends on = backends_with("MINIVLLM_MOE_NORM_ROUTE", "1");
  Backends off = backends_with("MINIVLLM_MOE_NORM_ROUTE", "0");
  for (const bool renormalize : {true, false}) {
    const std::string tag = renormalize ? " renormalized" : "";
    const Call cpu_call(*on.cpu, in, c), gpu_call(*on.gpu, in, c), three_call(*off.gpu, in, c);
    cpu_call.run(*on.cpu, renormalize);
    gpu_call.run(*on.gpu, renormalize);
    three_call.run(*off.gpu, renormalize);
    const Outputs cpu = cpu_call.download_all(*on.cpu), gpu = gpu_call.download_all(*on.gpu);
    const Outputs three = three_call.download_all(*off.gpu);
    expect_close(gpu.normed, three.normed, 0.0, 0.0, "normed rows against the norm kernel's" + tag);
    expect_close(gpu.normed, cpu.normed, 1e-5, 0.02 * 4.0, "normed rows against the CPU's" + tag);
    expect_close(gpu.logits, cpu.logits, 1e-4, 0.02, "logits against the CPU's" + tag);
    expect_close(gpu.logits, three.logits, 1e-6, 1e-3, "logits against the router gemv's" + tag);
    expect_route_of(*on.cpu, gpu.logits, c, renormalize, gpu, "the GPU's route" + tag);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaMoeNormRoute,
                         ::testing::Values(NormRouteCase{1, 128, 8, 2048, false},  // Qwen3-30B-A3B
                                           NormRouteCase{1, 128, 8, 2048, true}, NormRouteCase{3, 60, 4, 1032, false},
                                           NormRouteCase{8, 128, 8, 4096, true},  // Qwen3-235B-A22B's widths
                                           NormRouteCase{5, 512, 8, 264, false}, NormRouteCase{2, 9, 9, 8, true},
                                           NormRouteCase{4, 8, 2, 4096, false},  // Mixtral's
                                           NormRouteCase{2, 128, 8, 2048, false, true},
                                           NormRouteCase{1, 60, 9, 1032, true, true},
                                           // past the kernel: more tokens, a wider row (the three kernels)
                                           NormRouteCase{12, 128, 8, 2048, false}, NormRouteCase{2, 33, 2, 4104, true}),
                         [](const auto& info) {
                           const NormRouteCase& c = info.param;
                           std::string name = "t";
                           name += std::to_string(c.tokens) + "_e" + std::to_string(c.experts) + "_k" +
                                   std::to_string(c.k) + "_h" + std::to_string(c.hidden) + (c.norm_f32 ? "_f32" : "_bf16") +
                                   (c.ties ? "_ties" : "");
                           return name;
                         });

// The kernel itself, launched without the backend's dispatch, against the GPU's three kernels.
TEST(CudaMoeNormRouteKernel, LaunchedDirectlyMatchesTheThreeKernels) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends off = backends_with("MINIVLLM_MOE_NORM_ROUTE", "0");
  Backend& gpu = *off.gpu;
  for (const NormRouteCase& c : {NormRouteCase{1, 128, 8, 2048, false}, NormRouteCase{7, 60, 4, 1032, true},
                                 NormRouteCase{2, 512, 8, 4096, false}, NormRouteCase{3, 128, 8, 2048, false, true}}) {
    const std::string tag = ::testing::PrintToString(c);
    ASSERT_TRUE(cuda::moe_norm_route_fits(c.tokens, c.hidden, static_cast<int>(c.experts))) << tag;
    const Inputs in(c);
    const Call three_call(gpu, in, c), kernel_call(gpu, in, c);
    three_call.run(gpu, true);
    gpu.synchronize();
    cuda::launch_moe_norm_route(kernel_call.residual.ptr<float>(), kernel_call.norm.data(), c.norm_f32, kEps,
                          kernel_call.router.data(), c.tokens, c.hidden, static_cast<int>(c.experts), c.k, true,
                          kernel_call.normed.data(), kernel_call.logits.ptr<float>(), kernel_call.ids.ptr<int32_t>(),
                          kernel_call.weights.ptr<float>(), nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    const Outputs three = three_call.download_all(gpu), kernel = kernel_call.download_all(gpu);
    expect_close(kernel.normed, three.normed, 0.0, 0.0, tag + ": normed rows");
    expect_close(kernel.logits, three.logits, 1e-6, 1e-3, tag + ": logits");
    expect_route_of(*off.cpu, kernel.logits, c, true, kernel, tag + ": route");
  }
}

// Captured once and replayed: the same bits as the eager call.
TEST(CudaMoeNormRouteGraph, ReplayEqualsEager) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  auto gpu = make_cuda_backend(0);
  const NormRouteCase c{3, 128, 8, 2048, false};
  const Inputs in(c);
  const Call call(*gpu, in, c);
  call.run(*gpu, true);
  const Outputs eager = call.download_all(*gpu);
  for (const Tensor* t : {&call.normed, &call.logits, &call.ids, &call.weights}) gpu->fill_bytes(*t, 0xFF);
  const int graph = gpu->capture_graph([&] { call.run(*gpu, true); });
  gpu->replay_graph(graph);
  const Outputs replay = call.download_all(*gpu);
  expect_close(replay.normed, eager.normed, 0.0, 0.0, "normed");
  expect_close(replay.logits, eager.logits, 0.0, 0.0, "logits");
  expect_close(replay.weights, eager.weights, 0.0, 0.0, "weights");
  EXPECT_EQ(replay.ids, eager.ids);
}

}  // namespace
}  // namespace minivllm::cuda_test
