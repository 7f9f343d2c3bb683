// The GPU penalties, token counts and logprobs against the host reference
// (sampling/logits_processing.h), on odd vocabulary sizes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "cuda_test_util.h"
#include "sampling/logits_processing.h"

namespace minivllm::cuda_test {
namespace {

Tensor random_logits(int rows, int64_t vocab, std::mt19937& rng) {
  Tensor t = host_tensor(DType::kF32, {rows, vocab});
  std::normal_distribution<float> d(0.0f, 3.0f);
  for (int64_t i = 0; i < t.numel(); ++i) t.ptr<float>()[i] = d(rng);
  return t;
}

std::vector<int32_t> download_i32(Backend& b, const Tensor& t) {
  std::vector<int32_t> v(static_cast<size_t>(t.numel()));
  b.copy_to_host(v.data(), t);
  return v;
}

// `gpu_op` on the device copy of `logits` [rows, V] equals `host_row(r, row)` on each host row, bit
// for bit.
template <class GpuOp, class HostRow>
void expect_rows_as_host(Backend& gpu, const Tensor& logits, GpuOp gpu_op, HostRow host_row) {
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  Tensor dev = upload_f32(gpu, logits);
  gpu_op(dev);
  const std::vector<float> got = download(gpu, dev);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> want(logits.ptr<float>() + r * vocab, logits.ptr<float>() + (r + 1) * vocab);
    host_row(static_cast<int>(r), want.data());
    for (int64_t v = 0; v < vocab; ++v) {
      ASSERT_EQ(got[r * vocab + v], want[v]) << "row " << r << " token " << v;
    }
  }
}

class CudaLogitsOps : public ::testing::TestWithParam<int64_t> {};

// Counts kept over several steps on the device (resets, prompt and generated tokens, repeats)
// equal the host's, and the penalties they give equal the host's bit for bit.
TEST_P(CudaLogitsOps, TokenCountsAndPenaltiesMatchTheHost) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  auto gpu = make_cuda_backend(0);
  const int64_t vocab = GetParam();
  const int slots = 7, rows = 5;
  std::mt19937 rng(static_cast<uint32_t>(vocab));
  Tensor counts = gpu->empty(DType::kI32, {slots, vocab});
  gpu->fill_bytes(counts, 0xAB);  // garbage: every used row is reset first
  std::vector<int32_t> host(static_cast<size_t>(slots * vocab), 0);
  const std::vector<int32_t> row_slot = {6, 0, -1, 3, 2};
  // Step 1 recounts every used slot (a prefill); steps 2 and 3 add one generated token each.
  for (int step = 0; step < 3; ++step) {
    TokenCountUpdate u;
    for (int r = 0; r < rows; ++r) {
      const int32_t s = row_slot[r];
      if (s < 0) continue;
      if (step == 0) {
        u.reset_slots.push_back(s);
        std::fill(host.begin() + s * vocab, host.begin() + (s + 1) * vocab, 0);
      }
      const int n = step == 0 ? 40 + 13 * r : 1;
      for (int i = 0; i < n; ++i) {
        const int32_t tok = static_cast<int32_t>(rng() % std::min<int64_t>(vocab, 64));  // repeats
        const bool prompt = step == 0 && i < 25;
        u.slots.push_back(s);
        u.tokens.push_back(tok);
        u.in_prompt.push_back(prompt ? 1 : 0);
        count_token(host.data() + s * vocab, tok, prompt);
      }
    }
    gpu->update_token_counts(counts, u);
  }
  const std::vector<int32_t> got_counts = download_i32(*gpu, counts);
  for (int32_t s : row_slot) {
    if (s < 0) continue;
    for (int64_t v = 0; v < vocab; ++v) {
      ASSERT_EQ(got_counts[s * vocab + v], host[s * vocab + v]) << "slot " << s << " token " << v;
    }
  }

