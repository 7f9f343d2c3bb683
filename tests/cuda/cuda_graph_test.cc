// Graph capture and replay, memory accounting and error reporting of the CUDA backend.
#include <gtest/gtest.h>

#include "attention_case.h"
#include "common/check.h"

namespace minivllm::cuda_test {
namespace {

TEST(CudaGraph, ReplayEqualsEagerOnNewInputs) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  auto gpu = make_cuda_backend(0);
  ASSERT_TRUE(gpu->supports_graphs());
  std::mt19937 rng(51);
  const int64_t tokens = 7, hidden = 256, inter = 512;
  Tensor norm_w = upload(*gpu, random_values({hidden}, rng, 0.1f, 1.0f));
  Tensor w = upload(*gpu, random_values({2 * inter, hidden}, rng, 1.0f / 16));
  Tensor x = gpu->empty(DType::kBF16, {tokens, hidden});
  Tensor h = gpu->empty(DType::kBF16, {tokens, hidden});
  Tensor gu = gpu->empty(DType::kBF16, {tokens, 2 * inter});
  Tensor y = gpu->empty(DType::kBF16, {tokens, inter});
  Tensor y32 = gpu->empty(DType::kF32, {tokens, inter});
  auto body = [&] {
    gpu->rms_norm(x, norm_w, 1e-6f, h);
    gpu->linear(h, w, nullptr, gu);
    gpu->act_mul(gu, y, Activation::kSilu);
    gpu->to_f32(y, y32);
  };
  auto set_input = [&](const Tensor& host) {
    std::vector<uint16_t> bf(host.numel());
    convert_from_f32(host.ptr<float>(), DType::kBF16, bf.data(), bf.size());
    gpu->copy_from_host(x, bf.data());
    gpu->synchronize();
  };
  Tensor in1 = random_values({tokens, hidden}, rng), in2 = random_values({tokens, hidden}, rng);
  set_input(in1);
  body();  // warm-up: the gemm plan is made outside the capture
  const int graph = gpu->capture_graph(body);
  ASSERT_GE(graph, 0);
  for (const Tensor* in : {&in2, &in1}) {
    set_input(*in);
    body();
    const std::vector<float> eager = download(*gpu, y32);
    gpu->fill_bytes(y32, 0xFF);
    gpu->replay_graph(graph);
    expect_close(download(*gpu, y32), eager, 0.0, 0.0, "graph replay");
  }
  EXPECT_THROW(gpu->replay_graph(graph + 1), Error);
}

TEST(CudaGraph, DecodeAttentionReplaysWithUpdatedMetadata) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  // Capture decode attention once; change context_lens (as the runtime does before replay) and
  // check the replay against eager attention on the new lengths.
  Backends b;
  AttentionCase c{16, 8, 128, 16, {}, {40, 900, 3}};
  c.decode = true;
  c.extra_table_cols = 10;
  std::mt19937 rng(52);
  auto& gpu = *b.gpu;
  const int table_cols = 70, num_blocks = 3 * table_cols;
  std::vector<int32_t> tables(3 * table_cols);
  for (int i = 0; i < 3 * table_cols; ++i) tables[i] = (i * 7) % num_blocks;  // a permutation
  KVCache cache = gpu.allocate_kv_cache(num_blocks, 16, 8, 128);
  const int64_t width = (16 + 16) * 128;
  {
    // Fill every slot with random keys and values.
    std::vector<int32_t> slots(num_blocks * 16);
    for (size_t i = 0; i < slots.size(); ++i) slots[i] = static_cast<int32_t>(i);
    AttentionMetadata store;
    store.slot_mapping = upload_i32(gpu, slots);
    gpu.store_kvcache(upload(gpu, random_values({num_blocks * 16, width}, rng)), 16, cache, store);
  }
  AttentionMetadata meta;
  meta.is_prefill = false;
  meta.num_seqs = 3;
  meta.num_tokens = 3;
  meta.block_size = 16;
  meta.max_num_blocks = table_cols;
  meta.block_tables = upload_i32(gpu, tables, {3, table_cols});
  meta.context_lens = upload_i32(gpu, {40, 900, 3});
  Tensor qkv = upload(gpu, random_values({3, width}, rng));
  Tensor out = gpu.empty(DType::kBF16, {3, 16 * 128});
  const float scale = 1.0f / std::sqrt(128.0f);
  const int graph = gpu.capture_graph([&] { gpu.attention(qkv, 16, cache, meta, scale, 0, out, nullptr); });
  for (std::vector<int32_t> lens : {std::vector<int32_t>{1, 1111, 17}, std::vector<int32_t>{70 * 16, 5, 600}}) {
    gpu.copy_from_host(meta.context_lens, lens.data());
    gpu.synchronize();
    gpu.attention(qkv, 16, cache, meta, scale, 0, out, nullptr);
    const std::vector<float> eager = download(gpu, out);
    gpu.fill_bytes(out, 0xFF);
    gpu.replay_graph(graph);
    expect_close(download(gpu, out), eager, 0.0, 0.0, "decode attention graph replay");
  }
}

TEST(CudaMemory, PeakTracksEmptyAndErrorsNameTheCause) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  auto gpu = make_cuda_backend(0);
  size_t free_bytes = 0, total = 0;
  gpu->memory_info(&free_bytes, &total);
  EXPECT_GT(total, 0u);
  EXPECT_LE(free_bytes, total);
  gpu->reset_peak_memory();
  const size_t before = gpu->peak_memory_used();
  {
    Tensor t = gpu->empty(DType::kBF16, {1024, 1024});
    EXPECT_GE(gpu->peak_memory_used(), before + (2u << 20));
  }
  try {
    gpu->empty(DType::kF32, {int64_t{1} << 40});  // 4 TiB
    FAIL() << "allocation of 4 TiB succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of device memory"), std::string::npos) << e.what();
  }
  // The device is still usable after the failed allocation.
  Tensor t = gpu->empty(DType::kF32, {4});
  gpu->fill_bytes(t, 0);
  EXPECT_EQ(download(*gpu, t), std::vector<float>(4, 0.0f));
}

}  // namespace
}  // namespace minivllm::cuda_test
