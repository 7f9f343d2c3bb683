// The decode linears of the two target models, one decode step's worth (the linear benches).
#pragma once

#include <cstdint>
#include <vector>

namespace minivllm::cuda_test {

struct LinearShape {
  const char* name;
  int64_t n, k;
  int per_step;          // how often one decode step runs it (once per layer, or once for the lm_head)
  bool adds_to_residual;  // o / down: the fp32 residual += x w^T (cuBLASLt beta = 1)
};

// Qwen3-0.6B: 16 q / 8 kv heads of 128, hidden 1024, intermediate 3072, 28 layers, vocab 151936.
inline const std::vector<LinearShape> kQwen3Linears = {{"qkv", 4096, 1024, 28, false},
                                                       {"o", 1024, 2048, 28, true},
                                                       {"gate_up", 6144, 1024, 28, false},
                                                       {"down", 1024, 3072, 28, true},
                                                       {"lm_head", 151936, 1024, 1, false}};
// Llama-3.2-1B: 32 q / 8 kv heads of 64, hidden 2048, intermediate 8192, 16 layers, vocab 128256.
inline const std::vector<LinearShape> kLlamaLinears = {{"qkv", 3072, 2048, 16, false},
                                                       {"o", 2048, 2048, 16, true},
                                                       {"gate_up", 16384, 2048, 16, false},
                                                       {"down", 2048, 8192, 16, true},
                                                       {"lm_head", 128256, 2048, 1, false}};

}  // namespace minivllm::cuda_test
