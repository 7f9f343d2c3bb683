// bench_cpu_ops: times the CPU backend's decode-step ops at SmolLM2-135M shapes (hidden 576,
// 30 layers, 9/3 heads, head_dim 64, intermediate 1536, vocab 49152) and prints GFLOP/s, GB/s
// and an estimate of one batch-1 decode step. Usage: bench_cpu_ops [threads] [min_seconds_per_op]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"

namespace {

using minivllm::AttentionMetadata;
using minivllm::Backend;
using minivllm::DType;
using minivllm::KVCache;
using minivllm::Tensor;

constexpr int64_t kHidden = 576, kLayers = 30, kHeads = 9, kKvHeads = 3, kHeadDim = 64, kInter = 1536,
                  kVocab = 49152;

double g_min_seconds = 0.5;

Tensor random_tensor(Backend& b, const std::vector<int64_t>& shape, uint32_t seed) {
  Tensor t = b.empty(DType::kF32, shape);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-0.1f, 0.1f);
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (float& x : v) x = dist(gen);
  b.copy_from_host(t, v.data());
  return t;
}

Tensor i32_tensor(Backend& b, const std::vector<int32_t>& v, const std::vector<int64_t>& shape) {
  Tensor t = b.empty(DType::kI32, shape);
  b.copy_from_host(t, v.data());
  return t;
}

// Median seconds per call over batches of calls filling at least g_min_seconds.
double time_op(const std::function<void()>& op) {
  using clock = std::chrono::steady_clock;
  for (int i = 0; i < 3; ++i) op();
  std::vector<double> samples;
  const auto start = clock::now();
  while (std::chrono::duration<double>(clock::now() - start).count() < g_min_seconds || samples.size() < 5) {
    const auto t0 = clock::now();
    op();
    samples.push_back(std::chrono::duration<double>(clock::now() - t0).count());
  }
  std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
  return samples[samples.size() / 2];
}

void print_row(const std::string& name, double seconds, double flops, double bytes) {
  std::printf("%-34s %10.1f %10.2f %10.2f\n", name.c_str(), seconds * 1e6, flops / seconds * 1e-9,
              bytes / seconds * 1e-9);
}

// y[t, n] = x[t, k] W[n, k]^T: 2tnk flops, reads W and x, writes y.
double bench_linear(Backend& b, const std::string& name, int64_t t, int64_t k, int64_t n) {
  Tensor x = random_tensor(b, {t, k}, 1), w = random_tensor(b, {n, k}, 2), y = b.empty(DType::kF32, {t, n});
  const double s = time_op([&] { b.linear(x, w, nullptr, y); });
  print_row(name + " [" + std::to_string(t) + "x" + std::to_string(k) + "]x[" + std::to_string(n) + "]", s,
            2.0 * t * n * k, 4.0 * (n * k + t * k + t * n));
  return s;
}

// One decode query per sequence over `context` keys: 4 * heads * hd * context flops, reads K and V.
double bench_decode_attention(Backend& b, int batch, int context, int block_size) {
  const int blocks_per_seq = (context + block_size - 1) / block_size;
  KVCache cache = b.allocate_kv_cache(batch * blocks_per_seq, block_size, kKvHeads, kHeadDim);
  b.fill_bytes(cache.k, 0x3c);  // small finite floats
  b.fill_bytes(cache.v, 0x3c);
  std::vector<int32_t> table(static_cast<size_t>(batch) * blocks_per_seq);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
  AttentionMetadata meta;
  meta.is_prefill = false;
  meta.num_seqs = batch;
  meta.num_tokens = batch;
  meta.block_size = block_size;
  meta.max_num_blocks = blocks_per_seq;
  meta.block_tables = i32_tensor(b, table, {batch, blocks_per_seq});
  meta.context_lens = i32_tensor(b, std::vector<int32_t>(batch, context), {batch});
  Tensor qkv = random_tensor(b, {batch, (kHeads + 2 * kKvHeads) * kHeadDim}, 3);
  Tensor out = b.empty(DType::kF32, {batch, kHeads * kHeadDim});
  const double s = time_op([&] { b.attention(qkv, kHeads, cache, meta, 0.125f, /*window=*/0, out, nullptr); });
  print_row("decode attention b" + std::to_string(batch) + " ctx " + std::to_string(context), s,
            4.0 * batch * kHeads * kHeadDim * context, 2.0 * 4.0 * batch * kKvHeads * kHeadDim * context);
  return s;
}

