// Backend::rms_norm_moe_experts_add on the GPU with the route left to the experts' gate/up gemv
// (MINIVLLM_MOE_ROUTE_IN_GATE; moe_gemv.cu's warp_route_pick): against the same op with the route in
// the norm-route launch (the knob at 0), the output bit for bit where the weights are renormalized
// and the ids always; against the CPU backend, the ids exactly the CPU's route of the GPU's own
// logits (ties included), the weights within 1e-6, and the output within the experts' bf16 rounding
// of the CPU's experts on the same rows and route. Odd shapes: 8 to 128 experts (some not a multiple of 4), top-1 to top-9, 1 to 8
// tokens, a rank's half of the experts. The gemv is also launched directly with its route against
// the route kernel's ids (a dispatch that fell back cannot pass for it), and graph replay equals eager.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <set>
#include <string>

#include "api/llm_engine.h"
#include "backend/cuda/moe.h"
#include "cuda_test_util.h"
#include "moe_route_check.h"

namespace minivllm::cuda_test {
namespace {

struct GateRouteCase {
  int64_t tokens, experts;
  int k;
  int64_t hidden, inter;
  int64_t first, local;  // this rank's experts
  bool ties = false;     // router rows repeated every 5 experts: equal logits, the lower id first
};

void PrintTo(const GateRouteCase& c, std::ostream* os) {
  *os << c.tokens << " tokens, top-" << c.k << " of " << c.experts << ", hidden " << c.hidden << ", inter "
      << c.inter << ", experts [" << c.first << ", " << c.first + c.local << ")" << (c.ties ? ", tied rows" : "");
}

constexpr float kEps = 1e-6f;

struct Inputs {
  Tensor residual, norm, router, out0;  // f32 host
  std::vector<Tensor> gate_up, down;    // f32 host, bf16 values
  explicit Inputs(const GateRouteCase& c) {
    std::mt19937 rng(static_cast<uint32_t>(c.tokens * 977 + c.experts * 31 + c.hidden + c.k));
    residual = random_values({c.tokens, c.hidden}, rng, 3.0f);
    norm = random_values({c.hidden}, rng, 0.3f, 1.0f);
    router = random_values({c.experts, c.hidden}, rng, 1.0f / std::sqrt(static_cast<float>(c.hidden)));
    if (c.ties) tie_router_rows(router, c.experts, c.hidden);
    out0 = random_values({c.tokens, c.hidden}, rng, 0.5f);
    for (int64_t e = 0; e < c.experts; ++e) {
      gate_up.push_back(random_values({2 * c.inter, c.hidden}, rng, 1.0f / std::sqrt(static_cast<float>(c.hidden))));
      down.push_back(random_values({c.hidden, c.inter}, rng, 1.0f / std::sqrt(static_cast<float>(c.inter))));
    }
  }
};

struct Outputs {
  std::vector<float> normed, logits, weights, out;
  std::vector<int32_t> ids;
};

// One backend's tensors of the op: inputs uploaded, outputs poisoned.
struct Call {
  Tensor residual, norm, router, normed, logits, ids, weights, out;
  MoeExpertWeights w;
  MoeScratch scratch;
  Call(Backend& b, const Inputs& in, const GateRouteCase& c) {
    residual = upload_f32(b, in.residual);
    norm = b.upload_weight(in.norm, true);
    router = upload(b, in.router);
    normed = b.empty(b.activation_dtype(), {c.tokens, c.hidden});
    logits = b.empty(DType::kF32, {c.tokens, c.experts});
    ids = b.empty(DType::kI32, {c.tokens, c.k});
    weights = b.empty(DType::kF32, {c.tokens, c.k});
    out = upload_f32(b, in.out0);
    for (const Tensor* t : {&normed, &logits, &ids, &weights}) b.fill_bytes(*t, 0xFF);
    w.first_expert = c.first;
    w.num_experts = c.experts;
    for (int64_t e = c.first; e < c.first + c.local; ++e) {
      w.gate_up.push_back(upload(b, in.gate_up[e]));
      w.down.push_back(upload(b, in.down[e]));
    }
    scratch = b.allocate_moe_scratch(c.tokens, c.hidden, c.inter, c.k, c.local);
  }
  void run(Backend& b, bool renormalize) const {
    b.rms_norm_moe_experts_add(NormPrologue{residual, norm, kEps, normed}, router, logits, renormalize, ids, weights, w,
                               scratch, out, Activation::kSilu);
  }
  Outputs download_all(Backend& b) const {
    Outputs o{download(b, normed), download(b, logits), download(b, weights), download(b, out), {}};
    o.ids.resize(static_cast<size_t>(ids.numel()));
    b.copy_to_host(o.ids.data(), ids);
    return o;
  }
};

// The CPU's route on `logits` (the GPU's own) gives `o`'s ids and weights.
void expect_route_of(Backend& cpu, const std::vector<float>& logits, const GateRouteCase& c, bool renormalize,
                     const Outputs& o, const std::string& what) {
  cuda_test::expect_route_of(cpu, logits, c.tokens, c.experts, c.k, renormalize, o.ids, o.weights, what);
}

// What the GPU added to out0, against the CPU's moe_experts_add of the GPU's normed rows, ids and
// weights (a near-tie of the two backends' logits may pick other experts; the route is checked
// above): bf16 roundings of act(gate) * up and of each expert's output, up to 1.5% of the largest
// value added (as CudaMoeExperts).
void expect_added_close(Backend& cpu, const Outputs& gpu, const Inputs& in, const GateRouteCase& c,
                        const std::string& what) {
  Tensor x = host_tensor(DType::kF32, {c.tokens, c.hidden});
  std::copy(gpu.normed.begin(), gpu.normed.end(), x.ptr<float>());
  const Call ref(cpu, in, c);
  cpu.moe_experts_add(upload_f32(cpu, x), ref.w, upload_i32(cpu, gpu.ids, {c.tokens, c.k}),
                      upload_f32(cpu, [&] {
                        Tensor w = host_tensor(DType::kF32, {c.tokens, c.k});
                        std::copy(gpu.weights.begin(), gpu.weights.end(), w.ptr<float>());
                        return w;
                      }()),
                      ref.scratch, ref.out, Activation::kSilu);
  std::vector<float> g = gpu.out, r = download(cpu, ref.out);
  double ref_max = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    g[i] -= in.out0.ptr<float>()[i];
    r[i] -= in.out0.ptr<float>()[i];
    ref_max = std::max(ref_max, std::abs(static_cast<double>(r[i])));
  }
  expect_close(g, r, 2e-5, 0.015 * ref_max + 1e-3, what);
}

class CudaMoeRouteInGate : public ::testing::TestWithParam<GateRouteCase> {};

TEST_P(CudaMoeRouteInGate, MatchesTheRouteKernelAndTheCpu) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  const GateRouteCase c = GetParam();
  const Inputs in(c);
  Backends on = backends_with("MINIVLLM_MOE_ROUTE_IN_GATE", "1");
  Backends off = backends_with("MINIVLLM_MOE_ROUTE_IN_GATE", "0");
  for (const bool renormalize : {true, false}) {
    const std::string tag = ::testing::PrintToString(c) + (renormalize ? ", renormalized" : "");
    const Call gpu_call(*on.gpu, in, c), off_call(*off.gpu, in, c);
    gpu_call.run(*on.gpu, renormalize);
    off_call.run(*off.gpu, renormalize);
    const Outputs gpu = gpu_call.download_all(*on.gpu);
    const Outputs route_kernel = off_call.download_all(*off.gpu);
    EXPECT_EQ(gpu.logits, route_kernel.logits) << tag << ": logits";
    EXPECT_EQ(gpu.ids, route_kernel.ids) << tag << ": ids against the norm-route launch's";
    if (renormalize) {  // the same float arithmetic: the same bits
      EXPECT_EQ(gpu.weights, route_kernel.weights) << tag << ": weights against the norm-route launch's";
      EXPECT_EQ(gpu.out, route_kernel.out) << tag << ": out against the route in the norm-route launch";
    } else {  // the softmax's denominator summed in another order
      expect_close(gpu.weights, route_kernel.weights, 1e-12, 1e-6, tag + ": weights against the norm-route launch's");
      expect_close(gpu.out, route_kernel.out, 1e-10, 1e-4, tag + ": out against the route in the norm-route launch");
    }
    expect_route_of(*on.cpu, gpu.logits, c, renormalize, gpu, tag + ", the gemv's route");
    expect_added_close(*on.cpu, gpu, in, c, tag + ": added, against the CPU");
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaMoeRouteInGate,
                         ::testing::Values(GateRouteCase{1, 128, 8, 2048, 64, 0, 128},  // Qwen3-30B-A3B's route
                                           GateRouteCase{3, 60, 4, 1032, 40, 0, 60},
                                           GateRouteCase{8, 128, 8, 264, 24, 64, 64},  // a rank's half
                                           GateRouteCase{2, 9, 9, 72, 16, 0, 9}, GateRouteCase{4, 8, 2, 520, 48, 0, 8},
                                           GateRouteCase{5, 33, 1, 136, 8, 0, 33},
                                           GateRouteCase{2, 128, 8, 2048, 32, 0, 128, true},
                                           GateRouteCase{1, 61, 9, 1032, 16, 0, 61, true}),
                         [](const auto& info) {
                           const GateRouteCase& c = info.param;
                           std::string name = "t";
                           name += std::to_string(c.tokens) + "_e" + std::to_string(c.experts) + "_k" +
                                   std::to_string(c.k) + "_h" + std::to_string(c.hidden) + "_i" +
                                   std::to_string(c.inter) + "_from" + std::to_string(c.first) +
                                   (c.ties ? "_ties" : "");
                           return name;
                         });

// The gate/up gemv launched directly with its route, against the same gemv given the route kernel's
// ids: the same activations bit for bit, and the same ids and weights written.
TEST(CudaMoeRouteInGateKernel, LaunchedDirectlyMatchesTheRouteKernel) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  auto gpu = make_cuda_backend(0);
  for (const GateRouteCase& c : {GateRouteCase{1, 128, 8, 2048, 64, 0, 128}, GateRouteCase{7, 60, 4, 1032, 40, 0, 60},
                                 GateRouteCase{3, 128, 8, 264, 24, 64, 64, true}}) {
    const std::string tag = ::testing::PrintToString(c);
    const Inputs in(c);
    std::mt19937 rng(7);
    const Tensor x = upload(*gpu, random_values({c.tokens, c.hidden}, rng));
    Tensor logits_host = random_values({c.tokens, c.experts}, rng, 2.0f);
    if (c.ties) {
      for (int64_t i = 0; i < logits_host.numel(); ++i) logits_host.ptr<float>()[i] = std::round(logits_host.ptr<float>()[i]);
    }
    const Tensor logits = upload_f32(*gpu, logits_host);
    const Call call(*gpu, in, c);
    cuda::MoeExpertTable table{};
    for (int64_t e = 0; e < c.local; ++e) table.w[e] = call.w.gate_up[e].data();
    cuda::MoeShape s{c.tokens, c.k, c.hidden, c.inter, static_cast<int>(c.first), static_cast<int>(c.local)};
    Tensor ids = gpu->empty(DType::kI32, {c.tokens, c.k}), weights = gpu->empty(DType::kF32, {c.tokens, c.k});
    Tensor act_ref = gpu->empty(DType::kBF16, {c.tokens * c.k, c.inter});
    Tensor act = gpu->empty(DType::kBF16, {c.tokens * c.k, c.inter});
    const std::initializer_list<const Tensor*> zeroed{&ids, &weights, &act_ref, &act, &call.ids, &call.weights};
    for (const Tensor* t : zeroed) gpu->fill_bytes(*t, 0);
    gpu->moe_route(logits, true, ids, weights);
    gpu->synchronize();
    cuda::launch_moe_gemv_act_mul(x.data(), ids.ptr<int32_t>(), table, s, Activation::kSilu, act_ref.data(), nullptr);
    const cuda::MoeGateRoute route{logits.ptr<float>(), static_cast<int>(c.experts), true, call.ids.ptr<int32_t>(),
                                   call.weights.ptr<float>()};
    cuda::launch_moe_gemv_act_mul(x.data(), nullptr, table, s, Activation::kSilu, act.data(), nullptr, &route);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<int32_t> want_ids(static_cast<size_t>(ids.numel())), got_ids(want_ids.size());
    gpu->copy_to_host(want_ids.data(), ids);
    gpu->copy_to_host(got_ids.data(), call.ids);
    EXPECT_EQ(got_ids, want_ids) << tag << ": ids";
    expect_close(download(*gpu, call.weights), download(*gpu, weights), 1e-12, 1e-6, tag + ": weights");
    // Rows of pairs routed to another rank stay unwritten (zero) in both.
    expect_close(download(*gpu, act), download(*gpu, act_ref), 0.0, 0.0, tag + ": act");
  }
}

