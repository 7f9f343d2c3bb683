// The engine against Hugging Face transformers: tiny random-weight checkpoints and their greedy
// continuations and last-position logits, made by tools/make_hf_goldens.py (committed with the data);
// their FP8 variants (each checkpoint format, and online quantization) by tools/make_fp8_goldens.py.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <utility>

#include <nlohmann/json.hpp>

#include "api/llm_engine.h"
#include "engine_test_util.h"

namespace minivllm {
namespace {

struct GoldenCase {
  std::vector<int32_t> prompt;
  std::vector<int32_t> greedy;
  std::vector<float> last_logits;
};

std::vector<GoldenCase> load_cases(const std::string& model, const std::string& file = "goldens.json") {
  std::ifstream f(golden_dir(model) + "/" + file);
  EXPECT_TRUE(f.good()) << "missing goldens for " << model;
  nlohmann::json j = nlohmann::json::parse(f);
  const nlohmann::json& cases = j.is_object() ? j.at("cases") : j;
  std::vector<GoldenCase> out;
  for (const auto& c : cases) {
    out.push_back({c.at("prompt_ids").get<std::vector<int32_t>>(), c.at("greedy_ids").get<std::vector<int32_t>>(),
                   c.at("last_logits").get<std::vector<float>>()});
  }
  return out;
}

// (model, world_size, token budget): tensor parallelism on the CPU backend (worker processes, the
// shared-memory communicator) must give HF's greedy tokens exactly as one rank does; so must
// chunked prefill with a small max_num_batched_tokens (prompts of up to 100 tokens over several
// steps, sharing them with decodes; score() in chunks), and the whole-prompt scheduler (0: chunked
// prefill off). The FP8 checkpoints (the loader serves their weights dequantized) and a bf16 one
// under `quantization: fp8` (each linear weight's rows rounded through e4m3 at load) must give the
// tokens of HF computing in fp32 on the same dequantized weights, at world_size 1 and 2. The -swa
// variants slide a window shorter than most prompts (every layer of Mistral's; Gemma 3's local
// layers only), also over chunked prefill. gemma3-tiny-gguf runs from its safetensors and from the
// GGUF that llama.cpp's converter made of them (tools/make_tiny_gguf.py: norms stored as 1 + w,
// llama.cpp's layer pattern and rope bases from the metadata): both give the same HF goldens.
// phi3-tiny's q/k/v and gate/up are fused in the checkpoint (split by role on load).
// qwen3-moe-tiny is a mixture of experts (two sparse layers around a dense one): each expert's
// width split over the ranks, or with expert_parallel whole experts per rank. qwen3-moe-tiny-gguf
// (every layer sparse, as llama.cpp's qwen3moe must be) runs from its safetensors and from its GGUF
// (each role's experts one 3-D tensor), the GGUF also split both ways. mixtral-tiny is Mixtral's
// registry row: its experts under their own names (block_sparse_moe, w1 / w3 / w2), every layer
// sparse, the top-2 weights renormalised; and its GGUF, which llama.cpp writes as "llama" with
// experts (no expert width: feed_forward_length), the same goldens. gemma2-tiny soft-caps its
// attention scores (cap 5) and final logits (cap 10), its layers 0 and 2 sliding over 8 keys;
// gemma2-tiny-gguf's GGUF (llama.cpp's gemma2: caps and window as metadata) gives its goldens.
// phi3-tiny-longrope rotates 12 of 16 dims with longrope factors switched at 64 tokens: at
// max_model_length 256 the engine uses the long factors (HF's goldens.json: prompts past 64), at
// 64 the short ones (goldens_short.json: sequences within 64). Its GGUF (llama.cpp's phi3: q/k/v
// and gate/up still fused, the factors as tensors) and mistral-tiny's (llama.cpp writes Mistral as
// "llama", q/k rows permuted) give the same goldens (tools/make_tiny_gguf.py); so does
// llama3-tiny's, its llama3 rope scaling stored as rope_freqs.weight. qwen3-tiny-yarn is Qwen's yarn
// long-context scaling (factor 4 over 128 pretrained positions), also from the GGUF llama.cpp's
// converter makes of it (rope.scaling.type yarn); qwen3-tiny (the same weights) with
// that scaling given as hf_overrides gives the same goldens, at world_size 1 and 2 (the workers read
// the overrides too). granite-tiny is Granite's four scalars (embeddings times 12, sublayer outputs
// times 0.22, attention scale 1 / 16, logits divided by 8), also from its GGUF (llama.cpp's granite:
// the scalars as metadata). smollm3-tiny's fourth layer rotates nothing (SmolLM3's NoPE), also from
// its GGUF (llama.cpp's smollm3, which stores no key for it: every fourth layer). glm4-tiny norms each
// sublayer's output, fuses gate/up, has q/k/v biases and rotates the first half of each head in
// adjacent pairs (its q/k rows and biases moved to the half-split layout at load), also from its GGUF.
// ernie4_5-tiny rotates whole heads in adjacent pairs; seed-oss-tiny has q/k/v biases; both also
// from their GGUFs (llama.cpp's ernie4_5 and seed_oss). glm-tiny is GlmForCausalLM (GLM-4's layers
// without the output norms), also from its GGUF (llama.cpp's chatglm). olmo2-tiny has no norm before a
// sublayer, one after each, and q/k norms over all heads of q and of k (at world_size 2 their squares summed over both ranks), also from its GGUF
// (llama.cpp's olmo2). olmo3-tiny is OLMo 2's layers with three of four sliding (window 8) and yarn on
// the full layer alone (the sliding ones rotate unscaled), also from its GGUF (llama.cpp's olmo2 with
// the window, its layer pattern and freq_base_swa as metadata). exaone4-tiny has OLMo 2's norms, per-head
// q/k norms, three sliding layers of four (window 8) and, with a window, its full layer rotating
// nothing, under Llama 3's rope scaling; also from its GGUF (llama.cpp's exaone4: rope_freqs).
// granitemoe-tiny is Granite's scalars with 8 experts, 2 a token, stacked in the checkpoint as
// GraniteMoE's published input_linear / output_linear; also from its GGUF (llama.cpp's granitemoe).
// olmoe-tiny has OLMo 2's full-width q/k norms (Llama's input norms) and 8 experts, 2 a token, their
// weights not renormalised; also from its GGUF (llama.cpp's olmoe). qwen2moe-tiny has Qwen2's q/k/v
// biases, 8 experts, 2 a token (not renormalised) and a shared expert scaled by its sigmoid gate, also
// with expert parallelism and from its GGUF (llama.cpp's qwen2moe). glm4moe-tiny is GLM-4.5's layout:
// q/k/v biases and norms, half of each head rotating, a dense first layer, then experts chosen by
// sigmoid score plus a score bias within the best of two groups, their weights renormalised and times
// 2.5, beside an ungated shared expert; also with expert parallelism and from its GGUF (llama.cpp's
// glm4moe). ernie45moe-tiny is ERNIE 4.5's MoE: a dense first layer, then experts chosen by softmax score
// plus a score bias, renormalised, beside an ungated shared expert; tied embeddings, heads rotating in
// pairs; also with expert parallelism and from its GGUF (llama.cpp's ernie4_5-moe). gptoss-tiny is gpt-oss:
// q/k/v/o biases, a sink logit per head, sliding and full layers alternating, yarn untruncated, 8 biased
// experts of its clamped SwiGLU, 2 a token, stored stacked with gate and up interleaved; also with expert
// parallelism and from its GGUF (llama.cpp's gpt-oss, the experts split and transposed). gptoss-tiny-mxfp4 is
// its experts quantized to MXFP4 as gpt-oss is published, that checkpoint and llama.cpp's GGUF of it, against
// transformers on the same experts decoded (tools/make_gptoss_mxfp4.py).
struct GoldenParam {
  std::string model;
  int world_size;
  int max_num_batched_tokens = 1024;
  std::string quantization = "none";  // fp8: online quantization, against goldens_fp8_online.json
  std::string file = "";              // a file of the folder to load instead of it (a GGUF), or ""
  std::string goldens = "";           // the goldens' file, if not goldens.json (or the fp8 one)
  int max_model_length = 0;           // 0: tiny_config's (256)
  bool expert_parallel = false;       // enable_expert_parallel (mixture-of-experts models)
  std::string hf_overrides = "";      // EngineConfig::hf_overrides
  std::string goldens_model = "";     // the folder of the goldens, if not the model's
};

// qwen3-tiny-yarn's config as overrides of qwen3-tiny's (the two folders hold the same weights).
constexpr const char* kYarnOverrides =
    R"({"rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,)"
    R"( "original_max_position_embeddings": 128}})";

class GoldenTest : public ::testing::TestWithParam<GoldenParam> {
 protected:
  const std::string& model() const { return GetParam().model; }
  std::vector<GoldenCase> golden_cases() const {
    const std::string& from = GetParam().goldens_model.empty() ? model() : GetParam().goldens_model;
    if (!GetParam().goldens.empty()) return load_cases(from, GetParam().goldens);
    return load_cases(from, GetParam().quantization == "fp8" ? "goldens_fp8_online.json" : "goldens.json");
  }
  EngineConfig config() const {
    EngineConfig c = tiny_config(GetParam().model, GetParam().world_size);
    if (!GetParam().file.empty()) c.model += "/" + GetParam().file;
    c.quantization = GetParam().quantization;
    c.enable_expert_parallel = GetParam().expert_parallel;
    c.hf_overrides = GetParam().hf_overrides;
    if (GetParam().max_model_length > 0) c.max_model_length = GetParam().max_model_length;
    if (GetParam().max_num_batched_tokens == 0) {
      c.enable_chunked_prefill = false;
    } else {
      c.max_num_batched_tokens = GetParam().max_num_batched_tokens;
    }
    return c;
  }
};

// All prompts in one batch of mixed lengths: HF's greedy tokens exactly.
TEST_P(GoldenTest, GreedyTokensMatchInMixedBatch) {
  const auto cases = golden_cases();
  LLMEngine engine(config());
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& c : cases) prompts.push_back(c.prompt);
  const auto outs = engine.generate(prompts, greedy(static_cast<int>(cases[0].greedy.size())));
  ASSERT_EQ(outs.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(outs[i].token_ids, cases[i].greedy) << "prompt " << i << " of length " << cases[i].prompt.size();
  }
}

