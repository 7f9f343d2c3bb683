// The gated MLP's activation: out = act(gate) * up. A model's registry row names it
// (loader/architecture.h); every backend op that computes a gated MLP takes it as a parameter.
// Plain enum values so device code can switch on them too.
#pragma once

#include <string>

namespace minivllm {

enum class Activation : int {
  kSilu = 0,      // SwiGLU: Llama, Qwen, Mistral, Phi-3 (HF "silu" / "swish")
  kGeluTanh = 1,  // GeGLU with the tanh approximation: Gemma (HF "gelu_pytorch_tanh")
};

inline const char* activation_name(Activation a) { return a == Activation::kSilu ? "silu" : "gelu_pytorch_tanh"; }

}  // namespace minivllm
