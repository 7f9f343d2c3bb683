// GPU end-to-end checks against Hugging Face (tools/gpu_run.sh runs them on the GPU machine):
//   teacher_forced_check score    --model DIR --reference reference.json --out result.json
//     next-token agreement with HF's argmax at every position, and logit error at recorded positions;
//   teacher_forced_check generate --model DIR --prompts reference.json --out generated.json
//     greedy continuations (a) eager, (b) CUDA graphs, (c) graphs with a KV cache small enough to force
//     preemption, (d) a shared prefix that hits the prefix cache; checks (a) == (b) token for token and
//     writes all of them for tools/hf_check_generated.py to score against HF.
// --kv-cache-dtype bf16|fp8 (both commands): the engine's KV cache elements; the score's JSON names
// the resolved one, so tools/gpu_run.sh --only fp8-check compares bf16 and fp8 agreement.
// --max-model-len N (default 2048): the engine's context, which also picks longrope's regime (its
// long factors past original_max_position_embeddings, model/rope.h; transformers picks by the
// sequence's length, so a reference of sequences longer than that context takes --max-model-len
// above it too).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/llm_engine.h"
#include "common/check.h"

using nlohmann::json;
using namespace minivllm;

namespace {

std::string arg(int argc, char** argv, const std::string& name, const std::string& def = "") {
  for (int i = 2; i + 1 < argc; ++i) {
    if (argv[i] == name) return argv[i + 1];
  }
  MINIVLLM_CHECK(!def.empty()) << "missing " << name;
  return def;
}

json read_json(const std::string& path) {
  std::ifstream f(path);
  MINIVLLM_CHECK(f.good()) << "cannot open " << path;
  return json::parse(f);
}

int g_world_size = 1;  // --tensor-parallel-size, for every engine made here
int g_max_num_batched_tokens = 16384;  // --max-num-batched-tokens: below the prompts' lengths, chunked prefill
std::string g_kv_cache_dtype = "auto";  // --kv-cache-dtype: auto | bf16 | fp8 (the engine key's values)
int g_max_num_seqs = 64;  // --max-num-seqs: 1 makes every decode step batch 1 (the gemv paths)
int g_max_model_length = 2048;  // --max-model-len

EngineConfig base_config(const std::string& model) {
  EngineConfig c;
  c.model = model;
  c.world_size = g_world_size;
  c.device = "auto";
  c.max_model_length = g_max_model_length;
  c.max_num_batched_tokens = g_max_num_batched_tokens;
  c.max_num_seqs = g_max_num_seqs;
  c.gpu_memory_utilization = 0.5f;
  c.kv_cache_dtype = g_kv_cache_dtype;
  return c;
}

int score(int argc, char** argv) {
  const json ref = read_json(arg(argc, argv, "--reference"));
  EngineConfig c = base_config(arg(argc, argv, "--model"));
  c.enforce_eager = true;
  c.device = arg(argc, argv, "--device", "auto");
  if (c.device == "cpu") c.num_kvcache_blocks = 64;
  LLMEngine engine(c);
  const int64_t vocab = engine.model_config().vocab_size;
  int64_t agree = 0, total = 0;
  double worst_max_abs = 0, sum_rel = 0;
  int64_t logit_rows = 0;
  const auto& seqs = ref.at("sequences");
  const std::string ref_path = arg(argc, argv, "--reference");
  const std::string ref_dir = ref_path.substr(0, ref_path.find_last_of('/') + 1);
  std::vector<float> last_logits(seqs.size() * vocab);
  {
    std::ifstream f(ref_dir + "last_logits.f32", std::ios::binary);
    MINIVLLM_CHECK(f.good()) << "cannot open " << ref_dir << "last_logits.f32";
    f.read(reinterpret_cast<char*>(last_logits.data()), static_cast<std::streamsize>(last_logits.size() * 4));
    MINIVLLM_CHECK(f.gcount() == static_cast<std::streamsize>(last_logits.size() * 4)) << "last_logits.f32 is short";
  }
  int64_t agree_clear = 0, total_clear = 0;  // positions where HF's top-2 margin exceeds bf16 noise
  for (size_t s = 0; s < seqs.size(); ++s) {
    const auto tokens = seqs[s].get<std::vector<int32_t>>();
    const auto hf_argmax = ref.at("argmax")[s].get<std::vector<int32_t>>();
    const std::vector<float> logits = engine.score(tokens);
    for (size_t p = 0; p < hf_argmax.size(); ++p) {
      const float* row = logits.data() + p * vocab;
      int32_t best = 0;
      for (int64_t v = 1; v < vocab; ++v) {
        if (row[v] > row[best]) best = static_cast<int32_t>(v);
      }
      agree += best == hf_argmax[p];
      ++total;
      if (ref.at("margin")[s][p].get<double>() > 0.1) {
        agree_clear += best == hf_argmax[p];
        ++total_clear;
      }
    }
    // All logits at the sequence's last position: last_logits.f32 [N, vocab] beside reference.json.
    const float* row = logits.data() + (tokens.size() - 1) * vocab;
    const float* hf = last_logits.data() + s * vocab;
    double num = 0, den = 0, max_abs = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      const double d = static_cast<double>(row[v]) - hf[v];
      num += d * d;
      den += static_cast<double>(hf[v]) * hf[v];
      max_abs = std::max(max_abs, std::abs(d));
    }
    worst_max_abs = std::max(worst_max_abs, max_abs);
    sum_rel += std::sqrt(num / std::max(den, 1e-30));
    ++logit_rows;
  }
  json out = {{"kv_cache_dtype", dtype_name(engine.config().kv_cache_element)},
              {"positions", total},
              {"agreement", static_cast<double>(agree) / std::max<int64_t>(total, 1)},
              {"agreement_margin_over_0.1", static_cast<double>(agree_clear) / std::max<int64_t>(total_clear, 1)},
              {"positions_margin_over_0.1", total_clear},
              {"logits_rows", logit_rows},
              {"logits_mean_rel_l2", logit_rows ? sum_rel / logit_rows : 0.0},
              {"logits_worst_max_abs", worst_max_abs}};
  std::ofstream(arg(argc, argv, "--out")) << out.dump(2);
  std::cout << "teacher-forced: " << out.dump() << "\n";
  return 0;
}