// Last-position logits within tolerance: HF ran in fp32 from the same bf16 weights; we run fp32 too.
TEST_P(GoldenTest, LastLogitsMatch) {
  const auto cases = golden_cases();
  LLMEngine engine(config());
  const int64_t vocab = engine.model_config().vocab_size;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<float> all = engine.score(cases[i].prompt);
    const float* last = all.data() + (cases[i].prompt.size() - 1) * vocab;
    ASSERT_EQ(static_cast<int64_t>(cases[i].last_logits.size()), vocab);
    double max_diff = 0, ref_max = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      max_diff = std::max(max_diff, std::abs(static_cast<double>(last[v]) - cases[i].last_logits[v]));
      ref_max = std::max(ref_max, std::abs(static_cast<double>(cases[i].last_logits[v])));
    }
    // Stated tolerance: 1e-3 absolute on logits of magnitude ~1-10 (fp32 vs fp32, different summation order).
    EXPECT_LT(max_diff, 1e-3 * std::max(1.0, ref_max)) << "prompt " << i;
  }
}

// A second request with the same long prefix hits the prefix cache and still matches HF.
TEST_P(GoldenTest, PrefixCacheHitMatches) {
  const auto cases = golden_cases();
  // The two prompts sharing a 40-token prefix are the last two cases (tools/make_hf_goldens.py).
  const GoldenCase& a = cases[cases.size() - 2];
  const GoldenCase& b = cases[cases.size() - 1];
  LLMEngine engine(config());
  auto first = engine.generate(std::vector<std::vector<int32_t>>{a.prompt}, greedy(static_cast<int>(a.greedy.size())));
  EXPECT_EQ(first[0].token_ids, a.greedy);
  engine.add_request(b.prompt, greedy(static_cast<int>(b.greedy.size())));
  StepResult prefill = engine.step();
  EXPECT_GT(prefill.num_tokens, 0);
  EXPECT_LT(prefill.num_tokens, static_cast<int>(b.prompt.size())) << "no prefix-cache hit";
  std::vector<int32_t> tokens;
  std::vector<RequestOutput> done = prefill.finished;
  while (done.empty()) done = engine.step().finished;
  EXPECT_EQ(done[0].token_ids, b.greedy);
  EXPECT_GE(done[0].num_cached_tokens, 16) << "no prefix-cache hit";
}

