// The CPU's mixture-of-experts kernels (cpu_moe.h, CpuBackend::moe_route / moe_experts_add) on odd
// shapes: expert counts 1 to 128, top-1 to top-E, tokens that route unevenly, experts that get no
// token, a rank's range of experts (expert parallelism) and a rank's slice of every expert's width
// (tensor parallelism), each against a double-precision loop written from transformers'
// Qwen3MoeSparseMoeBlock (softmax over all experts, top-k, renormalised when norm_topk_prob).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "backend/cpu/cpu_moe.h"
#include "cpu_test_util.h"

namespace minivllm::cpu_test {
namespace {

struct Routed {
  std::vector<int32_t> ids;
  std::vector<double> weights;
};

// The reference: full softmax in double, a stable sort by probability (lower id first on ties).
Routed route_ref(const std::vector<float>& logits, int64_t tokens, int64_t experts, int k, bool renormalize) {
  Routed r;
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = logits.data() + t * experts;
    const double max = *std::max_element(row, row + experts);
    std::vector<double> p(static_cast<size_t>(experts));
    double sum = 0;
    for (int64_t e = 0; e < experts; ++e) sum += p[e] = std::exp(row[e] - max);
    std::vector<int32_t> order(static_cast<size_t>(experts));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
    double top = 0;
    for (int j = 0; j < k; ++j) top += p[order[j]] / sum;
    for (int j = 0; j < k; ++j) {
      r.ids.push_back(order[j]);
      r.weights.push_back(p[order[j]] / sum / (renormalize ? top : 1.0));
    }
  }
  return r;
}

struct RouteCase {
  int64_t tokens, experts;
  int k;
};

class MoeRouteTest : public ::testing::TestWithParam<RouteCase> {};

TEST_P(MoeRouteTest, TopKAndWeightsMatchTheReference) {
  const auto [tokens, experts, k] = GetParam();
  auto b = make_cpu_backend();
  const auto logits = random_floats(tokens * experts, 11 + static_cast<uint32_t>(experts), -4, 4);
  for (const bool renormalize : {false, true}) {
    Tensor ids = b->empty(DType::kI32, {tokens, k});
    b->fill_bytes(ids, 0xFF);
    Tensor w = poisoned(*b, {tokens, k});
    b->moe_route(upload(*b, logits, {tokens, experts}), renormalize, ids, w);
    const Routed ref = route_ref(logits, tokens, experts, k, renormalize);
    std::vector<int32_t> got(static_cast<size_t>(tokens * k));
    b->copy_to_host(got.data(), ids);
    EXPECT_EQ(got, ref.ids) << "renormalize " << renormalize;
    expect_close(download(*b, w), ref.weights, renormalize ? "renormalised weights" : "weights", 1e-6, 1e-6);
    if (renormalize) {
      const auto wv = download(*b, w);
      for (int64_t t = 0; t < tokens; ++t) {
        EXPECT_NEAR(std::accumulate(wv.begin() + t * k, wv.begin() + (t + 1) * k, 0.0), 1.0, 1e-6) << "row " << t;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, MoeRouteTest,
                         ::testing::Values(RouteCase{1, 1, 1}, RouteCase{1, 8, 2}, RouteCase{7, 3, 3},
                                           RouteCase{33, 60, 4}, RouteCase{5, 128, 8}, RouteCase{129, 8, 1},
                                           RouteCase{2, 9, 9}),
                         [](const auto& info) {
                           return "t" + std::to_string(info.param.tokens) + "_e" + std::to_string(info.param.experts) +
                                  "_k" + std::to_string(info.param.k);
                         });

TEST(MoeRoute, EqualLogitsTakeTheLowerExpertFirst) {
  std::vector<float> logits = {0.5f, 2.0f, 2.0f, -1.0f, 2.0f};
  std::vector<int32_t> ids(3);
  std::vector<float> w(3);
  cpu::moe_topk_softmax(logits.data(), 1, 5, 3, /*renormalize=*/true, ids.data(), w.data());
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2, 4}));
  for (float x : w) EXPECT_NEAR(x, 1.0 / 3, 1e-7);
  EXPECT_THROW(cpu::moe_topk_softmax(logits.data(), 1, 5, 6, true, ids.data(), w.data()), Error);
}

// DeepSeek-V3's routing (GLM-4.5) by hand: 8 experts in 2 groups of 4. Group 1's best two choice values
// (0.881 + 0.622) edge out group 0's (0.8 + 0.7) because of the score bias, so with one group of two its
// experts 7 and 6 are chosen; over both groups (or one group of 8) the best two are 7 and 0. The weights
// are the sigmoid scores without the bias, renormalised, times the scale.
TEST(MoeRouteBiased, SigmoidGroupsAndScoreBiasByHand) {
  const std::vector<float> logits = {0, 0, 0, 0, 1, -1, 0.5f, 2};
  const std::vector<float> bias = {0.3f, 0, 0.2f, 0, -0.5f, 0, 0, 0};
  auto s = [](float x) { return 1.0f / (1.0f + std::exp(-x)); };
  std::vector<int32_t> ids(2);
  std::vector<float> w(2);
  cpu::moe_topk_biased(logits.data(), bias.data(), 1, 8, 2, /*sigmoid=*/true, /*groups=*/2, /*topk_groups=*/1, true,
                       2.5f, ids.data(), w.data());
  EXPECT_EQ(ids, (std::vector<int32_t>{7, 6}));
  EXPECT_NEAR(w[0], 2.5 * s(2) / (s(2) + s(0.5f)), 1e-6);
  EXPECT_NEAR(w[1], 2.5 * s(0.5f) / (s(2) + s(0.5f)), 1e-6);
  for (const auto& [groups, topk] : {std::pair{2, 2}, std::pair{1, 1}}) {
    cpu::moe_topk_biased(logits.data(), bias.data(), 1, 8, 2, true, groups, topk, false, 1.0f, ids.data(), w.data());
    EXPECT_EQ(ids, (std::vector<int32_t>{7, 0})) << groups << " groups";
    EXPECT_FLOAT_EQ(w[0], s(2));  // not renormalised, scale 1: the score itself
    EXPECT_FLOAT_EQ(w[1], s(0));
  }
  // Equal choice values: the lower index first (groups too).
  const std::vector<float> flat(8, 0.0f), no_bias(8, 0.0f);
  cpu::moe_topk_biased(flat.data(), no_bias.data(), 1, 8, 2, true, 2, 1, true, 1.0f, ids.data(), w.data());
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 1}));
  // More experts than the allowed groups hold, and groups that do not divide the experts, are named.
  EXPECT_THROW(cpu::moe_topk_biased(flat.data(), no_bias.data(), 1, 8, 5, true, 2, 1, true, 1, ids.data(), w.data()),
               Error);
  EXPECT_THROW(cpu::moe_topk_biased(flat.data(), no_bias.data(), 1, 8, 2, true, 3, 1, true, 1, ids.data(), w.data()),
               Error);
}

