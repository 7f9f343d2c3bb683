// ShardContext reads a weight in its stored dtype where the backend computes on it, and a MoE
// layer's experts where the backend's expert kernels do (Backend::keeps_expert_dtype): the CUDA
// backend keeps GGUF blocks for its linears but decodes expert blocks to bf16. Checked here with
// the CPU backend, which keeps bf16, and a variant of it whose expert kernels would not.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backend/communicator.h"
#include "backend/cpu/cpu_backend.h"
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

}  // namespace
}  // namespace minivllm
