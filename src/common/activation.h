// The gated MLP's activation: out = act(gate) * up. A model's registry row names it
// (loader/architecture.h); every backend op that computes a gated MLP takes it as a parameter.
// Plain enum values so device code can switch on them too.
#pragma once

#include <string>

namespace minivllm {

enum class Activation : int {
  kSilu = 0,      // SwiGLU: Llama, Qwen, Mistral, Phi-3 (HF "silu" / "swish")
  kGeluTanh = 1,  // GeGLU with the tanh approximation: Gemma (HF "gelu_pytorch_tanh")
  // gpt-oss's clamped SwiGLU: g = min(gate, 7), u = clamp(up, -7, 7), out = g * sigmoid(1.702 g) * (u + 1).
  // Its config still says "silu" (transformers' GptOssExperts fixes the form).
  kSwigluOai = 2,
};
inline constexpr float kSwigluOaiAlpha = 1.702f;
inline constexpr float kSwigluOaiLimit = 7.0f;

inline const char* activation_name(Activation a) {
  return a == Activation::kSilu ? "silu" : a == Activation::kGeluTanh ? "gelu_pytorch_tanh" : "swiglu_oai";
}
// The hidden_act a config of the family names.
inline const char* activation_config_name(Activation a) {
  return a == Activation::kSwigluOai ? "silu" : activation_name(a);
}

}  // namespace minivllm
