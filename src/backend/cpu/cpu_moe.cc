// Mixture of experts on the CPU: routing (softmax, top-k, renormalisation), grouping the tokens by
// expert (a counting sort), and each expert's gated MLP over its tokens as one batch through the
// backend's own linear and act_mul, its outputs added into `out` with their routing weights.
#include "backend/cpu/cpu_moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_checks.h"

namespace minivllm {
namespace cpu {

void moe_topk_softmax(const float* logits, int64_t tokens, int64_t num_experts, int k, bool renormalize,
                      int32_t* ids, float* weights) {
  MINIVLLM_CHECK(k >= 1 && k <= num_experts) << "moe_route: top-" << k << " of " << num_experts << " experts";
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = logits + t * num_experts;
    const float max = *std::max_element(row, row + num_experts);
    double sum = 0;  // the softmax's denominator over every expert, as HF's softmax before top-k
    for (int64_t e = 0; e < num_experts; ++e) sum += std::exp(static_cast<double>(row[e] - max));
    int32_t* id = ids + t * k;
    float* w = weights + t * k;
    // Selection by the logits (the probabilities' order), k passes: k is small (8 of 128).
    for (int j = 0; j < k; ++j) {
      int32_t best = -1;
      for (int64_t e = 0; e < num_experts; ++e) {
        if (std::find(id, id + j, static_cast<int32_t>(e)) != id + j) continue;
        if (best < 0 || row[e] > row[best]) best = static_cast<int32_t>(e);
      }
      id[j] = best;
      w[j] = static_cast<float>(std::exp(static_cast<double>(row[best] - max)) / sum);
    }
    if (renormalize) {
      double s = 0;
      for (int j = 0; j < k; ++j) s += w[j];
      for (int j = 0; j < k; ++j) w[j] = static_cast<float>(w[j] / s);
    }
  }
}

void moe_topk_biased(const float* logits, const float* score_bias, int64_t tokens, int64_t num_experts, int k,
                     bool sigmoid, int groups, int topk_groups, bool renormalize, float scale, int32_t* ids,
                     float* weights) {
  MINIVLLM_CHECK(groups >= 1 && num_experts % groups == 0 && topk_groups >= 1 && topk_groups <= groups)
      << "moe_route_biased: " << topk_groups << " of " << groups << " groups of " << num_experts << " experts";
  const int64_t per_group = num_experts / groups;
  MINIVLLM_CHECK(k >= 1 && k <= topk_groups * per_group && (groups == 1 || per_group >= 2))
      << "moe_route_biased: top-" << k << " of " << topk_groups << " groups of " << per_group << " experts";
  std::vector<float> score(static_cast<size_t>(num_experts)), choice(score.size()), group_value(groups);
  std::vector<char> allowed(score.size());
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = logits + t * num_experts;
    const float max = *std::max_element(row, row + num_experts);
    double sum_exp = 0;  // the softmax's denominator, as moe_topk_softmax's
    if (!sigmoid) {
      for (int64_t e = 0; e < num_experts; ++e) sum_exp += std::exp(static_cast<double>(row[e] - max));
    }
    for (int64_t e = 0; e < num_experts; ++e) {
      score[e] = sigmoid ? 1.0f / (1.0f + std::exp(-row[e]))
                         : static_cast<float>(std::exp(static_cast<double>(row[e] - max)) / sum_exp);
      choice[e] = score[e] + score_bias[e];
    }
    // A group's value: its two best choice values (transformers' topk(2).sum()); the best topk_groups
    // groups stay eligible. One group: every expert.
    std::fill(allowed.begin(), allowed.end(), groups == 1 ? 1 : 0);
    if (groups > 1) {
      for (int g = 0; g < groups; ++g) {
        const float* c = choice.data() + g * per_group;
        float a = -INFINITY, b = -INFINITY;  // the best two
        for (int64_t i = 0; i < per_group; ++i) {
          if (c[i] > a) {
            b = a, a = c[i];
          } else if (c[i] > b) {
            b = c[i];
          }
        }
        group_value[g] = a + b;
      }
      for (int pick = 0; pick < topk_groups; ++pick) {
        int best = -1;
        for (int g = 0; g < groups; ++g) {
          if (allowed[g * per_group] == 0 && (best < 0 || group_value[g] > group_value[best])) best = g;
        }
        std::fill(allowed.begin() + best * per_group, allowed.begin() + (best + 1) * per_group, 1);
      }
    }
    int32_t* id = ids + t * k;
    float* w = weights + t * k;
    double sum = 0;
    for (int j = 0; j < k; ++j) {
      int32_t best = -1;
      for (int64_t e = 0; e < num_experts; ++e) {
        if (allowed[e] == 0 || std::find(id, id + j, static_cast<int32_t>(e)) != id + j) continue;
        if (best < 0 || choice[e] > choice[best]) best = static_cast<int32_t>(e);
      }
      id[j] = best;
      w[j] = score[best];
      sum += w[j];
    }
    for (int j = 0; j < k; ++j) {
      const double v = renormalize ? w[j] / (sum + 1e-20) : w[j];
      w[j] = static_cast<float>(v * scale);
    }
  }
}