  Tensor logits = random_logits(rows, vocab, rng);
  SamplingBatch b;
  b.presence_penalty = {0.5f, -1.0f, 2.0f, 0.0f, 1.25f};
  b.frequency_penalty = {0.25f, 2.0f, 0.0f, -0.5f, 1.0f};
  b.repetition_penalty = {1.3f, 0.7f, 1.0f, 2.0f, 1.0f};
  Tensor dev = upload_f32(*gpu, logits);
  gpu->apply_penalties(dev, counts, row_slot, b);
  const std::vector<float> got = download(*gpu, dev);
  for (int r = 0; r < rows; ++r) {
    std::vector<float> want(logits.ptr<float>() + r * vocab, logits.ptr<float>() + (r + 1) * vocab);
    if (row_slot[r] >= 0) {
      apply_penalties_row(want.data(), vocab, host.data() + row_slot[r] * vocab, b.presence_penalty[r],
                          b.frequency_penalty[r], b.repetition_penalty[r]);
    }
    for (int64_t v = 0; v < vocab; ++v) {
      ASSERT_EQ(got[r * vocab + v], want[v]) << "row " << r << " token " << v;
    }
  }
}

// Sparse logit biases (logit_bias, and the -inf bans of min_tokens and bad_words) equal the host's
// bit for bit: rows with many entries (more than a CTA's threads), none, one, and the vocabulary's
// first and last ids; the rows without entries are untouched.
TEST_P(CudaLogitsOps, LogitBiasMatchesTheHost) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  auto gpu = make_cuda_backend(0);
  const int64_t vocab = GetParam();
  const int rows = 4;
  std::mt19937 rng(static_cast<uint32_t>(vocab) + 7);
  Tensor logits = random_logits(rows, vocab, rng);
  SamplingBatch b;
  b.bias_offsets.push_back(0);
  for (int r = 0; r < rows; ++r) {
    const int64_t n = r == 0 ? std::min<int64_t>(vocab, 700) : r == 1 ? 0 : r == 2 ? 1 : 2;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t id = r == 3 ? (i == 0 ? 0 : vocab - 1) : r == 2 ? vocab / 2 : i * (vocab / n);
      b.bias_ids.push_back(static_cast<int32_t>(id));
      b.bias_values.push_back(i % 3 == 0 ? -std::numeric_limits<float>::infinity() : 0.37f * static_cast<float>(i % 11) - 2.0f);
    }
    b.bias_offsets.push_back(static_cast<int32_t>(b.bias_ids.size()));
  }
  expect_rows_as_host(*gpu, logits, [&](const Tensor& dev) { gpu->apply_logit_bias(dev, b); },
                      [&](int r, float* want) {
                        const int32_t begin = b.bias_offsets[r];
                        apply_bias_row(want, b.bias_ids.data() + begin, b.bias_values.data() + begin,
                                       b.bias_offsets[r + 1] - begin);
                      });
}

// The structured-output mask equals the host's: a row allowing one token (the last id), a row of
// random words, a row allowing everything; the vocabulary's tail word partly used.
TEST_P(CudaLogitsOps, TokenBitmaskMatchesTheHost) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  auto gpu = make_cuda_backend(0);
  const int64_t vocab = GetParam();
  const int rows = 3;
  std::mt19937 rng(static_cast<uint32_t>(vocab) + 11);
  Tensor logits = random_logits(rows, vocab, rng);
  SamplingBatch b;
  b.bitmask_words = static_cast<int>((vocab + 31) / 32);
  b.bitmask.assign(static_cast<size_t>(rows * b.bitmask_words), 0);
  b.bitmask[static_cast<size_t>((vocab - 1) / 32)] = static_cast<int32_t>(1u << ((vocab - 1) % 32));
  for (int w = 0; w < b.bitmask_words; ++w) {
    b.bitmask[static_cast<size_t>(b.bitmask_words + w)] = static_cast<int32_t>(rng());
    b.bitmask[static_cast<size_t>(2 * b.bitmask_words + w)] = -1;
  }
  expect_rows_as_host(*gpu, logits, [&](const Tensor& dev) { gpu->apply_token_bitmask(dev, b); },
                      [&](int r, float* want) { apply_bitmask_row(want, vocab, b.bitmask.data() + r * b.bitmask_words); });
}