// ERNIE 4.5's form: softmax scores over every expert, the choice by score + bias, the weights the
// scores of the chosen renormalised; against moe_topk_softmax where the bias is zero, and by hand where
// the bias moves the choice.
TEST(MoeRouteBiased, SoftmaxScoresAndScoreBias) {
  const auto logits = random_floats(5 * 12, 3, -3, 3);
  const std::vector<float> zero(12, 0.0f);
  std::vector<int32_t> ids(5 * 3), want_ids(5 * 3);
  std::vector<float> w(5 * 3), want(5 * 3);
  cpu::moe_topk_biased(logits.data(), zero.data(), 5, 12, 3, /*sigmoid=*/false, 1, 1, true, 1.0f, ids.data(), w.data());
  cpu::moe_topk_softmax(logits.data(), 5, 12, 3, true, want_ids.data(), want.data());
  EXPECT_EQ(ids, want_ids);
  for (size_t i = 0; i < w.size(); ++i) EXPECT_NEAR(w[i], want[i], 1e-6) << i;
  const std::vector<float> l = {1.0f, 0.0f, 0.5f}, bias = {0.0f, 0.5f, 0.0f};
  std::vector<int32_t> id(1);
  std::vector<float> wt(1);
  cpu::moe_topk_biased(l.data(), bias.data(), 1, 3, 1, false, 1, 1, false, 1.0f, id.data(), wt.data());
  const double sum = std::exp(0.0) + std::exp(-1.0) + std::exp(-0.5);
  EXPECT_EQ(id[0], 1);  // p = 0.186 + 0.5 beats 0.506
  EXPECT_NEAR(wt[0], std::exp(-1.0) / sum, 1e-7);  // its softmax score, without the bias
}

