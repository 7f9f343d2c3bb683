// The GPU sampler against the host reference sample_row (sampling/sampler.h semantics).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>

#include "cuda_test_util.h"
#include "sampling/sampler.h"

namespace minivllm::cuda_test {
namespace {

constexpr int64_t kVocab = 151936;

Tensor random_logits(int rows, std::mt19937& rng) {
  Tensor t = host_tensor(DType::kF32, {rows, kVocab});
  std::normal_distribution<float> d(0.0f, 2.0f);
  for (int64_t i = 0; i < t.numel(); ++i) t.ptr<float>()[i] = d(rng);
  // A few peaked rows, as a trained model gives.
  for (int r = 0; r < rows; r += 3) {
    for (int j = 0; j < 20; ++j) t.ptr<float>()[r * kVocab + (rng() % kVocab)] += 8.0f + j * 0.5f;
  }
  return t;
}

TEST(CudaSampler, GreedyIsArgmaxLowestIdOnTies) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  auto gpu = make_cuda_backend(0);
  std::mt19937 rng(41);
  const int rows = 33;
  Tensor logits = random_logits(rows, rng);
  logits.ptr<float>()[5 * kVocab + 100] = 50.0f;  // a tie: id 100 must win over 90000
  logits.ptr<float>()[5 * kVocab + 90000] = 50.0f;
  SamplingBatch batch;
  for (int r = 0; r < rows; ++r) {
    batch.temperature.push_back(0.0f);
    batch.top_k.push_back(r % 2 ? 5 : -1);
    batch.top_p.push_back(r % 3 ? 0.9f : 1.0f);
    batch.min_p.push_back(0.0f);
    batch.uniform.push_back(0.5f);
  }
  std::vector<int32_t> tokens(rows, -7);
  gpu->sample(upload_f32(*gpu, logits), batch, tokens.data());
  for (int r = 0; r < rows; ++r) {
    const float* row = logits.ptr<float>() + r * kVocab;
    const int32_t expect = static_cast<int32_t>(std::max_element(row, row + kVocab) - row);
    EXPECT_EQ(tokens[r], expect) << "row " << r;
  }
  EXPECT_EQ(tokens[5], 100);
}

// The greedy fast path splits a row into slices (sampler.cu): odd vocab, -inf rows, equal rows,
// the max in the last id, NaNs, a tie across slices. Expected: the largest value, lowest id, NaNs
// never chosen, 0 when nothing beats -inf (the semantics of the one-CTA kernel).
TEST(CudaSampler, GreedyEdgeRowsAcrossSlices) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  auto gpu = make_cuda_backend(0);
  const int64_t vocab = 5001;
  const int rows = 5;
  Tensor logits = host_tensor(DType::kF32, {rows, vocab});
  float* x = logits.ptr<float>();
  for (int64_t i = 0; i < vocab; ++i) {
    x[i] = -INFINITY;                                          // row 0: nothing beats -inf -> 0
    x[vocab + i] = 1.0f;                                       // row 1: all equal -> 0
    x[2 * vocab + i] = static_cast<float>(i % 97) * 0.01f;     // row 2: max at the last id (set below)
    x[3 * vocab + i] = (i % 7 == 0) ? NAN : -static_cast<float>(i % 13);  // row 3: NaNs, max -0 at id 13
    x[4 * vocab + i] = -1.0f;                                  // row 4: a tie in two slices
  }
  x[2 * vocab + vocab - 1] = 5.0f;
  x[4 * vocab + 4000] = 3.0f;
  x[4 * vocab + 1200] = 3.0f;
  SamplingBatch batch;
  for (int r = 0; r < rows; ++r) {
    batch.temperature.push_back(0.0f);
    batch.top_k.push_back(-1);
    batch.top_p.push_back(1.0f);
    batch.min_p.push_back(0.0f);
    batch.uniform.push_back(0.5f);
  }
  std::vector<int32_t> tokens(rows, -7);
  gpu->sample(upload_f32(*gpu, logits), batch, tokens.data());
  EXPECT_EQ(tokens[0], 0);
  EXPECT_EQ(tokens[1], 0);
  EXPECT_EQ(tokens[2], vocab - 1);
  EXPECT_EQ(tokens[3], 13);  // id 0 is NaN; -0.0f at 13 first
  EXPECT_EQ(tokens[4], 1200);
}