std::vector<std::vector<int32_t>> generate_with(EngineConfig c, const std::vector<std::vector<int32_t>>& prompts,
                                                int max_tokens, double* seconds) {
  LLMEngine engine(c);
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::vector<int32_t>> out;
  for (const auto& o : engine.generate(prompts, p)) {
    MINIVLLM_CHECK(o.error.empty()) << o.error;
    out.push_back(o.token_ids);
  }
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

int generate(int argc, char** argv) {
  const json ref = read_json(arg(argc, argv, "--prompts"));
  const int max_tokens = std::stoi(arg(argc, argv, "--max-tokens", "64"));
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& s : ref.at("sequences")) {
    auto t = s.get<std::vector<int32_t>>();
    t.resize(std::min<size_t>(t.size(), 200));
    prompts.push_back(t);
  }
  // Two prompts sharing a 300-token prefix: the second hits the prefix cache.
  std::vector<int32_t> shared(ref.at("sequences")[0].get<std::vector<int32_t>>());
  shared.resize(std::min<size_t>(shared.size(), 300));
  std::vector<int32_t> tail_a = shared, tail_b = shared;
  tail_a.push_back(11);
  tail_b.push_back(13);

  json out = json::object();
  double t = 0;
  EngineConfig eager = base_config(arg(argc, argv, "--model"));
  eager.enforce_eager = true;
  eager.block_size = 16;
  const auto a = generate_with(eager, prompts, max_tokens, &t);
  out["eager"] = {{"prompts", prompts}, {"tokens", a}, {"seconds", t}};
  EngineConfig graphs = eager;
  graphs.enforce_eager = false;
  const auto b = generate_with(graphs, prompts, max_tokens, &t);
  out["graphs"] = {{"prompts", prompts}, {"tokens", b}, {"seconds", t}};
  EngineConfig small = graphs;
  small.num_kvcache_blocks = static_cast<int>((2048 / 16) + 8);  // one max-length sequence and a little
  const auto c = generate_with(small, prompts, max_tokens, &t);
  out["preempted"] = {{"prompts", prompts}, {"tokens", c}, {"seconds", t}};
  // Prefix cache: the same engine runs tail_a, then tail_b (its first 18 blocks are cached).
  {
    LLMEngine engine(graphs);
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    auto first = engine.generate(std::vector<std::vector<int32_t>>{tail_a}, p);
    engine.add_request(tail_b, p);
    StepResult r = engine.step();
    const int computed = r.num_tokens;
    std::vector<RequestOutput> done = r.finished;
    while (done.empty()) done = engine.step().finished;
    out["prefix_cache"] = {{"prompts", {tail_a, tail_b}},
                           {"tokens", {first[0].token_ids, done[0].token_ids}},
                           {"second_prefill_tokens_computed", computed}};
    MINIVLLM_CHECK_LT(computed, static_cast<int>(tail_b.size())) << "no prefix-cache hit";
  }
  int identical = 0;
  for (size_t i = 0; i < a.size(); ++i) identical += a[i] == b[i];
  out["graphs_equal_eager"] = {{"identical", identical}, {"of", a.size()}};
  std::ofstream(arg(argc, argv, "--out")) << out.dump();
  std::cout << "graph replay vs eager: " << identical << " of " << a.size() << " sequences token-identical\n";
  return identical == static_cast<int>(a.size()) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string cmd = argc > 1 ? argv[1] : "";
    g_world_size = std::stoi(arg(argc, argv, "--tensor-parallel-size", "1"));
    g_max_num_batched_tokens = std::stoi(arg(argc, argv, "--max-num-batched-tokens", "16384"));
    g_kv_cache_dtype = arg(argc, argv, "--kv-cache-dtype", "auto");
    g_max_num_seqs = std::stoi(arg(argc, argv, "--max-num-seqs", "64"));
    g_max_model_length = std::stoi(arg(argc, argv, "--max-model-len", "2048"));
    if (cmd == "score") return score(argc, argv);
    if (cmd == "generate") return generate(argc, argv);
    std::cerr << "usage: teacher_forced_check score|generate --model DIR [--tensor-parallel-size N] [--max-num-batched-tokens N] [--kv-cache-dtype auto|bf16|fp8] [--max-num-seqs N] [--max-model-len N] ...\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