// The four linears of every layer with distinct weights, as in the model: the weights
// (4.4 M floats a layer) stream from DRAM instead of staying in cache as in the rows above.
double bench_layer_linears_cold(Backend& b) {
  struct Layer {
    Tensor qkv, o, gate_up, down;
  };
  std::vector<Layer> layers(kLayers);
  for (Layer& l : layers) {
    l.qkv = b.empty(DType::kF32, {(kHeads + 2 * kKvHeads) * kHeadDim, kHidden});
    l.o = b.empty(DType::kF32, {kHidden, kHeads * kHeadDim});
    l.gate_up = b.empty(DType::kF32, {2 * kInter, kHidden});
    l.down = b.empty(DType::kF32, {kHidden, kInter});
    for (const Tensor* w : {&l.qkv, &l.o, &l.gate_up, &l.down}) b.fill_bytes(*w, 0x3c);
  }
  Tensor x = random_tensor(b, {1, kHidden}, 4), qkv = b.empty(DType::kF32, {1, (kHeads + 2 * kKvHeads) * kHeadDim});
  Tensor gate_up = b.empty(DType::kF32, {1, 2 * kInter}), inter = random_tensor(b, {1, kInter}, 5);
  Tensor y = b.empty(DType::kF32, {1, kHidden});
  const double s = time_op([&] {
    for (const Layer& l : layers) {
      b.linear(x, l.qkv, nullptr, qkv);
      b.linear(x, l.o, nullptr, y);
      b.linear(x, l.gate_up, nullptr, gate_up);
      b.linear(inter, l.down, nullptr, y);
    }
  });
  const double weights = static_cast<double>(kLayers) * (layers[0].qkv.numel() + layers[0].o.numel() +
                                                         layers[0].gate_up.numel() + layers[0].down.numel());
  print_row("30 layers of linears, cold weights", s, 2.0 * weights, 4.0 * weights);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 0;
  if (argc > 2) g_min_seconds = std::atof(argv[2]);
  auto backend = minivllm::make_cpu_backend(threads);
  Backend& b = *backend;
  std::printf("backend %s, SmolLM2-135M shapes\n", b.name().c_str());
  std::printf("%-34s %10s %10s %10s\n", "op", "us", "GFLOP/s", "GB/s");

  double layer = 0;
  layer += bench_linear(b, "qkv_proj", 1, kHidden, (kHeads + 2 * kKvHeads) * kHeadDim);
  layer += bench_linear(b, "o_proj", 1, kHeads * kHeadDim, kHidden);
  layer += bench_linear(b, "gate_up_proj", 1, kHidden, 2 * kInter);
  layer += bench_linear(b, "down_proj", 1, kInter, kHidden);
  const double lm_head = bench_linear(b, "lm_head", 1, kHidden, kVocab);
  double attn_short = 0;
  for (int context : {128, 1024, 4096}) {
    const double s = bench_decode_attention(b, 1, context, 256);
    if (context == 128) attn_short = s;
  }
  bench_decode_attention(b, 8, 1024, 256);
  bench_linear(b, "qkv_proj (prefill)", 129, kHidden, (kHeads + 2 * kKvHeads) * kHeadDim);
  bench_linear(b, "gate_up_proj (prefill)", 129, kHidden, 2 * kInter);

  const double cold = bench_layer_linears_cold(b);

  const double warm_step = kLayers * (layer + attn_short) + lm_head;
  const double cold_step = cold + kLayers * attn_short + lm_head;
  std::printf("\nbatch-1 decode step, linears + attention at ctx 128 (no norms / rope):\n");
  std::printf("  weights in cache: %.2f ms = %.1f tok/s;  weights from DRAM: %.2f ms = %.1f tok/s\n",
              warm_step * 1e3, 1.0 / warm_step, cold_step * 1e3, 1.0 / cold_step);
  return 0;
}
