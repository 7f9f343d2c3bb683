// The persistent decode kernel (issue 50) against the CPU backend's layer-by-layer ops and against
// the CUDA backend's own plain path: random dense models of the Qwen3 and Llama shapes (and odd
// widths), several sequences of odd context lengths across block boundaries, a padding row, two
// steps (the second reads the first one's k and v back from the cache), graph replay equal to
// eager, bit for bit, and steps beside another stream's work (no deadlock, the same bits).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cuda_test_util.h"

namespace minivllm::cuda_test {
namespace {

struct PdShape {
  const char* name;
  int64_t hidden, inter;
  int nq, nkv, hd, layers;
  bool qk_norm;
};

void PrintTo(const PdShape& s, std::ostream* os) { *os << s.name; }

constexpr PdShape kShapes[] = {
    {"qwen3_0_6b_widths", 1024, 3072, 16, 8, 128, 2, true},        // head_dim 128, group 2
    {"llama_like_hd64_odd_widths", 1536, 2816, 24, 6, 64, 2, false},  // group 4; tiles of 768 and 256 columns
    {"group4_hd128_narrow_inter", 1024, 1408, 8, 2, 128, 3, true},    // 128-column tiles of the down linear
};

struct HostLayer {
  Tensor attn_norm, ffn_norm, q_norm, k_norm, qkv, o, gate_up, down;
};

std::vector<HostLayer> random_layers(const PdShape& s, std::mt19937& rng) {
  std::vector<HostLayer> layers;
  const int64_t q = static_cast<int64_t>(s.nq + 2 * s.nkv) * s.hd, a = static_cast<int64_t>(s.nq) * s.hd;
  const auto inv_sqrt = [](int64_t k) { return 1.0f / std::sqrt(static_cast<float>(k)); };
  for (int l = 0; l < s.layers; ++l) {
    HostLayer h;
    h.attn_norm = random_values({s.hidden}, rng, 0.1f, 1.0f);
    h.ffn_norm = random_values({s.hidden}, rng, 0.1f, 1.0f);
    if (s.qk_norm) {
      h.q_norm = random_values({s.hd}, rng, 0.1f, 1.0f);
      h.k_norm = random_values({s.hd}, rng, 0.1f, 1.0f);
    }
    h.qkv = random_values({q, s.hidden}, rng, inv_sqrt(s.hidden));
    h.o = random_values({s.hidden, a}, rng, inv_sqrt(a));
    h.gate_up = random_values({2 * s.inter, s.hidden}, rng, inv_sqrt(s.hidden));
    h.down = random_values({s.hidden, s.inter}, rng, inv_sqrt(s.inter));
    layers.push_back(h);
  }
  return layers;
}

// The widths, eps, softmax scale and activation of a model of shape s.
void set_shape(PersistentDecodeModel& m, const PdShape& s) {
  m.hidden = s.hidden;
  m.inter = s.inter;
  m.num_q_heads = s.nq;
  m.num_kv_heads = s.nkv;
  m.head_dim = s.hd;
  m.eps = 1e-6f;
  m.scale = 1.0f / std::sqrt(static_cast<float>(s.hd));
  m.activation = Activation::kSilu;
}

PersistentDecodeModel on_backend(Backend& b, const PdShape& s, const std::vector<HostLayer>& host,
                                 const Tensor& cos_sin) {
  PersistentDecodeModel m;
  for (const HostLayer& h : host) {
    PersistentDecodeLayer l;
    l.attn_norm = upload(b, h.attn_norm);
    l.ffn_norm = upload(b, h.ffn_norm);
    if (s.qk_norm) {
      l.q_norm = upload(b, h.q_norm);
      l.k_norm = upload(b, h.k_norm);
    }
    l.qkv = upload(b, h.qkv);
    l.o = upload(b, h.o);
    l.gate_up = upload(b, h.gate_up);
    l.down = upload(b, h.down);
    m.layers.push_back(l);
  }
  m.cos_sin = upload_f32(b, cos_sin);
  set_shape(m, s);
  return m;
}

// The model's layers through the backend's ordinary ops, one after another (the reference).
void layer_by_layer(Backend& b, const PersistentDecodeModel& m, const Tensor& residual, const Tensor& positions,
                    const std::vector<KVCache>& caches, const AttentionMetadata& meta) {
  const int64_t n = meta.num_tokens, hd = m.head_dim, nq = m.num_q_heads, nkv = m.num_kv_heads;
  const DType act = b.activation_dtype();
  Tensor hidden = b.empty(act, {n, m.hidden}), qkv = b.empty(act, {n, (nq + 2 * nkv) * hd});
  Tensor attn = b.empty(act, {n, nq * hd}), proj = b.empty(act, {n, m.hidden});
  Tensor gu = b.empty(act, {n, 2 * m.inter}), a = b.empty(act, {n, m.inter});
  for (size_t l = 0; l < m.layers.size(); ++l) {
    const PersistentDecodeLayer& L = m.layers[l];
    b.rms_norm(residual, L.attn_norm, m.eps, hidden);
    b.linear(hidden, L.qkv, nullptr, qkv);
    b.qk_norm_rope(qkv, m.num_q_heads, m.num_kv_heads, m.head_dim, L.q_norm.empty() ? nullptr : &L.q_norm,
                   L.k_norm.empty() ? nullptr : &L.k_norm, m.eps, positions, m.cos_sin);
    b.store_kvcache(qkv, m.num_q_heads, caches[l], meta);
    b.attention(qkv, m.num_q_heads, caches[l], meta, m.scale, 0, attn, nullptr);
    b.linear(attn, L.o, nullptr, proj);
    b.add_to_residual(proj, residual);
    b.rms_norm(residual, L.ffn_norm, m.eps, hidden);
    b.linear(hidden, L.gate_up, nullptr, gu);
    b.act_mul(gu, a, m.activation);
    b.linear(a, L.down, nullptr, proj);
    b.add_to_residual(proj, residual);
  }
}

constexpr int kBlock = 16;

// One backend's state: caches filled with the same random keys and values everywhere, the
// decode metadata of a step, the residual.
struct Side {
  Backend* b = nullptr;
  PersistentDecodeModel m;
  std::vector<KVCache> caches;
  Tensor residual, positions;
  AttentionMetadata meta;
};

struct Step {
  std::vector<int32_t> ctx, tables;  // tables: [batch, cols]
  int cols = 0;
  bool pad_last = false;  // the last row is a graph's padding row: slot -1, one key of block 0
};

void fill_caches(Side& s, const PdShape& shape, int num_blocks, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t width = static_cast<int64_t>(shape.nq + 2 * shape.nkv) * shape.hd;
  std::vector<int32_t> slots(static_cast<size_t>(num_blocks) * kBlock);
  std::iota(slots.begin(), slots.end(), 0);
  AttentionMetadata store;
  store.slot_mapping = upload_i32(*s.b, slots);
  for (int l = 0; l < shape.layers; ++l) {
    s.caches.push_back(s.b->allocate_kv_cache(num_blocks, kBlock, shape.nkv, shape.hd));
    s.b->store_kvcache(upload(*s.b, random_values({num_blocks * kBlock, width}, rng)), shape.nq, s.caches.back(),
                       store);
  }
}

void set_step(Side& s, const Step& st, const Tensor& residual_host) {
  Backend& b = *s.b;
  const int n = static_cast<int>(st.ctx.size());
  std::vector<int32_t> pos(n), slot(n);
  for (int i = 0; i < n; ++i) {
    const int p = st.ctx[i] - 1;
    pos[i] = p;
    slot[i] = st.tables[static_cast<size_t>(i) * st.cols + p / kBlock] * kBlock + p % kBlock;
  }
  if (st.pad_last) slot[n - 1] = -1;
  s.meta = AttentionMetadata{};
  s.meta.is_prefill = false;
  s.meta.num_seqs = n;
  s.meta.num_tokens = n;
  s.meta.block_size = kBlock;
  s.meta.max_num_blocks = st.cols;
  s.meta.max_seqlen_q = 1;
  s.meta.max_seqlen_k = st.cols * kBlock;
  s.meta.context_lens = upload_i32(b, st.ctx);
  s.meta.slot_mapping = upload_i32(b, slot);
  s.meta.block_tables = upload_i32(b, st.tables, {n, st.cols});
  s.positions = upload_i32(b, pos);
  s.residual = b.empty(DType::kF32, {n, residual_host.size(1)});
  b.copy_from_host(s.residual, residual_host.data());
  b.synchronize();
}

// Contexts of the batch, each sequence's blocks a scattered permutation of the pool.
Step make_step(const std::vector<int32_t>& ctx, int num_blocks, int cols, bool pad_last, uint32_t seed) {
  Step st;
  st.ctx = ctx;
  st.cols = cols;
  st.pad_last = pad_last;
  std::vector<int32_t> pool(num_blocks - 1);  // block 0 is the padding row's alone
  std::iota(pool.begin(), pool.end(), 1);
  std::mt19937 rng(seed);
  std::shuffle(pool.begin(), pool.end(), rng);
  st.tables.assign(ctx.size() * cols, -1);
  for (size_t i = 0; i < ctx.size(); ++i) {
    for (int c = 0; c < cols; ++c) st.tables[i * cols + c] = pool[(i * cols + c) % pool.size()];
  }
  if (pad_last) {
    st.ctx.back() = 1;
    st.tables[(ctx.size() - 1) * cols] = 0;
  }
  return st;
}

std::vector<float> delta(Backend& b, const Tensor& residual, const Tensor& before) {
  std::vector<float> out = download(b, residual);
  for (int64_t i = 0; i < before.numel(); ++i) out[static_cast<size_t>(i)] -= before.ptr<float>()[i];
  return out;
}

class CudaPersistentDecode : public ::testing::TestWithParam<PdShape> {};

// The single-backend tests' setup: a random model of `shape` on b with its caches filled (block
// tables of kCols columns over kNumBlocks blocks); the caller prepares the kernel.
constexpr int kCols = 40, kNumBlocks = 120;
Side gpu_side(Backend& b, const PdShape& shape, std::mt19937& rng, uint32_t cache_seed) {
  Side s;
  s.b = &b;
  s.m = on_backend(b, shape, random_layers(shape, rng), rope_table(kCols * kBlock + 1, shape.hd));
  fill_caches(s, shape, kNumBlocks, cache_seed);
  return s;
}

TEST_P(CudaPersistentDecode, MatchesCpuAndPlainPathOverTwoSteps) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  const PdShape shape = GetParam();
  Backends be;
  std::mt19937 rng(50);
  const std::vector<HostLayer> host = random_layers(shape, rng);
  const int cols = 40, num_blocks = 200;
  const Tensor cos_sin = rope_table(cols * kBlock + 1, shape.hd);
  Side cpu, gpu, plain;
  cpu.b = be.cpu.get();
  gpu.b = be.gpu.get();
  plain.b = be.gpu.get();
  for (Side* s : {&cpu, &gpu, &plain}) {
    s->m = on_backend(*s->b, shape, host, cos_sin);
    fill_caches(*s, shape, num_blocks, 7);
  }
  ASSERT_EQ(be.gpu->prepare_persistent_decode(gpu.m), "");
  ASSERT_GE(gpu.m.max_batch, 4);
  EXPECT_NE(be.cpu->prepare_persistent_decode(cpu.m), "");  // the CPU backend says it has none
  // Batches of 1, 3 and 4 (the last a padding row), contexts across block boundaries, one longer
  // than a split of 32 keys times the warps' share (several splits merged).
  const std::vector<std::vector<int32_t>> batches = {{37}, {1, 300, 513}, {16, 17, 601, 9}};
  for (size_t bi = 0; bi < batches.size(); ++bi) {
    if (static_cast<int>(batches[bi].size()) > gpu.m.max_batch) continue;
    Step st = make_step(batches[bi], num_blocks, cols, bi == 2, 11 + static_cast<uint32_t>(bi));
    for (int step = 0; step < 2; ++step) {
      const std::string what = std::string(shape.name) + " batch " + std::to_string(bi) + " step " +
                                std::to_string(step);
      const Tensor in = random_values({static_cast<int64_t>(st.ctx.size()), shape.hidden}, rng);
      for (Side* s : {&cpu, &gpu, &plain}) set_step(*s, st, in);
      layer_by_layer(*cpu.b, cpu.m, cpu.residual, cpu.positions, cpu.caches, cpu.meta);
      layer_by_layer(*plain.b, plain.m, plain.residual, plain.positions, plain.caches, plain.meta);
      be.gpu->persistent_decode(gpu.m, gpu.residual, gpu.positions, gpu.caches, gpu.meta);
      const std::vector<float> ref = delta(*be.cpu, cpu.residual, in);
      const std::vector<float> got = delta(*be.gpu, gpu.residual, in);
      const Diff d = diff(got, ref);
      expect_close(got, ref, 1e-3, 0.05 * d.ref_max + 1e-3, what + ": persistent vs the CPU backend");
      expect_close(got, delta(*be.gpu, plain.residual, in), 1e-3, 0.05 * d.ref_max + 1e-3,
                   what + ": persistent vs the CUDA plain path");
      // The next step: one more token for each sequence (not the padding row), which reads this
      // step's k and v back from the cache.
      for (size_t i = 0; i + (st.pad_last ? 1 : 0) < st.ctx.size(); ++i) ++st.ctx[i];
    }
  }
}

TEST_P(CudaPersistentDecode, GraphReplayEqualsEager) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  const PdShape shape = GetParam();
  auto gpu_backend = make_cuda_backend(0);
  Backend& b = *gpu_backend;
  std::mt19937 rng(60);
  const int cols = kCols, num_blocks = kNumBlocks;
  Side s = gpu_side(b, shape, rng, 8);
  ASSERT_EQ(b.prepare_persistent_decode(s.m), "");
  const std::vector<int32_t> ctx1 = {200, 45}, ctx2 = {33, 630};
  const Tensor in = random_values({2, shape.hidden}, rng);
  set_step(s, make_step(ctx1, num_blocks, cols, false, 3), in);
  const Tensor input = b.empty(DType::kF32, {2, shape.hidden});
  b.copy(input, s.residual);
  auto body = [&] {
    b.copy(s.residual, input);
    b.persistent_decode(s.m, s.residual, s.positions, s.caches, s.meta);
  };
  body();
  const std::vector<float> eager1 = download(b, s.residual);
  const int graph = b.capture_graph(body);
  ASSERT_GE(graph, 0);
  b.replay_graph(graph);
  EXPECT_EQ(download(b, s.residual), eager1) << "replay of the captured step";
  // New contexts and tables through the same metadata tensors, as the runner uploads them.
  const Step st2 = make_step(ctx2, num_blocks, cols, false, 4);
  std::vector<int32_t> pos(2), slot(2);
  for (int i = 0; i < 2; ++i) {
    pos[i] = st2.ctx[i] - 1;
    slot[i] = st2.tables[static_cast<size_t>(i) * cols + pos[i] / kBlock] * kBlock + pos[i] % kBlock;
  }
  b.copy_from_host(s.meta.context_lens, st2.ctx.data());
  b.copy_from_host(s.meta.block_tables, st2.tables.data());
  b.copy_from_host(s.meta.slot_mapping, slot.data());
  b.copy_from_host(s.positions, pos.data());
  b.replay_graph(graph);
  const std::vector<float> replayed = download(b, s.residual);
  body();
  EXPECT_EQ(download(b, s.residual), replayed) << "replay on new metadata vs eager";
  EXPECT_NE(replayed, eager1);
}

