// GGUF K-quant files on the GPU: Q4_K, Q6_K, Q5_0 and Q8_0 weights stay as stored (quant_gemv.h:
// x rounded to int8 per 32 values for the gemv), other types are decoded to bf16 at upload. The
// tiny llama-quantize files of tests/goldens/gguf-tiny-kquant load on the CUDA backend and follow
// their float64 greedy reference until its first near-tie: a step whose reference margin is below
// the path's near-tie may go either way, and the test stops there and prints it. bf16 activations
// err by ~1e-2 of a logit (kBf16NearTie); the kept blocks' gemv also rounds its input to int8 per 32
// values, as llama.cpp's CUDA gemv (q8_1) does, which moves larger margins on these tiny random
// models (kInt8NearTie; the steps it moved: PERFORMANCE.md, issue 47). The kernels themselves are
// held to the int8 bound against the CPU backend (cuda_quant_gemv_test.cc). The CPU backend must
// follow the reference exactly (golden/gguf_kquant_test.cc).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "api/llm_engine.h"
#include "cuda_test_util.h"

namespace minivllm {
namespace {

constexpr double kBf16NearTie = 0.1;
constexpr double kInt8NearTie = 0.5;

TEST(CudaGgufKquant, TinyFilesLoadAndFollowTheReference) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  // $MINIVLLM_SOURCE_DIR: the tree's copy on the GPU machine, where the build's path does not exist.
  const char* root = std::getenv("MINIVLLM_SOURCE_DIR");
  const std::string dir = std::string(root != nullptr ? root : MINIVLLM_SOURCE_DIR) + "/tests/goldens/gguf-tiny-kquant";
  std::ifstream f(dir + "/goldens.json");
  ASSERT_TRUE(f.good()) << dir;
  const nlohmann::json files = nlohmann::json::parse(f).at("files");
  // Both ways: the blocks decoded to bf16 at load, and kept (quant_gemv.h, the default).
  for (const char* kept : {"0", "1"})
  for (const std::string file : {"llama-Q4_K_M.gguf", "llama-Q6_K.gguf", "qwen3-Q4_K_M.gguf", "qwen2-Q4_K_M.gguf"}) {
    SCOPED_TRACE(file + " MINIVLLM_QUANT_WEIGHTS=" + kept);
    EngineConfig c;
    c.model = dir + "/" + file;
    c.device = "cuda";
    c.block_size = 16;
    c.max_num_seqs = 8;
    c.max_model_length = 256;
    c.max_num_batched_tokens = 1024;
    c.num_kvcache_blocks = 64;
    LLMEngine engine = test::with_env({{"MINIVLLM_QUANT_WEIGHTS", kept}}, [&] { return LLMEngine(c); });
    const nlohmann::json& cases = files.at(file).at("cases");
    std::vector<std::vector<int32_t>> prompts;
    for (const auto& cs : cases) prompts.push_back(cs.at("prompt_ids").get<std::vector<int32_t>>());
    SamplingParams p;
    p.temperature = 0;
    p.ignore_eos = true;
    p.max_tokens = static_cast<int>(cases[0].at("greedy_ids").size());
    const auto outs = engine.generate(prompts, p);
    ASSERT_EQ(outs.size(), prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      const auto want = cases[i].at("greedy_ids").get<std::vector<int32_t>>();
      const auto margins = cases[i].at("greedy_margins").get<std::vector<double>>();
      ASSERT_EQ(outs[i].token_ids.size(), want.size());
      for (size_t s = 0; s < want.size(); ++s) {
        if (margins[s] < (kept[0] == '1' ? kInt8NearTie : kBf16NearTie)) {
          std::cout << "[ note ] " << file << " case " << i << ": compared " << s << " steps, then a near-tie (margin "
                    << margins[s] << ")\n";
          break;
        }
        ASSERT_EQ(outs[i].token_ids[s], want[s]) << "case " << i << " step " << s << " (margin " << margins[s] << ")";
      }
    }
  }
}

}  // namespace
}  // namespace minivllm