int64_t moe_group_by_expert(const int32_t* ids, int64_t tokens, int k, int64_t num_experts, int64_t first_expert,
                            int64_t num_local, int32_t* offsets, int32_t* entries) {
  MINIVLLM_CHECK(first_expert >= 0 && num_local >= 0 && first_expert + num_local <= num_experts)
      << "moe_group_by_expert: experts [" << first_expert << ", " << first_expert + num_local << ") of "
      << num_experts;
  std::fill(offsets, offsets + num_local + 1, 0);
  const int64_t pairs = tokens * k;
  for (int64_t i = 0; i < pairs; ++i) {  // counts, shifted by one
    MINIVLLM_CHECK(ids[i] >= 0 && ids[i] < num_experts)
        << "moe_group_by_expert: token " << i / k << " routed to expert " << ids[i] << " of " << num_experts;
    const int64_t local = ids[i] - first_expert;
    if (local >= 0 && local < num_local) ++offsets[local + 1];
  }
  for (int64_t e = 0; e < num_local; ++e) offsets[e + 1] += offsets[e];
  std::vector<int32_t> next(offsets, offsets + num_local);
  for (int64_t i = 0; i < pairs; ++i) {  // in pair order: tokens ascending within an expert
    const int64_t local = ids[i] - first_expert;
    if (local >= 0 && local < num_local) entries[next[local]++] = static_cast<int32_t>(i);
  }
  return offsets[num_local];
}

}  // namespace cpu

void CpuBackend::moe_route(const Tensor& router_logits, bool renormalize, const Tensor& topk_ids,
                           const Tensor& topk_weights) {
  cpu::check_tensor(router_logits, DType::kF32, "moe_route", "router_logits");
  cpu::check_tensor(topk_ids, DType::kI32, "moe_route", "topk_ids");
  cpu::check_tensor(topk_weights, DType::kF32, "moe_route", "topk_weights");
  MINIVLLM_CHECK(router_logits.ndim() == 2 && topk_ids.ndim() == 2 && topk_ids.shape() == topk_weights.shape() &&
                 topk_ids.size(0) == router_logits.size(0))
      << "moe_route: router_logits " << router_logits.describe() << ", topk_ids " << topk_ids.describe()
      << ", topk_weights " << topk_weights.describe();
  cpu::moe_topk_softmax(router_logits.ptr<float>(), router_logits.size(0), router_logits.size(1),
                        static_cast<int>(topk_ids.size(1)), renormalize, topk_ids.ptr<int32_t>(),
                        topk_weights.ptr<float>());
}

void CpuBackend::moe_route_biased(const Tensor& router_logits, const Tensor& score_bias, bool sigmoid, int groups,
                                  int topk_groups, bool renormalize, float scale, const Tensor& topk_ids,
                                  const Tensor& topk_weights) {
  cpu::check_tensor(router_logits, DType::kF32, "moe_route_biased", "router_logits");
  cpu::check_tensor(score_bias, DType::kF32, "moe_route_biased", "score_bias");
  cpu::check_tensor(topk_ids, DType::kI32, "moe_route_biased", "topk_ids");
  cpu::check_tensor(topk_weights, DType::kF32, "moe_route_biased", "topk_weights");
  MINIVLLM_CHECK(router_logits.ndim() == 2 && topk_ids.ndim() == 2 && topk_ids.shape() == topk_weights.shape() &&
                 topk_ids.size(0) == router_logits.size(0) && score_bias.numel() == router_logits.size(1))
      << "moe_route_biased: router_logits " << router_logits.describe() << ", score_bias " << score_bias.describe()
      << ", topk_ids " << topk_ids.describe() << ", topk_weights " << topk_weights.describe();
  cpu::moe_topk_biased(router_logits.ptr<float>(), score_bias.ptr<float>(), router_logits.size(0),
                       router_logits.size(1), static_cast<int>(topk_ids.size(1)), sigmoid, groups, topk_groups,
                       renormalize, scale, topk_ids.ptr<int32_t>(), topk_weights.ptr<float>());
}