// A KV cache too small for the whole batch forces preemption by recompute; tokens still match.
// A model whose every layer slides (mistral-tiny-swa) releases the blocks out of the window, so
// the same cache holds the batch without preempting (mistral-tiny, the same model without a
// window, preempts).
TEST_P(GoldenTest, PreemptionKeepsTokens) {
  const auto cases = golden_cases();
  EngineConfig c = config();
  c.num_kvcache_blocks = 16;  // 256 tokens for all sequences together
  LLMEngine engine(c);
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& gc : cases) prompts.push_back(gc.prompt);
  const auto outs = engine.generate(prompts, greedy(static_cast<int>(cases[0].greedy.size())));
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(outs[i].token_ids, cases[i].greedy) << "prompt " << i;
  if (engine.config().sliding_window > 0) {
    EXPECT_EQ(engine.num_preemptions(), 0) << "blocks out of the window were not released";
    return;
  }
  EXPECT_GT(engine.num_preemptions(), 0) << "the cache was large enough: nothing was preempted";
}

std::string param_name(const ::testing::TestParamInfo<GoldenParam>& info) {
  std::string name = info.param.model + "_tp" + std::to_string(info.param.world_size);
  const int budget = info.param.max_num_batched_tokens;
  if (budget == 0) name += "_whole_prompts";
  if (budget > 0 && budget < 1024) name += "_chunk" + std::to_string(budget);
  if (info.param.quantization != "none") name += "_online_" + info.param.quantization;
  if (!info.param.file.empty()) name += "_file_" + info.param.file;
  if (info.param.expert_parallel) name += "_expert_parallel";
  if (!info.param.hf_overrides.empty()) name += "_hf_overrides";
  if (!info.param.goldens.empty()) name += "_" + info.param.goldens;
  for (char& ch : name) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Models, GoldenTest,
                         ::testing::Values(GoldenParam{"qwen3-tiny", 1}, GoldenParam{"llama3-tiny", 1},
                                           GoldenParam{"qwen3-tiny-kv4", 1}, GoldenParam{"qwen3-tiny", 2},
                                           GoldenParam{"llama3-tiny", 2}, GoldenParam{"qwen3-tiny-kv4", 2},
                                           GoldenParam{"qwen3-tiny-kv4", 4}, GoldenParam{"qwen3-tiny", 1, 64},
                                           GoldenParam{"llama3-tiny", 1, 64}, GoldenParam{"qwen3-tiny-kv4", 1, 64},
                                           GoldenParam{"qwen3-tiny", 2, 64}, GoldenParam{"llama3-tiny", 1, 16},
                                           GoldenParam{"qwen3-tiny", 1, 0}, GoldenParam{"mistral-tiny", 1},
                                           GoldenParam{"mistral-tiny", 2}, GoldenParam{"gemma3-tiny", 1},
                                           GoldenParam{"gemma3-tiny", 2}, GoldenParam{"mistral-tiny-swa", 1},
                                           GoldenParam{"mistral-tiny-swa", 2}, GoldenParam{"mistral-tiny-swa", 1, 16},
                                           GoldenParam{"gemma3-tiny-swa", 1}, GoldenParam{"gemma3-tiny-swa", 2},
                                           GoldenParam{"gemma3-tiny-gguf", 1}, GoldenParam{"gemma3-tiny-gguf", 2},
                                           GoldenParam{"gemma3-tiny-gguf", 1, 1024, "none", "gemma3-tiny.bf16.gguf"},
                                           GoldenParam{"gemma3-tiny-gguf", 2, 1024, "none", "gemma3-tiny.bf16.gguf"},
                                           GoldenParam{"phi3-tiny", 1}, GoldenParam{"phi3-tiny", 2},
                                           GoldenParam{"qwen3-moe-tiny", 1}, GoldenParam{"qwen3-moe-tiny", 2},
                                           GoldenParam{"qwen3-moe-tiny", 1, 1024, "none", "", "", 0, true},
                                           GoldenParam{"qwen3-moe-tiny", 2, 1024, "none", "", "", 0, true},
                                           GoldenParam{"qwen3-moe-tiny", 1, 16},
                                           GoldenParam{"qwen3-moe-tiny-gguf", 1},
                                           GoldenParam{"qwen3-moe-tiny-gguf", 1, 1024, "none",
                                                       "qwen3-moe-tiny.bf16.gguf"},
                                           GoldenParam{"qwen3-moe-tiny-gguf", 2, 1024, "none",
                                                       "qwen3-moe-tiny.bf16.gguf"},
                                           GoldenParam{"qwen3-moe-tiny-gguf", 2, 1024, "none",
                                                       "qwen3-moe-tiny.bf16.gguf", "", 0, true},
                                           GoldenParam{"gemma2-tiny", 1}, GoldenParam{"gemma2-tiny", 2},
                                           GoldenParam{"gemma2-tiny", 1, 16},
                                           GoldenParam{"gemma2-tiny-gguf", 1, 1024, "none", "gemma2-tiny.bf16.gguf"},
                                           GoldenParam{"gemma2-tiny-gguf", 2, 1024, "none", "gemma2-tiny.bf16.gguf"},
                                           GoldenParam{"mixtral-tiny", 1}, GoldenParam{"mixtral-tiny", 2},
                                           GoldenParam{"mixtral-tiny", 2, 1024, "none", "", "", 0, true},
                                           GoldenParam{"mixtral-tiny", 1, 16},
                                           GoldenParam{"mixtral-tiny", 1, 1024, "none", "mixtral-tiny.bf16.gguf"},
                                           GoldenParam{"mixtral-tiny", 2, 1024, "none", "mixtral-tiny.bf16.gguf",
                                                       "", 0, true},
                                           GoldenParam{"qwen3-tiny-yarn", 1}, GoldenParam{"qwen3-tiny-yarn", 2},
                                           GoldenParam{"qwen3-tiny-yarn", 1, 16},
                                           GoldenParam{"qwen3-tiny-yarn", 1, 1024, "none", "qwen3-tiny-yarn.bf16.gguf"},
                                           GoldenParam{"qwen3-tiny-yarn", 2, 1024, "none", "qwen3-tiny-yarn.bf16.gguf"},
                                           GoldenParam{"qwen3-tiny", 1, 1024, "none", "", "", 0, false,
                                                       kYarnOverrides, "qwen3-tiny-yarn"},
                                           GoldenParam{"qwen3-tiny", 2, 1024, "none", "", "", 0, false,
                                                       kYarnOverrides, "qwen3-tiny-yarn"},
                                           GoldenParam{"phi3-tiny-longrope", 1},
                                           GoldenParam{"phi3-tiny-longrope", 2},
                                           GoldenParam{"phi3-tiny-longrope", 1, 16},
                                           GoldenParam{"phi3-tiny-longrope", 1, 1024, "none", "",
                                                       "goldens_short.json", 64},
                                           GoldenParam{"phi3-tiny-longrope", 2, 1024, "none", "",
                                                       "goldens_short.json", 64},
                                           GoldenParam{"phi3-tiny-longrope", 1, 1024, "none",
                                                       "phi3-tiny-longrope.bf16.gguf"},
                                           GoldenParam{"phi3-tiny-longrope", 2, 1024, "none",
                                                       "phi3-tiny-longrope.bf16.gguf"},
                                           GoldenParam{"phi3-tiny-longrope", 1, 1024, "none",
                                                       "phi3-tiny-longrope.bf16.gguf", "goldens_short.json", 64},
                                           GoldenParam{"mistral-tiny", 1, 1024, "none", "mistral-tiny.bf16.gguf"},
                                           GoldenParam{"mistral-tiny", 2, 1024, "none", "mistral-tiny.bf16.gguf"},
                                           GoldenParam{"llama3-tiny", 1, 1024, "none", "llama3-tiny.bf16.gguf"},
                                           GoldenParam{"llama3-tiny", 2, 1024, "none", "llama3-tiny.bf16.gguf"},
                                           GoldenParam{"qwen3-tiny-fp8-block", 1},
                                           GoldenParam{"qwen3-tiny-fp8-block", 2},
                                           GoldenParam{"qwen3-tiny-fp8-channel", 1},
                                           GoldenParam{"qwen3-tiny-fp8-channel", 2},
                                           GoldenParam{"llama3-tiny-fp8-tensor", 1},
                                           GoldenParam{"llama3-tiny-fp8-tensor", 2},
                                           GoldenParam{"llama3-tiny", 1, 1024, "fp8"},
                                           GoldenParam{"llama3-tiny", 2, 1024, "fp8"}),
                         param_name);

