// ShardContext reads a weight in its stored dtype where the backend computes on it, and a MoE
// layer's experts where the backend's expert kernels do (Backend::keeps_expert_dtype): the CUDA
// backend keeps GGUF blocks for its linears but decodes expert blocks to bf16. Checked here with
// the CPU backend, which keeps bf16, and a variant of it whose expert kernels would not.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backend/communicator.h"
#include "backend/cpu/cpu_backend.h"
#include "loader/dummy_weights.h"
#include "loader/model_config.h"
#include "loader/safetensors.h"
#include "loader/weight_source.h"
#include "loader_test_util.h"
#include "model/parallel_linear.h"

namespace minivllm {
namespace {

class CpuBackendDecodingExperts : public CpuBackend {
 public:
  CpuBackendDecodingExperts() : CpuBackend(1) {}
  bool keeps_expert_dtype(DType) const override { return false; }
};

TEST(ShardContext, ExpertsComeInTheTypesTheExpertKernelsTake) {
  testing::ScratchDir dir("shard_experts");
  Tensor w = host_tensor(DType::kBF16, {4, 8});
  std::vector<uint16_t> bits(32);
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = f32_to_bf16(0.25f * static_cast<float>(i) - 3.0f);
  std::memcpy(w.data(), bits.data(), bits.size() * 2);
  write_safetensors(dir.file("model.safetensors"), {{"w", w}});
  auto src = open_safetensors_dir(dir.str());
  for (bool decoding : {false, true}) {
    std::unique_ptr<Backend> backend =
        decoding ? std::unique_ptr<Backend>(new CpuBackendDecodingExperts()) : std::unique_ptr<Backend>(new CpuBackend(1));
    auto comm = make_single_rank_communicator(*backend);
    ASSERT_TRUE(backend->keeps_weight_dtype(DType::kBF16));
    const ShardContext linear{*src, *backend, *comm};
    const ShardContext experts{*src, *backend, *comm, /*experts=*/true};
    EXPECT_EQ(linear.upload_rows({linear.row_shard("w", 4, 8)}).dtype(), DType::kBF16);
    const Tensor e = experts.upload_rows({experts.row_shard("w", 4, 8)});
    EXPECT_EQ(e.dtype(), decoding ? backend->weight_dtype() : DType::kBF16) << "decoding " << decoding;
    std::vector<float> values(32);
    if (e.dtype() == DType::kBF16) {
      for (int i = 0; i < 32; ++i) values[i] = bf16_to_f32(e.ptr<uint16_t>()[i]);
    } else {
      ASSERT_EQ(e.dtype(), DType::kF32);
      std::memcpy(values.data(), e.data(), 32 * sizeof(float));
    }
    for (int i = 0; i < 32; ++i) EXPECT_EQ(values[i], bf16_to_f32(bits[i])) << i;  // the same values either way
  }
}

// The CUDA backend's policy for an FP8 checkpoint of a MoE model: the linears keep their codes and
// scales, the experts (whose kernels read bf16) arrive as the dequantized values. Checked with the
// tiny MoE's dummy weights under a 32 x 32 block quantization_config.
class CpuBackendKeepingFp8Linears : public CpuBackend {
 public:
  CpuBackendKeepingFp8Linears() : CpuBackend(1) {}
  bool keeps_weight_dtype(DType stored) const override {
    return stored == DType::kF8E4M3 || CpuBackend::keeps_weight_dtype(stored);
  }
  bool keeps_expert_dtype(DType) const override { return false; }
};

TEST(ShardContext, Fp8ExpertsArriveDecodedWhereTheExpertKernelsTakeNoFp8) {
  ModelConfig c = load_hf_model_config(std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens/qwen3-moe-tiny");
  c.quantization = load_hf_model_config(std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens/qwen3-tiny-fp8-block")
                       .quantization;
  ASSERT_TRUE(c.moe.any());
  const auto src = make_dummy_weight_source(c, 2);
  CpuBackendKeepingFp8Linears backend;
  auto comm = make_single_rank_communicator(backend);
  const ShardContext linear{*src, backend, *comm};
  const ShardContext experts{*src, backend, *comm, /*experts=*/true};
  const std::string q = "model.layers.0.self_attn.q_proj.weight";
  const std::string e = expert_weight_name(*c.arch, WeightRole::kExpertDownProj, 0, 1);
  const int64_t qrows = c.num_heads * c.head_dim, inter = c.moe.moe_intermediate_size;
  ASSERT_EQ(src->stored_dtype(e), DType::kF8E4M3);
  const Tensor lq = linear.upload_rows({linear.row_shard(q, qrows, c.hidden_size)});
  EXPECT_EQ(lq.dtype(), DType::kF8E4M3);
  ASSERT_TRUE(lq.scales() != nullptr);
  const Tensor ed = experts.upload_rows({experts.row_shard(e, c.hidden_size, inter)});
  ASSERT_EQ(ed.dtype(), backend.weight_dtype());
  ASSERT_EQ(ed.dtype(), DType::kF32);
  const Tensor want = src->get_f32(e, {c.hidden_size, inter});
  EXPECT_EQ(std::vector<float>(ed.ptr<float>(), ed.ptr<float>() + ed.numel()),
            std::vector<float>(want.ptr<float>(), want.ptr<float>() + want.numel()));
}

}  // namespace
}  // namespace minivllm