// The kernel waits on other CTAs (grid barriers, head counters), which deadlocks unless every CTA is
// resident at once. The cooperative launch guarantees that (persistent_schedule.cuh): a grid it
// cannot place whole waits for room instead of starting part of itself. Here a second backend keeps
// the same GPU busy with GEMMs on its own stream from another thread while the kernel runs step after
// step; every step must finish, and give the bits it gives alone.
TEST_P(CudaPersistentDecode, CompletesBesideOtherWork) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  const PdShape shape = GetParam();
  auto gpu_backend = make_cuda_backend(0);
  auto other_backend = make_cuda_backend(0);
  Backend& b = *gpu_backend;
  std::mt19937 rng(70);
  Side s = gpu_side(b, shape, rng, 9);
  ASSERT_EQ(b.prepare_persistent_decode(s.m), "");
  const Tensor in = random_values({3, shape.hidden}, rng);
  set_step(s, make_step({129, 7, 450}, kNumBlocks, kCols, false, 5), in);
  const Tensor input = b.empty(DType::kF32, {3, shape.hidden});
  b.copy(input, s.residual);
  b.persistent_decode(s.m, s.residual, s.positions, s.caches, s.meta);
  const std::vector<float> alone = download(b, s.residual);

  Backend& o = *other_backend;
  const Tensor x = upload(o, random_values({2048, 4096}, rng));
  const Tensor w = upload(o, random_values({4096, 4096}, rng));
  const Tensor y = o.empty(DType::kBF16, {2048, 4096});
  std::atomic<bool> stop{false};
  std::atomic<int> gemms{0};
  std::thread busy([&] {
    while (!stop.load()) {
      for (int i = 0; i < 8; ++i) o.linear(x, w, nullptr, y);  // about 0.3 ms of work each on an H200
      o.synchronize();
      gemms += 8;
    }
  });
  while (gemms.load() == 0) std::this_thread::yield();  // the other stream is running
  for (int step = 0; step < 50; ++step) {
    b.copy(s.residual, input);
    b.persistent_decode(s.m, s.residual, s.positions, s.caches, s.meta);
    EXPECT_EQ(download(b, s.residual), alone) << "step " << step << " beside the other stream's GEMMs";
  }
  const int during = gemms.load();
  stop = true;
  busy.join();
  std::printf("[pd-beside] %s: 50 steps beside %d GEMMs of 2048 x 4096 x 4096 on another stream\n", shape.name,
              during);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaPersistentDecode, ::testing::ValuesIn(kShapes),
                         [](const ::testing::TestParamInfo<PdShape>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace minivllm::cuda_test

namespace minivllm::cuda_test {
namespace {

// Where a step of the persistent kernel goes (issue 50's profile, not a check): Qwen3-0.6B's and
// Llama-3.2-1B's shapes at full depth, random weights made on the device, one sequence at 300
// keys and at 2,400; prints each phase's mean over the middle layers, for CTA 0 and the slowest
// CTA. At 2,400 keys each warp's key loop runs ~10 chunks where at 300 it runs one or two: if the
// first chunk's code arrives cold each layer (PERFORMANCE.md, "Stop 66"), the keys' time grows far
// less than the chunks.
TEST(CudaPersistentDecodeBench, PhaseTimes) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  const PdShape shapes[] = {{"qwen3_0_6b", 1024, 3072, 16, 8, 128, 28, true},
                            {"llama_3_2_1b", 2048, 8192, 32, 8, 64, 16, false}};
  for (const PdShape& shape : shapes) {
    auto gpu_backend = make_cuda_backend(0);
    Backend& b = *gpu_backend;
    PersistentDecodeModel m;
    uint64_t key = 1;
    const auto fill = [&](std::vector<int64_t> dims, float lo, float hi) {
      Tensor t = b.empty(DType::kBF16, dims);
      HashedUniform h{key++, lo, (hi - lo) / static_cast<float>(1 << 24)};
      b.fill_hashed_uniform(t, h, 0, t.size(-1));
      return t;
    };
    const int64_t q = static_cast<int64_t>(shape.nq + 2 * shape.nkv) * shape.hd, a = int64_t{shape.nq} * shape.hd;
    for (int l = 0; l < shape.layers; ++l) {
      PersistentDecodeLayer L;
      L.attn_norm = fill({shape.hidden}, 0.9f, 1.1f);
      L.ffn_norm = fill({shape.hidden}, 0.9f, 1.1f);
      if (shape.qk_norm) {
        L.q_norm = fill({shape.hd}, 0.9f, 1.1f);
        L.k_norm = fill({shape.hd}, 0.9f, 1.1f);
      }
      L.qkv = fill({q, shape.hidden}, -0.03f, 0.03f);
      L.o = fill({shape.hidden, a}, -0.03f, 0.03f);
      L.gate_up = fill({2 * shape.inter, shape.hidden}, -0.03f, 0.03f);
      L.down = fill({shape.hidden, shape.inter}, -0.02f, 0.02f);
      m.layers.push_back(L);
    }
    const int cols = 160;  // 2,560 keys
    m.cos_sin = upload_f32(b, rope_table(cols * kBlock + 1, shape.hd));
    set_shape(m, shape);
    ASSERT_EQ(b.prepare_persistent_decode(m), "");
    for (const int keys : {300, 2400}) {
      Side s;
      s.b = &b;
      for (int l = 0; l < shape.layers; ++l) {
        s.caches.push_back(b.allocate_kv_cache(cols, kBlock, shape.nkv, shape.hd));
      }
      std::mt19937 rng(5);
      const Step st = make_step({keys}, cols, cols, false, 1);
      set_step(s, st, random_values({1, shape.hidden}, rng));
      const int sms = 132;  // H200, H100
      m.trace = b.empty(DType::kI64, {sms * 2, kPersistentTraceEvents});
      b.fill_bytes(m.trace, 0);
      for (int i = 0; i < 20; ++i) b.persistent_decode(m, s.residual, s.positions, s.caches, s.meta);
      b.synchronize();
      std::vector<int64_t> tr(static_cast<size_t>(m.trace.numel()));
      b.copy_to_host(tr.data(), m.trace);
      const char* names[] = {"norm (qkv)",     "qkv gemv",     "attention (waits on its heads)",
                             "barrier",        "copy (o)",     "o gemv",
                             "barrier",        "norm (gate/up)", "gate/up gemv",
                             "barrier + copy (down)", "down gemv", "barrier"};
      const int per = 12;
      int ctas = 0;
      while (ctas < 2 * sms && tr[static_cast<size_t>(ctas) * kPersistentTraceEvents] != 0) ++ctas;
      const auto at = [&](int cta, int ev) { return tr[static_cast<size_t>(cta) * kPersistentTraceEvents + ev]; };
      std::printf("[pd-trace] %s, %d keys: %d CTAs, step %.1f us (CTA 0, last stamp - first)\n", shape.name, keys, ctas,
                  (at(0, per * shape.layers) - at(0, 0)) / 1e3);
      for (int k = 0; k < per; ++k) {
        double mean0 = 0, mean_max = 0;
        int n = 0;
        for (int l = 2; l + 2 < shape.layers; ++l, ++n) {
          const int e0 = 1 + per * l + k, e1 = e0 + 1;  // stamp 1 + per l + k opens phase k of layer l
          mean0 += (at(0, e1) - at(0, e0)) / 1e3;
          double mx = 0;
          for (int c = 0; c < ctas; ++c) mx = std::max(mx, (at(c, e1) - at(c, e0)) / 1e3);
          mean_max += mx;
        }
        std::printf("[pd-trace]   %-22s CTA 0 %7.2f us, slowest CTA %7.2f us\n", names[k], mean0 / n,
                    mean_max / n);
      }
      // CTA 0's attention item of layer 3, in parts (the kernel's sub-stamps).
      const auto sub = [&](int k) { return at(0, static_cast<int>(kPersistentTraceEvents) - 16 + k); };
      std::printf("[pd-trace]   layer 3 attention: wait %.2f, q rope %.2f, new k/v %.2f, keys %.2f, "
                  "merge barrier %.2f, merge %.2f us\n",
                  (sub(6) - sub(7)) / 1e3, (sub(1) - sub(0)) / 1e3, (sub(2) - sub(1)) / 1e3, (sub(3) - sub(2)) / 1e3,
                  (sub(4) - sub(3)) / 1e3, (sub(5) - sub(4)) / 1e3);
      std::printf("[pd-trace]   its first chunk of 32 keys: rows and scores %.2f, softmax and values %.2f us\n",
                  (sub(9) - sub(8)) / 1e3, (sub(10) - sub(9)) / 1e3);
    }
  }
}

}  // namespace
}  // namespace minivllm::cuda_test