TEST(CudaSampler, FiltersMatchTheHostReference) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  auto gpu = make_cuda_backend(0);
  std::mt19937 rng(42);
  const int rows = 256;
  Tensor logits = random_logits(rows, rng);
  SamplingBatch batch;
  const float temps[] = {0.3f, 0.7f, 1.0f, 1.5f};
  const int top_ks[] = {-1, 1, 20, 50, 1000};
  const float top_ps[] = {1.0f, 0.95f, 0.8f, 0.5f};
  const float min_ps[] = {0.0f, 0.0f, 0.05f, 0.2f};
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (int r = 0; r < rows; ++r) {
    batch.temperature.push_back(temps[rng() % 4]);
    batch.top_k.push_back(top_ks[rng() % 5]);
    batch.top_p.push_back(top_ps[rng() % 4]);
    batch.min_p.push_back(min_ps[rng() % 4]);
    batch.uniform.push_back(u(rng));
  }
  std::vector<int32_t> tokens(rows, -7);
  gpu->sample(upload_f32(*gpu, logits), batch, tokens.data());
  int mismatches = 0;
  for (int r = 0; r < rows; ++r) {
    const int32_t ref = sample_row(logits.ptr<float>() + r * kVocab, kVocab, batch.temperature[r], batch.top_k[r],
                                   batch.top_p[r], batch.min_p[r], batch.uniform[r]);
    if (tokens[r] != ref) {
      ++mismatches;
      std::cerr << "sampler mismatch: row " << r << " gpu " << tokens[r] << " host " << ref << " (T " << batch.temperature[r]
                    << " top_k " << batch.top_k[r] << " top_p " << batch.top_p[r] << " min_p " << batch.min_p[r]
                    << " u " << batch.uniform[r] << ")\n";
    }
  }
  // Near-ties (sums in another order, fp32 against the host's fp64) may flip a rare token.
  EXPECT_LE(mismatches, rows / 100) << "GPU sampler disagrees with sample_row";
}

// Temperature alone (no filter) takes the one-pass online path: every row of a batch, with rows
// whose tail is -inf (a masked vocabulary), at the uniforms' extremes too. (NaN logits are an
// error of sample_row's, checked before sampling.)
TEST(CudaSampler, PlainTemperatureMatchesTheHostReference) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  auto gpu = make_cuda_backend(0);
  std::mt19937 rng(7);
  const int rows = 256;
  Tensor logits = random_logits(rows, rng);
  float* l = logits.ptr<float>();
  for (int r = 1; r < rows; r += 17) std::fill(l + r * kVocab + 1000 + r, l + (r + 1) * kVocab, -INFINITY);
  SamplingBatch batch;
  const float temps[] = {0.2f, 0.6f, 1.0f, 2.0f};
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (int r = 0; r < rows; ++r) {
    batch.temperature.push_back(temps[r % 4]);
    batch.top_k.push_back(-1);
    batch.top_p.push_back(1.0f);
    batch.min_p.push_back(0.0f);
    batch.uniform.push_back(r == 0 ? 0.0f : r == 1 ? 0.9999999f : u(rng));
  }
  std::vector<int32_t> tokens(rows, -7);
  gpu->sample(upload_f32(*gpu, logits), batch, tokens.data());
  int mismatches = 0;
  for (int r = 0; r < rows; ++r) {
    const int32_t ref = sample_row(l + r * kVocab, kVocab, batch.temperature[r], -1, 1.0f, 0.0f, batch.uniform[r]);
    ASSERT_GE(tokens[r], 0);
    ASSERT_LT(tokens[r], kVocab);
    if (tokens[r] != ref) {
      ++mismatches;
      std::cerr << "plain sampler mismatch: row " << r << " gpu " << tokens[r] << " host " << ref << " (T "
                << batch.temperature[r] << " u " << batch.uniform[r] << ")\n";
    }
    if (r % 17 == 1) {
      EXPECT_LT(tokens[r], 1000 + r) << "row " << r << " sampled a -inf id";
    }
  }
  EXPECT_LE(mismatches, rows / 100) << "GPU plain-temperature sampler disagrees with sample_row";
}

