// The CUDA backend's mixture-of-experts ops (cuda_moe.cc, moe*.cu) against the CPU backend:
// routing (the same ids, ties included, and weights to 1e-6), and moe_experts_add on odd shapes:
// 3 to 128 experts, top-1/2/8, tokens that route unevenly and experts that get none, T from 1 to
// 300 through both the decode gemvs and the grouped GEMMs (each forced by MINIVLLM_MOE_GEMV_TOKENS
// at the sizes the other takes), batches larger than the scratch (chunks), a rank's range of experts
// (expert parallelism), a bf16 out (the tensor-parallel partial), a CUDA graph of route +
// experts_add replayed equal to eager, and the shapes and dtypes the kernels refuse.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ostream>
#include <functional>

#include "common/check.h"
#include "cuda_test_util.h"

namespace minivllm::cuda_test {
namespace {

// The gemv threshold and the grouped GEMMs' tile rule are read when a backend is made: a GPU
// backend with MINIVLLM_MOE_GEMV_TOKENS (and MINIVLLM_MOE_SMALL_TILE_ROWS) set.
std::unique_ptr<Backend> gpu_backend_with_gemv_tokens(const char* tokens, const char* small_tile_rows = "0",
                                                      const char* gate_chunks = "2", const char* down_rows = "4") {
  const test::ScopedEnv env({{"MINIVLLM_MOE_GEMV_TOKENS", tokens},
                             {"MINIVLLM_MOE_SMALL_TILE_ROWS", small_tile_rows},
                             {"MINIVLLM_MOE_GATE_CHUNKS", gate_chunks},
                             {"MINIVLLM_MOE_DOWN_ROWS", down_rows},
                             // one token too: each setting runs its rows everywhere
                             {"MINIVLLM_MOE_DOWN_ROWS_ONE", down_rows}});
  return make_cuda_backend(0);
}

std::vector<int32_t> download_i32(Backend& b, const Tensor& t) {
  std::vector<int32_t> v(static_cast<size_t>(t.numel()));
  b.copy_to_host(v.data(), t);
  return v;
}

Tensor upload_values(Backend& b, const std::vector<float>& v, const std::vector<int64_t>& shape, bool keep_f32) {
  Tensor h = host_tensor(DType::kF32, shape);
  std::copy(v.begin(), v.end(), h.ptr<float>());
  return b.upload_weight(h, keep_f32);
}

// ---- routing ----

struct RouteCase {
  int64_t tokens, experts;
  int k;
};

// gtest (and the ctest names gtest_discover_tests makes) print a parameter without PrintTo as its
// raw bytes, padding included.
void PrintTo(const RouteCase& c, std::ostream* os) {
  *os << "tokens " << c.tokens << ", experts " << c.experts << ", top-" << c.k;
}

class CudaMoeRoute : public ::testing::TestWithParam<RouteCase> {};

// Both GPU kernels: a CTA a token (the default, MINIVLLM_MOE_ROUTE_CTA, up to 64 tokens; past that
// the warp kernel runs whatever the knob), and a warp a token (the knob at 0).
TEST_P(CudaMoeRoute, SameExpertsAndWeightsAsTheCpu) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  const auto [tokens, experts, k] = GetParam();
  Backends b = backends_with("MINIVLLM_MOE_ROUTE_CTA", "1");
  Backends warp_b = backends_with("MINIVLLM_MOE_ROUTE_CTA", "0");
  Backend* warp = warp_b.gpu.get();
  std::mt19937 rng(static_cast<uint32_t>(tokens * 131 + experts * 7 + k));
  for (const bool ties : {false, true}) {  // whole-number logits: many equal ones, the lower id first
    Tensor logits = random_values({tokens, experts}, rng, 2.0f);
    if (ties) {
      for (int64_t i = 0; i < logits.numel(); ++i) logits.ptr<float>()[i] = std::round(logits.ptr<float>()[i]);
    }
    for (const bool renormalize : {false, true}) {
      Tensor ic = b.cpu->empty(DType::kI32, {tokens, k}), wc = b.cpu->empty(DType::kF32, {tokens, k});
      b.cpu->moe_route(upload_f32(*b.cpu, logits), renormalize, ic, wc);
      for (Backend* gpu : {b.gpu.get(), warp}) {
        const std::string tag = std::string(gpu == warp ? " (a warp a token)" : " (a CTA a token)") +
                                (ties ? " ties" : "") + (renormalize ? " renormalized" : "");
        Tensor ig = gpu->empty(DType::kI32, {tokens, k}), wg = gpu->empty(DType::kF32, {tokens, k});
        gpu->fill_bytes(ig, 0xFF);
        gpu->fill_bytes(wg, 0xFF);
        gpu->moe_route(upload_f32(*gpu, logits), renormalize, ig, wg);
        EXPECT_EQ(download_i32(*gpu, ig), download_i32(*b.cpu, ic)) << "ids" << tag;
        expect_close(download(*gpu, wg), download(*b.cpu, wc), 1e-12, 1e-6, "weights" + tag);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaMoeRoute,
                         ::testing::Values(RouteCase{1, 3, 1}, RouteCase{2, 8, 2}, RouteCase{5, 60, 8},
                                           RouteCase{37, 128, 8}, RouteCase{300, 128, 1}, RouteCase{8, 33, 2},
                                           RouteCase{7, 512, 8}, RouteCase{3, 9, 9},
                                           // past 32 choices: the probabilities in rounds of 32
                                           RouteCase{4, 100, 40}, RouteCase{2, 64, 64}),
                         [](const auto& info) {
                           // Appended, not "t" + ...: GCC 12's -Wrestrict misreads the inlined insert.
                           std::string name = "t";
                           name += std::to_string(info.param.tokens) + "_e" + std::to_string(info.param.experts) +
                                   "_k" + std::to_string(info.param.k);
                           return name;
                         });

// Routing by a score bias (Backend::moe_route_biased: GLM-4.5's sigmoid scores, ERNIE 4.5's softmax
// ones), the CTA-a-token kernel against the CPU: one group and several (topk_group of n_group: 1 of 2,
// 4 of 8 over 256 experts as DeepSeek-V3, 1 of 1), top-1 to top-9, the weights renormalised or not and
// scaled, whole-number logits (ties: the lower id first, groups too), up to 300 tokens.
TEST(CudaMoeRouteBiased, SameExpertsAndWeightsAsTheCpu) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  struct Case {
    int64_t tokens, experts;
    int k, groups, topk_groups;
  };
  for (const Case& c : {Case{1, 8, 2, 2, 1}, Case{7, 128, 8, 1, 1}, Case{33, 160, 8, 1, 1}, Case{5, 256, 8, 8, 4},
                        Case{300, 64, 6, 8, 3}, Case{2, 9, 9, 1, 1}, Case{3, 12, 1, 3, 2}}) {
    std::mt19937 rng(static_cast<uint32_t>(c.tokens * 17 + c.experts));
    for (int variant = 0; variant < 4; ++variant) {  // sigmoid or softmax scores; ties or not
      const bool sigmoid = variant < 2, ties = variant % 2 == 1;
      Tensor logits = random_values({c.tokens, c.experts}, rng, 2.0f);
      Tensor bias = random_values({c.experts}, rng, sigmoid ? 0.3f : 0.3f / static_cast<float>(c.experts));
      if (ties) {
        for (int64_t i = 0; i < logits.numel(); ++i) logits.ptr<float>()[i] = std::round(logits.ptr<float>()[i]);
        for (int64_t i = 0; i < bias.numel(); ++i) bias.ptr<float>()[i] = 0.0f;
      }
      for (const bool renormalize : {false, true}) {
        std::string tag = "t";  // appended: see the suite above on GCC 12
        tag += std::to_string(c.tokens) + " e" + std::to_string(c.experts) + " k" + std::to_string(c.k) + " groups " +
               std::to_string(c.topk_groups) + "/" + std::to_string(c.groups) + (ties ? " ties" : "") +
               (renormalize ? " renorm" : "") + (sigmoid ? " sigmoid" : " softmax");
        Tensor ic = b.cpu->empty(DType::kI32, {c.tokens, c.k}), wc = b.cpu->empty(DType::kF32, {c.tokens, c.k});
        b.cpu->moe_route_biased(upload_f32(*b.cpu, logits), upload_f32(*b.cpu, bias), sigmoid, c.groups,
                                c.topk_groups, renormalize, 2.5f, ic, wc);
        Tensor ig = b.gpu->empty(DType::kI32, {c.tokens, c.k}), wg = b.gpu->empty(DType::kF32, {c.tokens, c.k});
        b.gpu->fill_bytes(ig, 0xFF);
        b.gpu->fill_bytes(wg, 0xFF);
        b.gpu->moe_route_biased(upload_f32(*b.gpu, logits), upload_f32(*b.gpu, bias), sigmoid, c.groups,
                                c.topk_groups, renormalize, 2.5f, ig, wg);
        EXPECT_EQ(download_i32(*b.gpu, ig), download_i32(*b.cpu, ic)) << "ids " << tag;
        expect_close(download(*b.gpu, wg), download(*b.cpu, wc), 1e-12, 2e-6, "weights " + tag);
      }
    }
  }
}

// ---- the experts ----

// Random bf16-valued experts, [2I, H] gate_up and [H, I] down, uploaded to either backend.
struct Experts {
  int64_t hidden, inter;
  std::vector<Tensor> gate_up, down;  // host f32
  Experts(int64_t e, int64_t h, int64_t i, std::mt19937& rng) : hidden(h), inter(i) {
    for (int64_t x = 0; x < e; ++x) {
      gate_up.push_back(random_values({2 * i, h}, rng, 1.0f / std::sqrt(static_cast<float>(h))));
      down.push_back(random_values({h, i}, rng, 1.0f / std::sqrt(static_cast<float>(i))));
    }
  }
  MoeExpertWeights upload(Backend& b, int64_t first, int64_t count) const {
    MoeExpertWeights w;
    w.first_expert = first;
    w.num_experts = static_cast<int64_t>(gate_up.size());
    for (int64_t e = first; e < first + count; ++e) {
      w.gate_up.push_back(cuda_test::upload(b, gate_up[e]));
      w.down.push_back(cuda_test::upload(b, down[e]));
    }
    return w;
  }
};

struct ExpertCase {
  int64_t tokens, experts;
  int k;
  int64_t hidden, inter;
  int64_t first, local;  // this rank's experts
  bool skew;             // one expert takes nearly every token
};

std::string case_name(const ExpertCase& c) {
  std::string name = "t";  // appended (see the route cases' names)
  return name + std::to_string(c.tokens) + "_e" + std::to_string(c.experts) + "_k" + std::to_string(c.k) + "_h" +
         std::to_string(c.hidden) + "_i" + std::to_string(c.inter) + "_first" + std::to_string(c.first) + "_n" +
         std::to_string(c.local) + (c.skew ? "_skew" : "");
}

void PrintTo(const ExpertCase& c, std::ostream* os) { *os << case_name(c); }

// Logits that favour the low experts (the high ones may get no token); with skew, expert
// experts / 2 leads every row by far.
Tensor routing_logits(const ExpertCase& c, std::mt19937& rng) {
  Tensor l = random_values({c.tokens, c.experts}, rng, 1.0f);
  for (int64_t t = 0; t < c.tokens; ++t) {
    for (int64_t e = 0; e < c.experts; ++e) {
      float& v = l.ptr<float>()[t * c.experts + e];
      v -= 0.3f * static_cast<float>(e);
      if (c.skew && e == c.experts / 2) v += 100.0f;
    }
  }
  return l;
}

// What the case adds into a residual, on the CPU and on a GPU backend (out f32, or bf16), routed
// once on the CPU so that both see the same ids and weights. gpu_scratch_tokens: the scratch's
// rows (fewer than T: the batch goes through in chunks).
struct Outputs {
  std::vector<float> cpu, gpu;
  std::vector<float> out0;  // the residual before the add
};

Outputs run_case(Backend& cpu, Backend& gpu, const ExpertCase& c, bool out_f32, int64_t gpu_scratch_tokens,
                 uint32_t seed) {
  std::mt19937 rng(seed);
  const Experts ex(c.experts, c.hidden, c.inter, rng);
  const Tensor x = random_values({c.tokens, c.hidden}, rng);
  const Tensor out0 = random_values({c.tokens, c.hidden}, rng, 0.5f);  // bf16 values: exact in either out
  Tensor ids = cpu.empty(DType::kI32, {c.tokens, c.k}), weights = cpu.empty(DType::kF32, {c.tokens, c.k});
  cpu.moe_route(upload_f32(cpu, routing_logits(c, rng)), /*renormalize=*/true, ids, weights);
  const std::vector<int32_t> idv = download_i32(cpu, ids);
  const std::vector<float> wv = download(cpu, weights);

  Outputs o;
  Tensor oc = upload_f32(cpu, out0);
  cpu.moe_experts_add(upload(cpu, x), ex.upload(cpu, c.first, c.local), ids, weights,
                      cpu.allocate_moe_scratch(c.tokens, c.hidden, c.inter, c.k, c.local), oc, Activation::kSilu);
  o.cpu = download(cpu, oc);

  Tensor og = out_f32 ? upload_f32(gpu, out0) : upload(gpu, out0);
  MoeScratch s = gpu.allocate_moe_scratch(gpu_scratch_tokens, c.hidden, c.inter, c.k, c.local);
  gpu.fill_bytes(s.act, 0xFF);  // NaN: a row read before it is written shows up
  gpu.fill_bytes(s.y, 0xFF);
  gpu.moe_experts_add(upload(gpu, x), ex.upload(gpu, c.first, c.local), upload_i32(gpu, idv, {c.tokens, c.k}),
                      upload_values(gpu, wv, {c.tokens, c.k}, true), s, og, Activation::kSilu);
  o.gpu = download(gpu, og);
  o.out0.assign(out0.ptr<float>(), out0.ptr<float>() + out0.numel());
  for (int64_t i = 0; i < out0.numel(); ++i) {  // compare what was added
    o.cpu[i] -= out0.ptr<float>()[i];
    o.gpu[i] -= out0.ptr<float>()[i];
  }
  return o;
}

// The GPU rounds act(gate) * up and each expert's output to bf16, 2^-9 of a value each. The
// experts' outputs can exceed their weighted sum, and the act roundings add up along the down
// projection, so the bound is 1.5% of the largest value added (the H200's worst case is in
// docs/PERFORMANCE.md; a wrong or missing expert errs by the whole value). A bf16 out also rounds
// out0 + added to bf16, 2^-9 of the final value, which out0 (not the sum) dominates when few slots
// are local. The CPU keeps fp32.
void expect_matches(const Outputs& o, bool out_f32, const std::string& what) {
  double ref_max = 0, final_max = 0, ref_sq = 0, final_sq = 0;
  for (size_t i = 0; i < o.cpu.size(); ++i) {
    const double f = static_cast<double>(o.cpu[i]) + o.out0[i];
    ref_max = std::max(ref_max, std::abs(static_cast<double>(o.cpu[i])));
    final_max = std::max(final_max, std::abs(f));
    ref_sq += static_cast<double>(o.cpu[i]) * o.cpu[i];
    final_sq += f * f;
  }
  const double out_round = out_f32 ? 0.0 : std::ldexp(1.0, -9);
  const double nmse_tol = 2e-5 + (ref_sq > 0 ? out_round * out_round * final_sq / ref_sq : 0.0);
  const double abs_tol = 0.015 * ref_max + out_round * final_max + 1e-3;
  expect_close(o.gpu, o.cpu, nmse_tol, abs_tol, what);
}

class CudaMoeExperts : public ::testing::TestWithParam<ExpertCase> {};

// Both paths at every size (the threshold moved to 0 and to 8), into an fp32 residual and a bf16 out;
// the grouped one with 64-row and with 32-row tiles, the gemv one with 2 and 4 chunks of a gate/up row
// in flight a lane (MINIVLLM_MOE_GATE_CHUNKS) and 2, 4 and 8 down rows a CTA (MINIVLLM_MOE_DOWN_ROWS[_ONE]).
TEST_P(CudaMoeExperts, MatchTheCpuOnBothPaths) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  const ExpertCase c = GetParam();
  auto cpu = make_cpu_backend();
  const bool gemv_possible = c.tokens <= 8;
  for (const std::string setting : {"gemv", "gemv4", "gemv-down2", "gemv-down8", "grouped"}) {
    const bool gemv = setting != "grouped";
    if (gemv && !gemv_possible) continue;
    for (const char* small_tile_rows : {"0", "1000000"}) {
      if (gemv && std::string(small_tile_rows) != "0") continue;  // no tiles on the gemv path
      const char* down_rows = setting == "gemv-down2" ? "2" : setting == "gemv-down8" ? "8" : "4";
      auto gpu =
          gpu_backend_with_gemv_tokens(gemv ? "8" : "0", small_tile_rows, setting == "gemv4" ? "4" : "2", down_rows);
      const std::string path = gemv ? setting : std::string(small_tile_rows) == "0" ? "grouped64" : "grouped32";
      for (const bool out_f32 : {true, false}) {
        const Outputs o = run_case(*cpu, *gpu, c, out_f32, c.tokens, 17);
        expect_matches(o, out_f32, case_name(c) + " " + path + (out_f32 ? " f32" : " bf16"));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaMoeExperts,
    ::testing::Values(ExpertCase{1, 8, 2, 64, 32, 0, 8, false}, ExpertCase{2, 3, 1, 72, 24, 0, 3, false},
                      ExpertCase{5, 60, 8, 136, 40, 0, 60, false}, ExpertCase{8, 32, 8, 2048, 768, 0, 32, false},
                      ExpertCase{8, 8, 2, 64, 16, 4, 4, false}, ExpertCase{37, 128, 8, 256, 96, 0, 128, false},
                      ExpertCase{37, 128, 8, 256, 96, 64, 64, false}, ExpertCase{37, 8, 2, 264, 104, 0, 8, true},
                      ExpertCase{300, 60, 4, 512, 136, 0, 60, false}, ExpertCase{300, 8, 2, 64, 16, 0, 8, true},
                      ExpertCase{300, 32, 8, 2048, 768, 8, 16, false}, ExpertCase{5, 128, 8, 256, 96, 0, 128, true},
                      ExpertCase{300, 3, 1, 80, 8, 1, 1, false}),
    [](const auto& info) { return case_name(info.param); });

// A batch larger than the scratch goes through in chunks; the result is the same.
TEST(CudaMoeExpertsChunks, ABatchLargerThanTheScratch) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend(0);
  const ExpertCase c{300, 60, 4, 136, 40, 0, 60, false};
  const Outputs whole = run_case(*cpu, *gpu, c, true, c.tokens, 23);
  const Outputs chunked = run_case(*cpu, *gpu, c, true, 64, 23);  // 5 chunks, the last of 44 tokens
  expect_matches(chunked, true, "300 tokens in chunks of 64");
  expect_close(chunked.gpu, whole.gpu, 0.0, 0.0, "chunked equals whole");  // rows never depend on their batch
}

// Expert parallelism: two ranks' halves add up to the whole (each rank's pairs routed elsewhere add nothing).
TEST(CudaMoeExpertsParallel, TwoRanksOfExpertsAddUpToAll) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend(0);
  for (int64_t tokens : {int64_t{3}, int64_t{37}}) {
    const ExpertCase all{tokens, 16, 4, 64, 32, 0, 16, false};
    ExpertCase lo = all, hi = all;
    lo.local = hi.local = 8;
    hi.first = 8;
    const Outputs o = run_case(*cpu, *gpu, all, true, tokens, 29);
    const Outputs a = run_case(*cpu, *gpu, lo, true, tokens, 29), b = run_case(*cpu, *gpu, hi, true, tokens, 29);
    std::vector<float> sum(a.gpu.size());
    for (size_t i = 0; i < sum.size(); ++i) sum[i] = a.gpu[i] + b.gpu[i];
    expect_close(sum, o.cpu, 2e-5, 0.02, "two ranks, T=" + std::to_string(tokens));
  }
}

// route + experts_add captured once and replayed equals the eager run bit for bit (both paths).
TEST(CudaMoeGraph, ReplayEqualsEager) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  auto gpu = make_cuda_backend(0);
  for (int64_t tokens : {int64_t{5}, int64_t{37}}) {
    std::mt19937 rng(31);
    const int64_t experts = 60, hidden = 136, inter = 40;
    const int k = 4;
    const Experts ex(experts, hidden, inter, rng);
    const MoeExpertWeights w = ex.upload(*gpu, 0, experts);
    const Tensor x = upload(*gpu, random_values({tokens, hidden}, rng));
    const Tensor logits = upload_f32(*gpu, random_values({tokens, experts}, rng));
    const Tensor out0 = random_values({tokens, hidden}, rng);
    Tensor ids = gpu->empty(DType::kI32, {tokens, k}), weights = gpu->empty(DType::kF32, {tokens, k});
    const MoeScratch s = gpu->allocate_moe_scratch(tokens, hidden, inter, k, experts);
    Tensor out = upload_f32(*gpu, out0);
    auto body = [&] {
      gpu->moe_route(logits, true, ids, weights);
      gpu->moe_experts_add(x, w, ids, weights, s, out, Activation::kSilu);
    };
    body();
    const std::vector<float> eager = download(*gpu, out);
    gpu->copy_from_host(out, out0.data());
    gpu->fill_bytes(ids, 0xFF);
    gpu->fill_bytes(weights, 0xFF);
    const int graph = gpu->capture_graph(body);
    gpu->replay_graph(graph);
    expect_close(download(*gpu, out), eager, 0.0, 0.0, "graph replay, T=" + std::to_string(tokens));
  }
}

// Shapes and dtypes the kernels do not take fail with an error that names them.
TEST(CudaMoeRefusals, OddWidthsAndNonBf16ExpertsAreNamed) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  auto gpu = make_cuda_backend(0);
  std::mt19937 rng(37);
  auto expect_error = [&](const std::function<void()>& f, const std::string& needle) {
    try {
      f();
      FAIL() << "no error, expected one naming " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const int64_t tokens = 4, experts = 4;
  const int k = 2;
  Tensor ids = upload_i32(*gpu, {0, 1, 2, 3, 1, 2, 3, 0}, {tokens, k});
  Tensor weights = upload_values(*gpu, std::vector<float>(8, 0.5f), {tokens, k}, true);
  // hidden 20 (rows of 40 bytes), then an expert width of 12
  for (const auto& [hidden, inter] : std::vector<std::pair<int64_t, int64_t>>{{20, 16}, {64, 12}}) {
    const Experts ex(experts, hidden, inter, rng);
    Tensor x = upload(*gpu, random_values({tokens, hidden}, rng));
    Tensor out = gpu->empty(DType::kF32, {tokens, hidden});
    expect_error([&] {
      gpu->moe_experts_add(x, ex.upload(*gpu, 0, experts), ids, weights,
                           gpu->allocate_moe_scratch(tokens, hidden, inter, k, experts), out, Activation::kSilu);
    }, "multiple of 8");
  }
  {  // FP8 experts
    MoeExpertWeights w;
    w.num_experts = experts;
    for (int64_t e = 0; e < experts; ++e) {
      w.gate_up.push_back(gpu->empty(DType::kF8E4M3, {32, 64}));
      w.down.push_back(gpu->empty(DType::kF8E4M3, {64, 16}));
    }
    Tensor x = upload(*gpu, random_values({tokens, 64}, rng));
    Tensor out = gpu->empty(DType::kF32, {tokens, 64});
    expect_error([&] {
      gpu->moe_experts_add(x, w, ids, weights, gpu->allocate_moe_scratch(tokens, 64, 16, k, experts), out,
                           Activation::kSilu);
    }, "bf16 experts");
  }
  {  // more experts than the routing kernel holds
    Tensor logits = gpu->empty(DType::kF32, {1, 513});
    Tensor one_id = gpu->empty(DType::kI32, {1, 1}), one_w = gpu->empty(DType::kF32, {1, 1});
    expect_error([&] { gpu->moe_route(logits, true, one_id, one_w); }, "512");
  }
}

}  // namespace
}  // namespace minivllm::cuda_test