TEST(MoeGroup, TokensGroupedByExpertInTokenOrderWithEmptyExperts) {
  // 4 tokens, top-2 of 6 experts: expert 0 gets 3 tokens, 3 gets 2, 5 gets 2, 1 one, 2 and 4 none.
  const std::vector<int32_t> ids = {0, 3, 5, 0, 3, 1, 0, 5};
  std::vector<int32_t> offsets(7), entries(8, -7);
  EXPECT_EQ(cpu::moe_group_by_expert(ids.data(), 4, 2, 6, 0, 6, offsets.data(), entries.data()), 8);
  EXPECT_EQ(offsets, (std::vector<int32_t>{0, 3, 4, 4, 6, 6, 8}));
  EXPECT_EQ(entries, (std::vector<int32_t>{0, 3, 6, 5, 1, 4, 2, 7}));  // t * k + j
  // Experts [3, 5) of a rank (expert parallelism): the other ranks' pairs are dropped.
  std::vector<int32_t> off2(3), ent2(8, -7);
  EXPECT_EQ(cpu::moe_group_by_expert(ids.data(), 4, 2, 6, 3, 2, off2.data(), ent2.data()), 2);
  EXPECT_EQ(off2, (std::vector<int32_t>{0, 2, 2}));
  EXPECT_EQ(std::vector<int32_t>(ent2.begin(), ent2.begin() + 2), (std::vector<int32_t>{1, 4}));
  EXPECT_EQ(ent2[2], -7) << "wrote past the pairs it grouped";
  // An id outside the experts is an error, not a stray write.
  const std::vector<int32_t> bad = {0, 6};
  EXPECT_THROW(cpu::moe_group_by_expert(bad.data(), 1, 2, 6, 0, 6, offsets.data(), entries.data()), Error);
}

