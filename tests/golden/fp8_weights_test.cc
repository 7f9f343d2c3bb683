// FP8 weights through the whole engine, beyond the goldens (golden_test.cc): the refusal of
// online quantization on an FP8 checkpoint, at world_size 1 and 2, and the engine's model config
// carrying the checkpoint's quantization.
#include <gtest/gtest.h>

#include <string>

#include "api/llm_engine.h"
#include "common/config_key.h"
#include "engine_test_util.h"

namespace minivllm {
namespace {

TEST(Fp8Weights, OnlineQuantizationOfAnFp8CheckpointIsRefusedNamingBoth) {
  for (int world_size : {1, 2}) {
    EngineConfig c = tiny_config("qwen3-tiny-fp8-channel", world_size);
    c.quantization = "fp8";
    try {
      LLMEngine engine(c);
      ADD_FAILURE() << "quantization fp8 accepted on an FP8 checkpoint at world_size " << world_size;
    } catch (const ConfigKeyError& e) {
      EXPECT_EQ(e.key(), "quantization");
      const std::string msg = e.what();
      EXPECT_NE(msg.find("qwen3-tiny-fp8-channel"), std::string::npos) << msg;
      EXPECT_NE(msg.find("compressed-tensors"), std::string::npos) << msg;
    }
  }
}

TEST(Fp8Weights, ModelConfigCarriesTheQuantization) {
  LLMEngine engine(tiny_config("qwen3-tiny-fp8-block"));
  EXPECT_EQ(engine.model_config().quantization.method, QuantMethod::kFp8);
  EXPECT_EQ(engine.model_config().quantization.block_rows, 32);
  EXPECT_EQ(engine.model_config().quantization.scale_suffix, "weight_scale_inv");
}

}  // namespace
}  // namespace minivllm