// A registry row's usual set: world_size 1 and 2, chunked prefill (16 tokens a step), and the GGUF
// llama.cpp's converter made of the same checkpoint (gguf: its file, "" for none) at 1 and 2.
std::vector<GoldenParam> family(const std::string& model, const std::string& gguf) {
  std::vector<GoldenParam> out = {GoldenParam{model, 1}, GoldenParam{model, 2}, GoldenParam{model, 1, 16}};
  if (!gguf.empty()) {
    out.push_back(GoldenParam{model, 1, 1024, "none", gguf});
    out.push_back(GoldenParam{model, 2, 1024, "none", gguf});
  }
  return out;
}

std::vector<GoldenParam> families() {
  std::vector<GoldenParam> all;
  for (const auto& [model, gguf] : std::initializer_list<std::pair<const char*, const char*>>{
           {"granite-tiny", "granite-tiny.bf16.gguf"},
           {"smollm3-tiny", "smollm3-tiny.bf16.gguf"},
           {"glm4-tiny", "glm4-tiny.bf16.gguf"},
           {"glm-tiny", "glm-tiny.bf16.gguf"},
           {"ernie4_5-tiny", "ernie4_5-tiny.bf16.gguf"},
           {"seed-oss-tiny", "seed-oss-tiny.bf16.gguf"},
           {"olmo2-tiny", "olmo2-tiny.bf16.gguf"},
           {"olmo3-tiny", "olmo3-tiny.bf16.gguf"},
           {"exaone4-tiny", "exaone4-tiny.bf16.gguf"},
           {"granitemoe-tiny", "granitemoe-tiny.bf16.gguf"},
           {"olmoe-tiny", "olmoe-tiny.bf16.gguf"},
           {"qwen2moe-tiny", "qwen2moe-tiny.bf16.gguf"},
           {"glm4moe-tiny", "glm4moe-tiny.bf16.gguf"},
           {"ernie45moe-tiny", "ernie45moe-tiny.bf16.gguf"},
           {"gptoss-tiny", "gptoss-tiny.bf16.gguf"}}) {
    const std::vector<GoldenParam> f = family(model, gguf);
    all.insert(all.end(), f.begin(), f.end());
  }
  // Qwen2-MoE's shared expert stays split over the ranks when the routed experts are whole per rank.
  all.push_back(GoldenParam{"qwen2moe-tiny", 2, 1024, "none", "", "", 0, true});
  all.push_back(GoldenParam{"glm4moe-tiny", 2, 1024, "none", "", "", 0, true});
  all.push_back(GoldenParam{"gptoss-tiny", 2, 1024, "none", "", "", 0, true});
  // gpt-oss's MXFP4 experts (llama.cpp's GGUF), kept quantized; at world_size 2 whole experts a rank (a
  // split 32-wide expert would cut its down projection's 32-element blocks).
  all.push_back(GoldenParam{"gptoss-tiny-mxfp4", 1, 1024, "none", "gptoss-tiny-mxfp4.gguf"});
  all.push_back(GoldenParam{"gptoss-tiny-mxfp4", 2, 1024, "none", "gptoss-tiny-mxfp4.gguf", "", 0, true});
  // The same experts as gpt-oss is published (quant_method mxfp4: *_blocks and *_scales), kept quantized.
  all.push_back(GoldenParam{"gptoss-tiny-mxfp4", 1});
  all.push_back(GoldenParam{"gptoss-tiny-mxfp4", 2, 1024, "none", "", "", 0, true});
  all.push_back(GoldenParam{"ernie45moe-tiny", 2, 1024, "none", "", "", 0, true});
  // olmo3-tiny's config as the published OLMo 3 configs write it (transformers 4.x): rope_theta and a
  // top-level rope_scaling that binds the full layers only, no layer_types (every fourth layer full).
  constexpr const char* kOlmo3Legacy =
      R"({"rope_parameters": null, "layer_types": null, "rope_theta": 10000.0, "rope_scaling": {"rope_type": "yarn",)"
      R"( "factor": 4.0, "original_max_position_embeddings": 128}})";
  for (int ws : {1, 2}) all.push_back(GoldenParam{"olmo3-tiny", ws, 1024, "none", "", "", 0, false, kOlmo3Legacy});
  return all;
}

INSTANTIATE_TEST_SUITE_P(Families, GoldenTest, ::testing::ValuesIn(families()), param_name);

}  // namespace
}  // namespace minivllm