// The experts: random weights, [2I, H] gate_up (gate rows first) and [H, I] down per expert.
struct Experts {
  int64_t num, hidden, inter;
  std::vector<std::vector<float>> gate_up, down;
  Experts(int64_t e, int64_t h, int64_t i, uint32_t seed) : num(e), hidden(h), inter(i) {
    for (int64_t x = 0; x < e; ++x) {
      gate_up.push_back(random_floats(2 * i * h, seed + 2 * x, -0.5, 0.5));
      down.push_back(random_floats(h * i, seed + 2 * x + 1, -0.5, 0.5));
    }
  }
  // out[t] += sum_j w[t, j] * expert_{ids[t, j]}(x[t]), SiLU-gated, in double.
  std::vector<double> ref(const std::vector<float>& x, const std::vector<int32_t>& ids, const std::vector<float>& w,
                          int64_t tokens, int k, const std::vector<float>& out0) const {
    std::vector<double> out(out0.begin(), out0.end());
    for (int64_t t = 0; t < tokens; ++t) {
      for (int j = 0; j < k; ++j) {
        const int32_t e = ids[t * k + j];
        std::vector<double> a(static_cast<size_t>(inter));
        for (int64_t r = 0; r < inter; ++r) {
          double g = 0, u = 0;
          for (int64_t c = 0; c < hidden; ++c) {
            g += static_cast<double>(gate_up[e][r * hidden + c]) * x[t * hidden + c];
            u += static_cast<double>(gate_up[e][(inter + r) * hidden + c]) * x[t * hidden + c];
          }
          a[r] = g / (1 + std::exp(-g)) * u;
        }
        for (int64_t c = 0; c < hidden; ++c) {
          double y = 0;
          for (int64_t r = 0; r < inter; ++r) y += static_cast<double>(down[e][c * inter + r]) * a[r];
          out[t * hidden + c] += w[t * k + j] * y;
        }
      }
    }
    return out;
  }
  // Experts [first, first + count), each's rows [i0, i0 + ni) of gate and of up and those columns of down.
  MoeExpertWeights upload(Backend& b, int64_t first, int64_t count, int64_t i0, int64_t ni) const {
    MoeExpertWeights w;
    w.first_expert = first;
    w.num_experts = num;
    for (int64_t e = first; e < first + count; ++e) {
      std::vector<float> gu, d;
      for (int part = 0; part < 2; ++part) {
        const auto begin = gate_up[e].begin() + (part * inter + i0) * hidden;
        gu.insert(gu.end(), begin, begin + ni * hidden);
      }
      for (int64_t c = 0; c < hidden; ++c) {
        const auto begin = down[e].begin() + c * inter + i0;
        d.insert(d.end(), begin, begin + ni);
      }
      w.gate_up.push_back(cpu_test::upload(b, gu, {2 * ni, hidden}));
      w.down.push_back(cpu_test::upload(b, d, {hidden, ni}));
    }
    return w;
  }
};

MoeScratch scratch(Backend& b, int64_t rows, int64_t hidden, int64_t inter, int k, int64_t local) {
  MoeScratch s;
  s.x = poisoned(b, {rows, hidden});
  s.gate_up = poisoned(b, {rows, 2 * inter});
  s.act = poisoned(b, {rows, inter});
  s.y = poisoned(b, {rows, hidden});
  s.entries = b.empty(DType::kI32, {rows * k});
  s.offsets = b.empty(DType::kI32, {local + 1});
  return s;
}

struct ExpertCase {
  int64_t tokens, experts;
  int k;
  int64_t hidden, inter;
};

class MoeExpertsTest : public ::testing::TestWithParam<ExpertCase> {};