// Captured once and replayed: the same bits as the eager call.
TEST(CudaMoeRouteInGateGraph, ReplayEqualsEager) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends on = backends_with("MINIVLLM_MOE_ROUTE_IN_GATE", "1");
  Backend& gpu = *on.gpu;
  const GateRouteCase c{3, 128, 8, 2048, 32, 0, 128};
  const Inputs in(c);
  const Call call(gpu, in, c);
  call.run(gpu, true);
  const Outputs eager = call.download_all(gpu);
  for (const Tensor* t : {&call.logits, &call.ids, &call.weights}) gpu.fill_bytes(*t, 0xFF);
  gpu.copy_from_host(call.out, in.out0.ptr<float>());
  const int graph = gpu.capture_graph([&] { call.run(gpu, true); });
  gpu.replay_graph(graph);
  const Outputs replay = call.download_all(gpu);
  EXPECT_EQ(replay.logits, eager.logits);
  EXPECT_EQ(replay.ids, eager.ids);
  EXPECT_EQ(replay.weights, eager.weights);
  EXPECT_EQ(replay.out, eager.out);
}

// The seam end to end: a small Qwen3-MoE (head_dim 64, which the CUDA attention takes; two sparse
// layers of 16 experts around a dense one, top-4, renormalized; dummy weights) decoded greedily
// through the engine's CUDA graphs with the route in the gate/up gemv and with it in the norm-route
// launch: the same tokens (the same weights' bits, so the same sums).
TEST(CudaMoeRouteInGateEngine, GreedyEqualsTheRouteInTheNormRouteLaunch) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("minivllm_route_in_gate_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
    "hidden_size": 256, "intermediate_size": 384, "moe_intermediate_size": 64, "num_experts": 16,
    "num_experts_per_tok": 4, "norm_topk_prob": true, "decoder_sparse_step": 1, "mlp_only_layers": [1],
    "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
    "hidden_act": "silu", "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "max_position_embeddings": 512,
    "vocab_size": 512, "tie_word_embeddings": false, "bos_token_id": 1, "eos_token_id": 2})";
  auto greedy_ids = [&](const char* knob) {
    EngineConfig c;
    c.model = dir.string();
    c.load_format = "dummy";
    c.device = "cuda";
    c.block_size = 16;
    c.max_num_seqs = 4;
    c.max_model_length = 256;
    c.max_num_batched_tokens = 256;
    c.num_kvcache_blocks = 64;
    LLMEngine engine = test::with_env({{"MINIVLLM_MOE_ROUTE_IN_GATE", knob}}, [&] { return LLMEngine(c); });
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = 24;
    p.ignore_eos = true;
    const std::vector<std::vector<int32_t>> prompts{{1, 5, 9, 13, 17, 21}, {2, 4, 8}, {30, 31}};
    std::vector<std::vector<int32_t>> ids;
    for (const auto& o : engine.generate(prompts, p)) ids.push_back(o.token_ids);
    return ids;
  };
  const auto on = greedy_ids("1"), off = greedy_ids("0");
  std::filesystem::remove_all(dir);
  ASSERT_EQ(on.size(), 3u);
  std::set<int32_t> distinct;
  for (const auto& seq : on) distinct.insert(seq.begin(), seq.end());
  EXPECT_GE(distinct.size(), 8u) << "the dummy model's greedy output collapsed onto a few tokens";
  EXPECT_EQ(on, off);
}

}  // namespace
}  // namespace minivllm::cuda_test
