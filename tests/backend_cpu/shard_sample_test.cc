// The vocabulary-parallel sampler's stages on the CPU backend (sampling/shard_sampler.h), with the
// ranks simulated in one process: each rank's slice of the logits, the stats all-gathered by hand,
// each rank's picks, merged. Against sample() on the whole rows (the reference sampler): the same
// token on every row, greedy and temperature, with ties across slices, slices that are all -inf,
// and uniforms at their extremes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "cpu_test_util.h"

namespace minivllm::cpu_test {
namespace {

// The tokens the stages give when `world` ranks each hold vocab / world columns of `logits`.
std::vector<int32_t> shard_sample(CpuBackend& b, const std::vector<float>& logits, int64_t rows, int64_t vocab,
                                  int world, const SamplingBatch& batch) {
  const int64_t part = vocab / world;
  std::vector<float> params;
  for (int64_t r = 0; r < rows; ++r) {
    params.push_back(batch.temperature[r]);
    params.push_back(batch.uniform[r]);
  }
  const Tensor p = upload(b, params, {rows * 2});
  std::vector<Tensor> slices;
  std::vector<float> all_stats;
  const Tensor pieces = b.empty(DType::kF32, {rows * Backend::kShardPieceFloats});  // unused on the CPU
  for (int q = 0; q < world; ++q) {
    std::vector<float> s(static_cast<size_t>(rows * part));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < part; ++i) s[r * part + i] = logits[r * vocab + q * part + i];
    }
    slices.push_back(upload(b, s, {rows, part}));
    Tensor stats = b.empty(DType::kF32, {rows * 4});
    b.shard_sample_stats(slices.back(), p, q * part, stats, pieces);
    all_stats.insert(all_stats.end(), stats.ptr<float>(), stats.ptr<float>() + rows * 4);
  }
  const Tensor gathered = upload(b, all_stats, {world * rows * 4});
  std::vector<int32_t> all_picks;
  for (int q = 0; q < world; ++q) {
    Tensor picks = b.empty(DType::kI32, {rows});
    b.shard_sample_pick(slices[q], p, q * part, q, gathered, pieces, picks);
    all_picks.insert(all_picks.end(), picks.ptr<int32_t>(), picks.ptr<int32_t>() + rows);
  }
  Tensor tokens = b.empty(DType::kI32, {rows});
  b.shard_sample_merge(upload_i32(b, all_picks, {world * rows}), world, tokens);
  return std::vector<int32_t>(tokens.ptr<int32_t>(), tokens.ptr<int32_t>() + rows);
}

SamplingBatch plain_batch(int64_t rows, uint32_t seed) {
  SamplingBatch batch;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  const float temps[] = {0.0f, 0.3f, 0.8f, 1.5f};
  for (int64_t r = 0; r < rows; ++r) {
    batch.temperature.push_back(temps[r % 4]);
    batch.top_k.push_back(-1);
    batch.top_p.push_back(1.0f);
    batch.min_p.push_back(0.0f);
    batch.uniform.push_back(r % 9 == 1 ? 0.0f : r % 9 == 2 ? 0.99999994f : u(rng));
  }
  return batch;
}

TEST(CpuShardSample, EqualsTheWholeRowSampler) {
  CpuBackend b(2);
  const int64_t vocab = 1200, rows = 72;
  std::vector<float> logits = random_floats(static_cast<size_t>(rows * vocab), 5, -4.0f, 4.0f);
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < rows; r += 5) logits[r * vocab + (r * 37) % vocab] += 9.0f;  // peaked rows
  for (int64_t r = 2; r < rows; r += 7) {  // the upper half masked: whole slices of the larger worlds hold no weight
    for (int64_t i = vocab / 2; i < vocab; ++i) logits[r * vocab + i] = kNegInf;
  }
  for (int64_t r = 0; r < rows; r += 8) {  // a tie across slices: the lower id wins a greedy row
    logits[r * vocab + 1199] = 20.0f;
    logits[r * vocab + 250] = 20.0f;
  }
  const SamplingBatch batch = plain_batch(rows, 6);
  std::vector<int32_t> want(static_cast<size_t>(rows));
  b.sample(upload(b, logits, {rows, vocab}), batch, want.data());
  for (int world : {1, 2, 3, 4}) {
    const std::vector<int32_t> got = shard_sample(b, logits, rows, vocab, world, batch);
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_EQ(got[r], want[r]) << "world " << world << " row " << r << " T " << batch.temperature[r] << " u "
                                 << batch.uniform[r];
    }
  }
  EXPECT_EQ(want[0], 250);  // greedy with the tie
}

// The draws of many uniforms on one flat-ish row: every crossing of a slice boundary agrees.
TEST(CpuShardSample, UniformGridAcrossSliceBoundaries) {
  CpuBackend b(2);
  const int64_t vocab = 60, rows = 200;
  std::vector<float> row = random_floats(static_cast<size_t>(vocab), 9, -0.5f, 0.5f), logits;
  for (int64_t r = 0; r < rows; ++r) logits.insert(logits.end(), row.begin(), row.end());
  SamplingBatch batch;
  for (int64_t r = 0; r < rows; ++r) {
    batch.temperature.push_back(1.0f);
    batch.top_k.push_back(-1);
    batch.top_p.push_back(1.0f);
    batch.min_p.push_back(0.0f);
    batch.uniform.push_back((static_cast<float>(r) + 0.5f) / static_cast<float>(rows));
  }
  std::vector<int32_t> want(static_cast<size_t>(rows));
  b.sample(upload(b, logits, {rows, vocab}), batch, want.data());
  for (int world : {2, 3, 4, 5}) {
    EXPECT_EQ(shard_sample(b, logits, rows, vocab, world, batch), want) << "world " << world;
  }
}

// NaN and +inf logits are an error of sample()'s; every rank reports it (from the gathered stats),
// whichever slice holds the bad logit. So is a row whose every logit is -inf.
TEST(CpuShardSample, BadLogitsFailOnEveryRank) {
  CpuBackend b(1);
  const int64_t vocab = 40, rows = 2;
  std::vector<float> logits = random_floats(static_cast<size_t>(rows * vocab), 3);
  logits[1 * vocab + 33] = std::numeric_limits<float>::quiet_NaN();
  const SamplingBatch batch = plain_batch(rows, 1);
  EXPECT_THROW(shard_sample(b, logits, rows, vocab, 2, batch), Error);
  std::vector<float> masked(static_cast<size_t>(rows * vocab), -std::numeric_limits<float>::infinity());
  EXPECT_THROW(shard_sample(b, masked, rows, vocab, 2, batch), Error);
}

}  // namespace
}  // namespace minivllm::cpu_test