// out += the experts' weighted outputs; whole, split by expert ranges (expert parallelism) and
// by width (tensor parallelism): the parts add up to the whole.
TEST_P(MoeExpertsTest, WeightedSumMatchesTheReference) {
  const auto [tokens, experts, k, hidden, inter] = GetParam();
  auto b = make_cpu_backend();
  const Experts ex(experts, hidden, inter, 100);
  const auto xv = random_floats(tokens * hidden, 3);
  // Skewed routing: logits that favour the low experts, so that the high ones may get no token.
  auto logits = random_floats(tokens * experts, 4, -1, 1);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t e = 0; e < experts; ++e) logits[t * experts + e] -= 0.5f * static_cast<float>(e);
  }
  Tensor ids = b->empty(DType::kI32, {tokens, k});
  Tensor w = b->empty(DType::kF32, {tokens, k});
  b->moe_route(upload(*b, logits, {tokens, experts}), true, ids, w);
  std::vector<int32_t> idv(static_cast<size_t>(tokens * k));
  b->copy_to_host(idv.data(), ids);
  const auto wv = download(*b, w);
  const auto out0 = random_floats(tokens * hidden, 5);  // the residual it adds into
  const auto ref = ex.ref(xv, idv, wv, tokens, k, out0);
  const Tensor x = upload(*b, xv, {tokens, hidden});
  const int64_t rows = tokens + 3;  // scratch for more rows than this batch's

  Tensor out = upload(*b, out0, {tokens, hidden});
  b->moe_experts_add(x, ex.upload(*b, 0, experts, 0, inter), ids, w, scratch(*b, rows, hidden, inter, k, experts), out,
                     Activation::kSilu);
  expect_close(download(*b, out), ref, "all experts", 1e-5, 1e-5);

  if (experts % 2 == 0) {  // two ranks of experts [0, E/2) and [E/2, E), into the same out
    Tensor ep = upload(*b, out0, {tokens, hidden});
    for (int64_t r = 0; r < 2; ++r) {
      b->moe_experts_add(x, ex.upload(*b, r * experts / 2, experts / 2, 0, inter), ids, w,
                         scratch(*b, rows, hidden, inter, k, experts / 2), ep, Activation::kSilu);
    }
    expect_close(download(*b, ep), ref, "expert parallel", 1e-5, 1e-5);
  }
  if (inter % 2 == 0) {  // two ranks of every expert's width
    Tensor tp = upload(*b, out0, {tokens, hidden});
    for (int64_t r = 0; r < 2; ++r) {
      b->moe_experts_add(x, ex.upload(*b, 0, experts, r * inter / 2, inter / 2), ids, w,
                         scratch(*b, rows, hidden, inter / 2, k, experts), tp, Activation::kSilu);
    }
    expect_close(download(*b, tp), ref, "tensor parallel", 1e-5, 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, MoeExpertsTest,
                         ::testing::Values(ExpertCase{1, 1, 1, 16, 8}, ExpertCase{1, 8, 2, 64, 32},
                                           ExpertCase{7, 3, 2, 24, 6}, ExpertCase{33, 16, 4, 40, 12},
                                           ExpertCase{9, 128, 8, 32, 16}, ExpertCase{17, 6, 6, 8, 5}),
                         [](const auto& info) {
                           const ExpertCase& c = info.param;
                           return "t" + std::to_string(c.tokens) + "_e" + std::to_string(c.experts) + "_k" +
                                  std::to_string(c.k) + "_h" + std::to_string(c.hidden) + "_i" +
                                  std::to_string(c.inter);
                         });

TEST(MoeExperts, ExpertsWithoutTokensAreNotRead) {
  // Every token routes to expert 0 and 2 of 4: experts 1 and 3's weights are NaN and must not leak.
  auto b = make_cpu_backend();
  const int64_t tokens = 5, hidden = 8, inter = 4;
  const int k = 2;
  Experts ex(4, hidden, inter, 7);
  for (int64_t e : {1, 3}) {
    std::fill(ex.gate_up[e].begin(), ex.gate_up[e].end(), NAN);
    std::fill(ex.down[e].begin(), ex.down[e].end(), NAN);
  }
  std::vector<int32_t> idv;
  std::vector<float> wv;
  for (int64_t t = 0; t < tokens; ++t) {
    idv.insert(idv.end(), {t % 2 == 0 ? 0 : 2, t % 2 == 0 ? 2 : 0});
    wv.insert(wv.end(), {0.75f, 0.25f});
  }
  const auto xv = random_floats(tokens * hidden, 8);
  const std::vector<float> zeros(static_cast<size_t>(tokens * hidden), 0.0f);
  Tensor out = upload(*b, zeros, {tokens, hidden});
  b->moe_experts_add(upload(*b, xv, {tokens, hidden}), ex.upload(*b, 0, 4, 0, inter),
                     upload_i32(*b, idv, {tokens, k}), upload(*b, wv, {tokens, k}),
                     scratch(*b, tokens, hidden, inter, k, 4), out, Activation::kSilu);
  expect_close(download(*b, out), ex.ref(xv, idv, wv, tokens, k, zeros), "experts 0 and 2", 1e-5, 1e-5);
}

TEST(MoeExperts, ABackendWithoutKernelsNamesWhatIsMissing) {
  struct NoMoe : CpuBackend {
    bool supports_moe() const override { return false; }
    using Backend::moe_missing;
  } b;
  try {
    b.Backend::moe_route(Tensor(), true, Tensor(), Tensor());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mixture-of-experts"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("moe_route"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace minivllm::cpu_test