void CpuBackend::moe_experts_add(const Tensor& x, const MoeExpertWeights& w, const Tensor& topk_ids,
                                 const Tensor& topk_weights, const MoeScratch& s, const Tensor& out,
                                 Activation act) {
  cpu::check_tensor(x, DType::kF32, "moe_experts_add", "x");
  cpu::check_tensor(out, DType::kF32, "moe_experts_add", "out");
  cpu::check_tensor(topk_ids, DType::kI32, "moe_experts_add", "topk_ids");
  cpu::check_tensor(topk_weights, DType::kF32, "moe_experts_add", "topk_weights");
  const int64_t tokens = x.size(0), hidden = x.size(1), k = topk_ids.size(1), local = w.num_local();
  MINIVLLM_CHECK(x.ndim() == 2 && out.shape() == x.shape() && topk_ids.size(0) == tokens &&
                 topk_weights.shape() == topk_ids.shape() && static_cast<int64_t>(w.down.size()) == local)
      << "moe_experts_add: x " << x.describe() << ", out " << out.describe() << ", topk_ids " << topk_ids.describe()
      << ", " << local << " gate_up and " << w.down.size() << " down weights";
  MINIVLLM_CHECK((w.gate_up_bias.empty() || static_cast<int64_t>(w.gate_up_bias.size()) == local) &&
                 (w.down_bias.empty() || static_cast<int64_t>(w.down_bias.size()) == local))
      << "moe_experts_add: " << w.gate_up_bias.size() << " gate_up and " << w.down_bias.size() << " down biases for "
      << local << " experts";
  MINIVLLM_CHECK(s.entries.numel() >= tokens * k && s.offsets.numel() >= local + 1 && s.x.size(0) >= tokens)
      << "moe_experts_add: scratch for " << s.x.size(0) << " rows, " << tokens << " tokens x top-" << k;
  int32_t* offsets = s.offsets.ptr<int32_t>();
  int32_t* entries = s.entries.ptr<int32_t>();
  cpu::moe_group_by_expert(topk_ids.ptr<int32_t>(), tokens, static_cast<int>(k), w.num_experts, w.first_expert, local,
                           offsets, entries);
  const float* xs = x.ptr<float>();
  const float* weights = topk_weights.ptr<float>();
  float* dst = out.ptr<float>();
  for (int64_t e = 0; e < local; ++e) {
    const int64_t begin = offsets[e], n = offsets[e + 1] - begin;
    if (n == 0) continue;  // no token chose this expert: its weights are not read
    const Tensor xe = s.x.rows(0, n), ye = s.y.rows(0, n);
    float* xrows = xe.ptr<float>();
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(xrows + i * hidden, xs + (entries[begin + i] / k) * hidden, hidden * sizeof(float));
    }
    const Tensor gate_up = s.gate_up.rows(0, n), a = s.act.rows(0, n);
    linear(xe, w.gate_up[e], w.gate_up_bias.empty() ? nullptr : &w.gate_up_bias[e], gate_up);
    act_mul(gate_up, a, act);
    linear(a, w.down[e], w.down_bias.empty() || !w.down_bias[e].defined() ? nullptr : &w.down_bias[e], ye);
    const float* yrows = ye.ptr<float>();
    for (int64_t i = 0; i < n; ++i) {  // a token appears once per expert: rows never collide
      const int32_t pair = entries[begin + i];
      const float g = weights[pair];
      float* row = dst + (pair / k) * hidden;
      const float* y = yrows + i * hidden;
      for (int64_t c = 0; c < hidden; ++c) row[c] += g * y[c];
    }
  }
}

void CpuBackend::sigmoid_gate_rows(const Tensor& x, const Tensor& gate, const Tensor& out) {
  cpu::check_tensor(x, DType::kF32, "sigmoid_gate_rows", "x");
  cpu::check_tensor(gate, DType::kF32, "sigmoid_gate_rows", "gate");
  cpu::check_tensor(out, DType::kF32, "sigmoid_gate_rows", "out");
  const int64_t hidden = gate.numel();
  const int64_t tokens = cpu::rows_with_cols(x, hidden, "sigmoid_gate_rows", "x");
  MINIVLLM_CHECK(out.ndim() == 2 && out.size(0) == tokens)
      << "sigmoid_gate_rows: out " << out.describe() << " for the " << tokens << " rows of x " << x.describe();
  const int64_t n = out.size(1);
  const float* xs = x.ptr<float>();
  const float* g = gate.ptr<float>();
  float* dst = out.ptr<float>();
  for (int64_t t = 0; t < tokens; ++t) {
    double dot = 0;  // the reference's sum: in double, one rounding to f32 at the end
    for (int64_t j = 0; j < hidden; ++j) dot += static_cast<double>(xs[t * hidden + j]) * g[j];
    const float s = 1.0f / (1.0f + std::exp(-static_cast<float>(dot)));
    for (int64_t j = 0; j < n; ++j) dst[t * n + j] *= s;
  }
}

}  // namespace minivllm