// The mask is applied without waiting for the stream (staged through pinned memory): masks queued
// back to back, each host vector rewritten as soon as the call returns, and a larger batch that
// grows the buffers, each give the host's result.
TEST_P(CudaLogitsOps, TokenBitmasksQueuedBackToBackMatchTheHost) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  auto gpu = make_cuda_backend(0);
  const int64_t vocab = GetParam();
  std::mt19937 rng(static_cast<uint32_t>(vocab) + 23);
  const int words = static_cast<int>((vocab + 31) / 32);
  for (int rows : {2, 2, 5}) {
    Tensor logits = random_logits(rows, vocab, rng);
    std::vector<SamplingBatch> batches(3);
    std::vector<Tensor> devs;
    for (SamplingBatch& b : batches) {
      b.bitmask_words = words;
      for (int i = 0; i < rows * words; ++i) b.bitmask.push_back(static_cast<int32_t>(rng()));
      devs.push_back(upload_f32(*gpu, logits));
    }
    std::vector<std::vector<int32_t>> kept;
    for (size_t i = 0; i < batches.size(); ++i) {
      gpu->apply_token_bitmask(devs[i], batches[i]);
      kept.push_back(batches[i].bitmask);
      std::fill(batches[i].bitmask.begin(), batches[i].bitmask.end(), 0);  // the caller's vector is free again
    }
    for (size_t i = 0; i < batches.size(); ++i) {
      const std::vector<float> got = download(*gpu, devs[i]);
      for (int r = 0; r < rows; ++r) {
        std::vector<float> want(logits.ptr<float>() + r * vocab, logits.ptr<float>() + (r + 1) * vocab);
        apply_bitmask_row(want.data(), vocab, kept[i].data() + r * words);
        for (int64_t v = 0; v < vocab; ++v) ASSERT_EQ(got[r * vocab + v], want[v]) << "mask " << i << " row " << r << " token " << v;
      }
    }
  }
}

TEST_P(CudaLogitsOps, LogprobsMatchTheHost) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  auto gpu = make_cuda_backend(0);
  const int64_t vocab = GetParam();
  const int rows = 9;
  std::mt19937 rng(static_cast<uint32_t>(vocab) + 1);
  Tensor logits = random_logits(rows, vocab, rng);
  float* x = logits.ptr<float>();
  // Ties across threads (the lower id first), a peaked row, a row with -inf entries.
  x[2 * vocab + 1] = 30.0f;
  x[2 * vocab + vocab - 1] = 30.0f;
  x[2 * vocab + vocab / 2] = 30.0f;
  for (int64_t v = 0; v < vocab; v += 3) x[4 * vocab + v] = -INFINITY;
  x[6 * vocab + 17 % vocab] += 40.0f;
  std::vector<int32_t> tokens(rows);
  for (int r = 0; r < rows; ++r) tokens[r] = static_cast<int32_t>(rng() % vocab);
  tokens[4] = 1;  // a finite entry of the -inf row
  const Tensor dev = upload_f32(*gpu, logits);
  for (int k : {0, 1, 5, 20}) {
    std::vector<float> chosen(rows, 7.0f), top_lp(static_cast<size_t>(rows) * k, 7.0f);
    std::vector<int32_t> top_ids(top_lp.size(), -5);
    gpu->compute_logprobs(dev, tokens.data(), k, chosen.data(), top_ids.data(), top_lp.data());
    for (int r = 0; r < rows; ++r) {
      float want_chosen = 0;
      std::vector<int32_t> want_ids(k);
      std::vector<float> want_lp(k);
      logprobs_row(x + r * vocab, vocab, tokens[r], k, &want_chosen, want_ids.data(), want_lp.data());
      EXPECT_NEAR(chosen[r], want_chosen, 1e-4f * std::max(1.0f, std::abs(want_chosen))) << "row " << r << " k " << k;
      for (int j = 0; j < k; ++j) {
        EXPECT_EQ(top_ids[r * k + j], want_ids[j]) << "row " << r << " rank " << j << " k " << k;
        EXPECT_NEAR(top_lp[r * k + j], want_lp[j], 1e-4f * std::max(1.0f, std::abs(want_lp[j])))
            << "row " << r << " rank " << j;
      }
    }
  }
}

// Odd sizes: fewer ids than threads, not a multiple of anything, Llama 3's and Qwen3's.
INSTANTIATE_TEST_SUITE_P(Vocab, CudaLogitsOps, ::testing::Values(int64_t{37}, int64_t{4097}, int64_t{49152},
                                                                  int64_t{128256}, int64_t{151936}));

}  // namespace
}  // namespace minivllm::cuda_test
