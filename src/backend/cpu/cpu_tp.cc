// Tensor parallelism on the CPU backend: the communicator factory, copy_into_columns (a rank's
// slice of the logits into the full rows after the gather) and the vocabulary-parallel sampler's
// stages (sampling/shard_sampler.h).
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/shm_communicator.h"
#include "backend/cpu/cpu_checks.h"
#include "common/check.h"
#include "sampling/shard_sampler.h"

namespace minivllm {

std::unique_ptr<Communicator> CpuBackend::create_communicator(int rank, int world_size, const std::string& bootstrap) {
  MINIVLLM_CHECK(world_size >= 1 && rank >= 0 && rank < world_size)
      << "create_communicator: rank " << rank << " of world " << world_size;
  if (world_size == 1) return make_single_rank_communicator(*this);
  return std::make_unique<ShmCommunicator>(rank, world_size, bootstrap, num_threads_);
}

void CpuBackend::copy_into_columns(const Tensor& dst, int64_t col_start, const Tensor& src) {
  MINIVLLM_CHECK(dst.defined() && src.defined()) << "copy_into_columns: undefined tensor";
  MINIVLLM_CHECK(dst.device() == DeviceKind::kCpu && src.device() == DeviceKind::kCpu)
      << "copy_into_columns: " << src.describe() << " -> " << dst.describe() << " not on the host";
  MINIVLLM_CHECK(dst.dtype() == src.dtype())
      << "copy_into_columns: src " << src.describe() << " and dst " << dst.describe() << " differ in dtype";
  const int64_t cols = dst.size(-1);
  const int64_t width = src.size(-1);
  const int64_t rows = cols == 0 ? 0 : dst.numel() / cols;
  const int64_t src_rows = width == 0 ? 0 : src.numel() / width;
  MINIVLLM_CHECK(col_start >= 0 && col_start + width <= cols)
      << "copy_into_columns: columns [" << col_start << ", " << col_start + width << ") of dst " << dst.describe();
  MINIVLLM_CHECK(width == 0 || cols == 0 || rows == src_rows)
      << "copy_into_columns: src " << src.describe() << " and dst " << dst.describe() << " differ in rows";
  if (rows == 0 || width == 0) return;
  const size_t esize = dtype_size(dst.dtype());
  const size_t row_bytes = static_cast<size_t>(width) * esize;
  char* d = static_cast<char*>(dst.data()) + static_cast<size_t>(col_start) * esize;
  const char* s = static_cast<const char*>(src.data());
  const size_t dst_stride = static_cast<size_t>(cols) * esize;
#pragma omp parallel for num_threads(num_threads_) if (rows >= 4 && rows * width * esize >= (1 << 20)) schedule(static)
  for (int64_t r = 0; r < rows; ++r) std::memcpy(d + r * dst_stride, s + r * row_bytes, row_bytes);
}

namespace {

void check_shard_logits(const Tensor& logits, const Tensor& params, const char* op) {
  cpu::check_tensor(logits, DType::kF32, op, "logits");
  cpu::check_tensor(params, DType::kF32, op, "params");
  MINIVLLM_CHECK(logits.ndim() == 2 && params.numel() >= 2 * logits.size(0))
      << op << ": logits " << logits.describe() << " params " << params.describe();
}

}  // namespace

void CpuBackend::shard_sample_stats(const Tensor& logits, const Tensor& params, int64_t vocab_start,
                                    const Tensor& stats, const Tensor& /*pieces*/) {  // the pick rereads its slice
  check_shard_logits(logits, params, "shard_sample_stats");
  cpu::check_tensor(stats, DType::kF32, "shard_sample_stats", "stats");
  const int64_t rows = logits.size(0), n = logits.size(1);
  MINIVLLM_CHECK_GE(stats.numel(), 4 * rows) << "shard_sample_stats: stats " << stats.describe();
  const float* p = params.ptr<float>();
  auto* out = reinterpret_cast<ShardStats*>(stats.ptr<float>());
#pragma omp parallel for num_threads(num_threads_) if (rows > 1) schedule(static)
  for (int64_t r = 0; r < rows; ++r) out[r] = shard_stats_row(logits.ptr<float>() + r * n, n, vocab_start, p[2 * r]);
}

void CpuBackend::shard_sample_pick(const Tensor& logits, const Tensor& params, int64_t vocab_start, int rank,
                                   const Tensor& all_stats, const Tensor& /*pieces*/, const Tensor& picks) {
  check_shard_logits(logits, params, "shard_sample_pick");
  cpu::check_tensor(all_stats, DType::kF32, "shard_sample_pick", "all_stats");
  cpu::check_tensor(picks, DType::kI32, "shard_sample_pick", "picks");
  const int64_t rows = logits.size(0), n = logits.size(1);
  MINIVLLM_CHECK(rows == 0 || (all_stats.numel() % (4 * rows) == 0 && picks.numel() >= rows))
      << "shard_sample_pick: all_stats " << all_stats.describe() << " picks " << picks.describe() << " for "
      << rows << " rows";
  const int world = rows == 0 ? 1 : static_cast<int>(all_stats.numel() / (4 * rows));
  MINIVLLM_CHECK(rank >= 0 && rank < world) << "shard_sample_pick: rank " << rank << " of " << world;
  const float* p = params.ptr<float>();
  const auto* st = reinterpret_cast<const ShardStats*>(all_stats.ptr<float>());
  int32_t* out = picks.ptr<int32_t>();
  // sample() rejects NaN and +inf logits; so does every rank here, from every rank's stats (so that
  // all of them fail at the same point instead of waiting for each other).
  for (int64_t r = 0; r < rows; ++r) {
    bool any_finite = false;
    for (int q = 0; q < world; ++q) {
      const ShardStats& x = st[q * rows + r];
      MINIVLLM_CHECK(x.bad == 0.0f) << "sampler: row " << r << " has a NaN or +inf logit at token "
                                    << static_cast<int64_t>(q) * n + static_cast<int64_t>(x.bad) - 1;
      any_finite = any_finite || x.max_logit > -std::numeric_limits<float>::infinity();
    }
    MINIVLLM_CHECK(any_finite) << "sampler: row " << r << " has every logit -inf";
  }
#pragma omp parallel for num_threads(num_threads_) if (rows > 1) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<ShardStats> row(static_cast<size_t>(world));
    for (int q = 0; q < world; ++q) row[q] = st[q * rows + r];
    const ShardChoice c = shard_choose(row.data(), world, p[2 * r], p[2 * r + 1]);
    out[r] = c.rank != rank ? -1
                            : shard_pick_row(logits.ptr<float>() + r * n, n, vocab_start, row[rank], p[2 * r], c.target);
  }
}

void CpuBackend::shard_sample_merge(const Tensor& all_picks, int world, const Tensor& tokens) {
  cpu::check_tensor(all_picks, DType::kI32, "shard_sample_merge", "all_picks");
  cpu::check_tensor(tokens, DType::kI32, "shard_sample_merge", "tokens");
  MINIVLLM_CHECK(world >= 1 && all_picks.numel() % world == 0 && all_picks.numel() / world >= tokens.numel())
      << "shard_sample_merge: all_picks " << all_picks.describe() << " of " << world << " ranks, tokens "
      << tokens.describe();
  const int64_t per = all_picks.numel() / world, rows = tokens.numel();
  const int32_t* in = all_picks.ptr<int32_t>();
  int32_t* out = tokens.ptr<int32_t>();
  for (int64_t r = 0; r < rows; ++r) {
    int32_t best = -1;
    for (int q = 0; q < world; ++q) best = std::max(best, in[q * per + r]);
    out[r] = best < 0 ? 0 : best;
  }
}

}  // namespace minivllm