// The vocabulary-parallel sampler's stages (Backend::shard_sample_*), ranks simulated on one GPU:
// each rank's column slice, the stats gathered by hand, each rank's picks, merged. Greedy rows give
// the whole row's argmax exactly (ties across slices: the lower id); temperature rows agree with
// the host reference on (almost) every row, as the one-GPU sampler does.
TEST(CudaSampler, ShardStagesMatchTheHostReference) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  auto gpu = make_cuda_backend(0);
  std::mt19937 rng(11);
  const int rows = 96;
  Tensor logits = random_logits(rows, rng);
  float* l = logits.ptr<float>();
  for (int r = 3; r < rows; r += 13) std::fill(l + r * kVocab + kVocab / 2 + 7, l + (r + 1) * kVocab, -INFINITY);
  for (int r = 0; r < rows; r += 8) {  // a tie across the slices of every world below
    l[r * kVocab + 100] = 60.0f;
    l[r * kVocab + kVocab - 1] = 60.0f;
  }
  std::vector<float> params;
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  const float temps[] = {0.0f, 0.3f, 0.6f, 1.0f};
  for (int r = 0; r < rows; ++r) {
    params.push_back(temps[r % 4]);
    params.push_back(r == 1 ? 0.0f : r == 2 ? 0.99999994f : u(rng));
  }
  const Tensor p = gpu->empty(DType::kF32, {rows * 2});
  gpu->copy_from_host(p, params.data());
  for (int world : {2, 4}) {
    const int64_t part = kVocab / world;
    std::vector<Tensor> slices, pieces;  // pieces: each rank's own, from its stats to its pick
    Tensor all_stats = gpu->empty(DType::kF32, {world * rows * 4});
    for (int q = 0; q < world; ++q) {
      Tensor s = host_tensor(DType::kF32, {rows, part});
      for (int r = 0; r < rows; ++r) std::copy(l + r * kVocab + q * part, l + r * kVocab + (q + 1) * part, s.ptr<float>() + r * part);
      slices.push_back(upload_f32(*gpu, s));
      pieces.push_back(gpu->empty(DType::kF32, {rows * Backend::kShardPieceFloats}));
      gpu->fill_bytes(pieces.back(), 0xFF);  // NaN: a piece the stats kernel left unwritten would show
      gpu->shard_sample_stats(slices.back(), p, q * part, all_stats.rows(q * rows * 4, (q + 1) * rows * 4),
                              pieces.back());
    }
    const int64_t per = rows + 5;  // the gathered picks' stride need not be the row count
    Tensor all_picks = gpu->empty(DType::kI32, {world * per});
    gpu->fill_bytes(all_picks, 0xEE);
    for (int q = 0; q < world; ++q) {
      gpu->shard_sample_pick(slices[q], p, q * part, q, all_stats, pieces[q], all_picks.rows(q * per, q * per + rows));
    }
    Tensor tokens = gpu->empty(DType::kI32, {rows});
    gpu->shard_sample_merge(all_picks, world, tokens);
    std::vector<int32_t> got(rows);
    gpu->copy_to_host(got.data(), tokens);
    int mismatches = 0;
    for (int r = 0; r < rows; ++r) {
      const int32_t ref = sample_row(l + r * kVocab, kVocab, params[2 * r], -1, 1.0f, 0.0f, params[2 * r + 1]);
      if (params[2 * r] == 0.0f) {
        EXPECT_EQ(got[r], ref) << "world " << world << " greedy row " << r;
        continue;
      }
      ASSERT_GE(got[r], 0);
      ASSERT_LT(got[r], kVocab);
      if (r % 13 == 3) {
        EXPECT_LT(got[r], kVocab / 2 + 7) << "world " << world << " row " << r << " drew a -inf id";
      }
      if (got[r] != ref) {
        ++mismatches;
        std::cerr << "shard sampler mismatch: world " << world << " row " << r << " gpu " << got[r] << " host " << ref
                  << "\n";
      }
    }
    EXPECT_LE(mismatches, rows / 50) << "world " << world;
    EXPECT_EQ(got[0], 100) << "world " << world << ": the greedy tie goes to the lower id";
  }
}

}  // namespace
}  // namespace minivllm::cuda_test
