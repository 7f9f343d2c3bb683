#include "model/layer_weights.h"

#include <cstring>
#include <string>

#include "common/check.h"

namespace minivllm {
namespace {

// Concatenates host fp32 tensors along dim 0 (rows), e.g. q, k, v -> qkv.
Tensor concat_rows(const std::vector<Tensor>& parts) {
  int64_t rows = 0;
  const int64_t cols = parts.front().ndim() == 1 ? 1 : parts.front().numel() / parts.front().size(0);
  for (const Tensor& p : parts) rows += p.size(0);
  Tensor out = parts.front().ndim() == 1 ? host_tensor(DType::kF32, {rows}) : host_tensor(DType::kF32, {rows, cols});
  char* dst = static_cast<char*>(out.data());
  for (const Tensor& p : parts) {
    std::memcpy(dst, p.data(), p.nbytes());
    dst += p.nbytes();
  }
  return out;
}

class Loader {
 public:
  Loader(const WeightSource& src, Backend& backend) : src_(src), backend_(backend) {}

  Tensor host(const std::string& name, std::vector<int64_t> shape) const { return src_.get_f32(name, shape); }
  Tensor upload(const std::string& name, std::vector<int64_t> shape) const {
    return backend_.upload_weight(host(name, shape));
  }
  Tensor upload_fused(const std::vector<std::pair<std::string, std::vector<int64_t>>>& parts) const {
    std::vector<Tensor> hosts;
    for (const auto& [name, shape] : parts) hosts.push_back(host(name, shape));
    return backend_.upload_weight(concat_rows(hosts));
  }
  bool has(const std::string& name) const { return src_.has(name); }

 private:
  const WeightSource& src_;
  Backend& backend_;
};

LayerWeights load_layer(const ModelConfig& c, const Loader& ld, int64_t i) {
  const std::string p = "model.layers." + std::to_string(i) + ".";
  const int64_t h = c.hidden_size, hd = c.head_dim, nq = c.num_heads, nkv = c.num_kv_heads;
  const int64_t inter = c.intermediate_size;
  LayerWeights w;
  w.input_layernorm = ld.upload(p + "input_layernorm.weight", {h});
  w.qkv_proj = ld.upload_fused({{p + "self_attn.q_proj.weight", {nq * hd, h}},
                                {p + "self_attn.k_proj.weight", {nkv * hd, h}},
                                {p + "self_attn.v_proj.weight", {nkv * hd, h}}});
  if (c.attention_bias) {
    w.qkv_bias = ld.upload_fused({{p + "self_attn.q_proj.bias", {nq * hd}},
                                  {p + "self_attn.k_proj.bias", {nkv * hd}},
                                  {p + "self_attn.v_proj.bias", {nkv * hd}}});
  }
  if (c.qk_norm) {
    w.q_norm = ld.upload(p + "self_attn.q_norm.weight", {hd});
    w.k_norm = ld.upload(p + "self_attn.k_norm.weight", {hd});
  }
  w.o_proj = ld.upload(p + "self_attn.o_proj.weight", {h, nq * hd});
  w.post_attention_layernorm = ld.upload(p + "post_attention_layernorm.weight", {h});
  w.gate_up_proj = ld.upload_fused({{p + "mlp.gate_proj.weight", {inter, h}}, {p + "mlp.up_proj.weight", {inter, h}}});
  w.down_proj = ld.upload(p + "mlp.down_proj.weight", {h, inter});
  return w;
}

}  // namespace

ModelWeights load_model_weights(const ModelConfig& cfg, const WeightSource& src, Backend& backend) {
  Loader ld(src, backend);
  ModelWeights w;
  w.embed_tokens = ld.upload("model.embed_tokens.weight", {cfg.vocab_size, cfg.hidden_size});
  for (int64_t i = 0; i < cfg.num_layers; ++i) w.layers.push_back(load_layer(cfg, ld, i));
  w.norm = ld.upload("model.norm.weight", {cfg.hidden_size});
  // Tied embeddings share one matrix even when the checkpoint also stores lm_head.weight (Qwen3-0.6B).
  if (cfg.tie_word_embeddings || !ld.has("lm_head.weight")) {
    MINIVLLM_CHECK(cfg.tie_word_embeddings) << src.describe() << ": lm_head.weight is missing and the config does not tie the embeddings";
    w.lm_head = w.embed_tokens;
  } else {
    w.lm_head = ld.upload("lm_head.weight", {cfg.vocab_size, cfg.hidden_size});
  }
  return w;
}

}  // namespace minivllm
