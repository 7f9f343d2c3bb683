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

// The source as it is, without the recipe of its FP8 codes: ShardContext then reads them on the
// host (get_stored_slice, stack_fp8_rows, upload_stored_weight), the reference for the in-place path.
class WithoutFp8Recipe : public WeightSource {
 public:
  explicit WithoutFp8Recipe(const WeightSource& s) : s_(s) {}
  bool has(const std::string& n) const override { return s_.has(n); }
  Tensor get_f32(const std::string& n, const std::vector<int64_t>& shape) const override { return s_.get_f32(n, shape); }
  Tensor get_f32_slice(const std::string& n, const std::vector<int64_t>& shape, int dim, int64_t start,
                       int64_t length) const override {
    return s_.get_f32_slice(n, shape, dim, start, length);
  }
  DType stored_dtype(const std::string& n) const override { return s_.stored_dtype(n); }
  Tensor get_stored_slice(const std::string& n, const std::vector<int64_t>& shape, int dim, int64_t start,
                          int64_t length) const override {
    return s_.get_stored_slice(n, shape, dim, start, length);
  }
  std::optional<HashedUniform> hashed_uniform(const std::string& n) const override { return s_.hashed_uniform(n); }
  std::vector<std::string> names() const override { return s_.names(); }
  std::string describe() const override { return s_.describe(); }

 private:
  const WeightSource& s_;
};

// Dummy FP8 codes made in place (Backend::fill_hashed_e4m3, here the host default) are the host
// path's bytes with its scale grid and blocks: 32 x 32 blocks, per-channel and per-tensor scales,
// for q/k/v and gate/up stacked and down alone, whole and as either rank's shard of two.
TEST(ShardContext, Fp8DummyCodesMadeInPlaceEqualTheHostPath) {
  for (const char* dir : {"qwen3-tiny-fp8-block", "qwen3-tiny-fp8-channel", "llama3-tiny-fp8-tensor"}) {
    const ModelConfig c = load_hf_model_config(std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens/" + dir);
    const auto src = make_dummy_weight_source(c, 4);
    const WithoutFp8Recipe host_src(*src);
    CpuBackendKeepingFp8Linears backend;
    auto comm = make_single_rank_communicator(backend);
    const ShardContext in_place{*src, backend, *comm}, host{host_src, backend, *comm};
    const int64_t h = c.hidden_size, q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
    const int64_t inter = c.intermediate_size;
    const std::string l = "model.layers.1.";
    for (int64_t ws : {1, 2}) {
      for (int64_t rank = 0; rank < ws; ++rank) {
        auto rows = [&](const std::string& n, int64_t r, int64_t k) {
          return ShardPart{l + n, {r, k}, 0, rank * r / ws, r / ws};
        };
        const std::vector<std::vector<ShardPart>> weights = {
            {rows("self_attn.q_proj.weight", q, h), rows("self_attn.k_proj.weight", kv, h),
             rows("self_attn.v_proj.weight", kv, h)},
            {rows("mlp.gate_proj.weight", inter, h), rows("mlp.up_proj.weight", inter, h)},
            {ShardPart{l + "mlp.down_proj.weight", {h, inter}, 1, rank * inter / ws, inter / ws}}};
        for (const std::vector<ShardPart>& parts : weights) {
          const std::string what = std::string(dir) + " " + parts.front().name + " rank " + std::to_string(rank) +
                                   " of " + std::to_string(ws);
          ASSERT_TRUE(in_place.make_fp8_codes_in_place(parts).has_value()) << what;
          const Tensor a = in_place.upload_rows(parts), b = host.upload_rows(parts);
          ASSERT_EQ(a.dtype(), DType::kF8E4M3) << what;
          ASSERT_EQ(b.dtype(), DType::kF8E4M3) << what;
          ASSERT_EQ(a.shape(), b.shape()) << what;
          EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.nbytes())) << what;
          const WeightScales &sa = *a.scales(), &sb = *b.scales();
          EXPECT_EQ(sa.block_rows, sb.block_rows) << what;
          EXPECT_EQ(sa.block_cols, sb.block_cols) << what;
          ASSERT_EQ(sa.grid.shape(), sb.grid.shape()) << what;
          EXPECT_EQ(0, std::memcmp(sa.grid.data(), sb.grid.data(), sa.grid.nbytes())) << what;
        }
      }
    }
  }
}

}  // namespace
}  // namespace minivllm
