#include "runtime/model_runner.h"

#include <algorithm>
#include <numeric>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "backend/kv_cache_spec.h"
#include "common/check.h"
#include "common/config_key.h"
#include "common/tuning.h"
#include "common/host_profile.h"
#include "loader/online_fp8.h"
#include "runtime/backend_select.h"
#include "runtime/decode_seq_order.h"

namespace minivllm {

ModelRunner::ModelRunner(const RunnerConfig& cfg, const ModelConfig& model_cfg, const WeightSource& weights, int rank,
                         const std::string& comm_bootstrap, const std::function<void(Communicator&)>& on_communicator)
    : cfg_(cfg), model_cfg_(model_cfg), rank_(rank) {
  MINIVLLM_CHECK(rank >= 0 && rank < cfg_.world_size) << "rank " << rank << " of world_size " << cfg_.world_size;
  check_tensor_parallel_shapes(model_cfg_, cfg_.world_size, cfg_.enable_expert_parallel);
  // Online quantization is a view of the checkpoint that lives as long as the load (before any device work).
  const std::unique_ptr<WeightSource> quantized = quantize_weights_online(cfg_.quantization, model_cfg_, weights);
  int threads = cfg_.num_threads;
  if (threads == 0 && cfg_.world_size > 1) {  // ranks share the host's cores
    threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / cfg_.world_size);
  }
  backend_ = make_backend(cfg_.backend, cfg_.device_index + rank, threads);
  kv_cache_dtype_ = resolve_kv_cache_dtype(cfg_.kv_cache_dtype, backend_->activation_dtype());
  if (!backend_->supports_kv_cache_dtype(kv_cache_dtype_)) {  // before any weight is loaded
    throw ConfigKeyError("config key", std::string(kKvCacheDtypeKey),
                         std::string(cfg_.kv_cache_dtype).append(" is not supported by the ")
                             .append(backend_->device() == DeviceKind::kCuda ? "cuda" : "cpu").append(" backend (supported: ")
                             .append(backend_->supported_kv_cache_dtypes()).append(")"));
  }
  comm_ = backend_->create_communicator(rank, cfg_.world_size, comm_bootstrap);
  if (on_communicator) on_communicator(*comm_);
  max_blocks_per_seq_ = (cfg_.max_model_length + cfg_.block_size - 1) / cfg_.block_size;
  model_ = std::make_unique<Transformer>(model_cfg_, quantized ? *quantized : weights, *backend_, *comm_,
                                         cfg_.max_num_batched_tokens, cfg_.max_num_seqs, cfg_.max_model_length,
                                         cfg_.enable_expert_parallel);
  graph_sizes_ = {1, 2, 4, 8};
  for (int bs = 16; bs <= std::min(cfg_.max_num_seqs, 512); bs += 16) graph_sizes_.push_back(bs);
  while (!graph_sizes_.empty() && graph_sizes_.back() > cfg_.max_num_seqs) graph_sizes_.pop_back();
  if (StepProfiler::enabled() && rank_ == 0) profiler_ = std::make_unique<StepProfiler>();
  allocate_buffers();
  allocate_kv_cache();
  warmup();
  if (!cfg_.enforce_eager && backend_->supports_graphs()) capture_graphs();
}

ModelRunner::~ModelRunner() = default;

void ModelRunner::allocate_buffers() {
  const int64_t t = cfg_.max_num_batched_tokens, s = cfg_.max_num_seqs;
  input_ids_ = backend_->empty(DType::kI32, {t});
  positions_ = backend_->empty(DType::kI32, {t});
  slot_mapping_ = backend_->empty(DType::kI32, {t});
  cu_seqlens_q_ = backend_->empty(DType::kI32, {s + 1});
  cu_seqlens_k_ = backend_->empty(DType::kI32, {s + 1});
  block_tables_ = backend_->empty(DType::kI32, {s, max_blocks_per_seq_});
  last_indices_ = backend_->empty(DType::kI32, {s});
  decode_inputs_ = backend_->empty(DType::kI32, {s * (kDecodeRows + max_blocks_per_seq_)});
  sampled_ids_ = backend_->empty(DType::kI32, {s});
  backend_->fill_bytes(sampled_ids_, 0);
  if (cfg_.world_size > 1) vp_sampler_ = VocabParallelSampler(*backend_, cfg_.world_size, s);
}

// KV memory is measured, not guessed: what the utilisation target leaves after the weights and
// every activation buffer (all allocated by now; a forward pass allocates nothing more).
// The element type (kv_cache_dtype) sets the bytes a block takes: fp8 blocks are about half as large,
// so the same budget holds about twice the tokens (kv_cache_spec.h).
void ModelRunner::allocate_kv_cache() {
  const int64_t layers = model_cfg_.num_layers;
  const int nkv = model_->num_local_kv_heads(), hd = static_cast<int>(model_cfg_.head_dim);
  int64_t blocks = cfg_.num_kvcache_blocks;
  if (blocks <= 0) {
    size_t free_b = 0, total_b = 0;
    backend_->memory_info(&free_b, &total_b);
    int64_t budget;
    if (backend_->device() == DeviceKind::kCuda) {
      budget = static_cast<int64_t>(cfg_.gpu_memory_utilization * static_cast<double>(total_b)) -
               static_cast<int64_t>(total_b - free_b);
    } else {  // host memory is shared with everything else: a quarter of what is free, 4 GiB at most
      budget = std::min<int64_t>(static_cast<int64_t>(free_b / 4), int64_t{4} << 30);
    }
    const int64_t wanted = static_cast<int64_t>(cfg_.max_num_seqs) * max_blocks_per_seq_;
    blocks = kv_cache_blocks_for_budget(budget, cfg_.block_size, layers, nkv, hd, kv_cache_dtype_);
    if (backend_->device() == DeviceKind::kCpu) blocks = std::min(blocks, wanted);
  }
  if (cfg_.world_size > 1) {  // seeds: every rank holds the same blocks, so the fewest any rank can hold
    int32_t mine = static_cast<int32_t>(std::min<int64_t>(blocks, INT32_MAX));
    Tensor t = backend_->empty(DType::kI32, {1});
    backend_->copy_from_host(t, &mine);
    comm_->all_reduce_min(t);
    backend_->copy_to_host(&mine, t);
    blocks = mine;
  }
  MINIVLLM_CHECK(blocks >= max_blocks_per_seq_)
      << "the KV cache holds " << blocks << " blocks of " << cfg_.block_size
      << " tokens, fewer than one sequence of max_model_length " << cfg_.max_model_length
      << " needs; lower max_model_length or raise gpu_memory_utilization";
  num_kvcache_blocks_ = static_cast<int>(blocks);
  for (int64_t l = 0; l < layers; ++l) {
    KVCache c = backend_->allocate_kv_cache(num_kvcache_blocks_, cfg_.block_size, nkv, hd, kv_cache_dtype_);
    if (backend_->device() == DeviceKind::kCuda) {  // padded decode rows read real, finite memory
      backend_->fill_bytes(c.k, 0);
      backend_->fill_bytes(c.v, 0);
      if (c.k_scale.defined()) {
        backend_->fill_bytes(c.k_scale, 0);
        backend_->fill_bytes(c.v_scale, 0);
      }
    }
    kv_caches_.push_back(c);
  }
}

// A dummy prefill of the largest batch: loads kernels, builds GEMM plans.
void ModelRunner::warmup() {
  if (backend_->device() != DeviceKind::kCuda) return;  // nothing to load on the CPU; it would only cost time
  const int len = std::min(cfg_.max_model_length, cfg_.max_num_batched_tokens);
  const int n = std::max(1, std::min(cfg_.max_num_batched_tokens / len, cfg_.max_num_seqs));
  StepInput in;
  in.is_prefill = true;
  in.block_size = cfg_.block_size;
  in.max_blocks_per_seq = max_blocks_per_seq_;
  in.max_seqlen_q = in.max_seqlen_k = len;
  in.input_ids.assign(static_cast<size_t>(n) * len, 0);
  in.slot_mapping.assign(in.input_ids.size(), -1);  // nothing is stored
  in.block_tables.assign(static_cast<size_t>(n) * max_blocks_per_seq_, 0);  // all read block 0
  in.cu_seqlens_q.push_back(0);
  for (int i = 0; i < n; ++i) {
    for (int p = 0; p < len; ++p) in.positions.push_back(p);
    in.cu_seqlens_q.push_back((i + 1) * len);
    in.last_indices.push_back((i + 1) * len - 1);
    in.sampling.temperature.push_back(0.0f);
    in.sampling.top_k.push_back(-1);
    in.sampling.top_p.push_back(1.0f);
    in.sampling.min_p.push_back(0.0f);
    in.sampling.uniform.push_back(0.0f);
  }
  in.cu_seqlens_k = in.cu_seqlens_q;
  run(in);
}

void ModelRunner::check_input(const StepInput& in) const {
  const int s = in.num_seqs(), n = in.num_tokens(), k = in.num_samples();
  MINIVLLM_CHECK(s >= 1 && s <= cfg_.max_num_seqs) << "a step of " << s << " sequences (max_num_seqs "
                                                   << cfg_.max_num_seqs << ")";
  MINIVLLM_CHECK(n >= 1 && n <= cfg_.max_num_batched_tokens) << "a step of " << n << " tokens";
  MINIVLLM_CHECK(in.block_size == cfg_.block_size && in.max_blocks_per_seq == max_blocks_per_seq_)
      << "StepInput for block_size " << in.block_size << " x " << in.max_blocks_per_seq << " blocks; runner has "
      << cfg_.block_size << " x " << max_blocks_per_seq_;
  const size_t ss = static_cast<size_t>(s), nn = static_cast<size_t>(n);
  MINIVLLM_CHECK(in.positions.size() == nn && in.slot_mapping.size() == nn &&
                 in.block_tables.size() == ss * static_cast<size_t>(max_blocks_per_seq_) &&
                 k >= 0 && k <= s && in.sampling.size() == k)
      << "StepInput arrays disagree in length";
  const size_t np = in.prompt_logprob_rows.size();
  MINIVLLM_CHECK(np == 0 || in.is_prefill) << "prompt logprob rows in a decode step";
  MINIVLLM_CHECK(rank_ != 0 || (in.prompt_logprob_targets.size() == np && in.prompt_logprob_top.size() == np))
      << "StepInput prompt logprob arrays disagree in length";
  for (int32_t r : in.prompt_logprob_rows) MINIVLLM_CHECK(r >= 0 && r < n) << "prompt logprob row " << r;
  MINIVLLM_CHECK(in.pool_rows.empty() || in.is_prefill) << "pooled rows in a decode step";
  for (int32_t r : in.pool_rows) MINIVLLM_CHECK(r >= 0 && r < n) << "pooled row " << r;
  if (in.is_prefill) {
    MINIVLLM_CHECK(in.cu_seqlens_q.size() == ss + 1 && in.cu_seqlens_k.size() == ss + 1) << "StepInput cu_seqlens";
  } else {
    MINIVLLM_CHECK(in.context_lens.size() == ss) << "StepInput context_lens";
  }
}

// Seeds: prepare_prefill: the StepInput's arrays into the fixed device buffers.
AttentionMetadata ModelRunner::prepare_prefill(const StepInput& in) {
  AttentionMetadata m;
  m.is_prefill = true;
  m.block_size = cfg_.block_size;
  m.max_num_blocks = max_blocks_per_seq_;
  m.max_seqlen_q = in.max_seqlen_q;
  m.max_seqlen_k = in.max_seqlen_k;
  const int n = in.num_tokens(), s = in.num_seqs();
  m.num_seqs = s;
  m.num_tokens = n;
  backend_->copy_from_host(input_ids_.rows(0, n), in.input_ids.data());
  backend_->copy_from_host(positions_.rows(0, n), in.positions.data());
  backend_->copy_from_host(slot_mapping_.rows(0, n), in.slot_mapping.data());
  backend_->copy_from_host(cu_seqlens_q_.rows(0, s + 1), in.cu_seqlens_q.data());
  backend_->copy_from_host(cu_seqlens_k_.rows(0, s + 1), in.cu_seqlens_k.data());
  const int k = in.num_samples();  // partial prefill chunks have no sampling row
  if (k > 0) backend_->copy_from_host(last_indices_.rows(0, k), in.last_indices.data());
  backend_->copy_from_host(block_tables_.rows(0, s), in.block_tables.data());
  m.cu_seqlens_q = cu_seqlens_q_.rows(0, s + 1);
  m.cu_seqlens_k = cu_seqlens_k_.rows(0, s + 1);
  m.slot_mapping = slot_mapping_.rows(0, n);
  m.block_tables = block_tables_.rows(0, s);
  return m;
}

// The decode inputs of a batch of `padded_size` rows: views of decode_inputs_ in the packed layout
// of that size, so that a graph captured with them reads whatever the next step uploads there.
ModelRunner::DecodeBatch ModelRunner::decode_batch(int padded_size) {
  const int64_t p = padded_size;
  const Tensor all = decode_inputs_.rows(0, p * (kDecodeRows + max_blocks_per_seq_));
  DecodeBatch b;
  b.input_ids = all.rows(0, p);
  b.positions = all.rows(p, 2 * p);
  AttentionMetadata& m = b.meta;
  m.is_prefill = false;
  m.num_seqs = padded_size;
  m.num_tokens = padded_size;
  m.block_size = cfg_.block_size;
  m.max_num_blocks = max_blocks_per_seq_;
  m.max_seqlen_q = 1;
  m.max_seqlen_k = cfg_.max_model_length;
  m.slot_mapping = all.rows(2 * p, 3 * p);
  m.context_lens = all.rows(3 * p, 4 * p);
  m.seq_order = all.rows(4 * p, 5 * p);
  m.block_tables = all.rows(5 * p, p * (kDecodeRows + max_blocks_per_seq_)).view({p, max_blocks_per_seq_});
  return b;
}

// Seeds: prepare_decode, padded to `padded_size` rows (a graph's batch size): padding rows store
// nothing (slot -1) and attend one zeroed key of block 0. One host->device copy for everything.
ModelRunner::DecodeBatch ModelRunner::prepare_decode(const StepInput& in, int padded_size) {
  const size_t p = static_cast<size_t>(padded_size), mb = static_cast<size_t>(max_blocks_per_seq_);
  const size_t s = static_cast<size_t>(in.num_seqs());
  h_decode_.assign(p * (kDecodeRows + mb), -1);
  int32_t* ids = h_decode_.data();
  int32_t *pos = ids + p, *slots = ids + 2 * p, *ctx = ids + 3 * p, *order = ids + 4 * p, *tables = ids + 5 * p;
  for (size_t i = 0; i < p; ++i) {
    ids[i] = 0;
    pos[i] = 0;
    ctx[i] = 1;
    tables[i * mb] = 0;
  }
  std::copy(in.input_ids.begin(), in.input_ids.end(), ids);
  std::copy(in.positions.begin(), in.positions.end(), pos);
  std::copy(in.slot_mapping.begin(), in.slot_mapping.end(), slots);
  std::copy(in.context_lens.begin(), in.context_lens.end(), ctx);
  std::copy(in.block_tables.begin(), in.block_tables.begin() + static_cast<std::ptrdiff_t>(s * mb), tables);
  longest_context_first(ctx, padded_size, order);
  DecodeBatch b = decode_batch(padded_size);
  backend_->copy_from_host(decode_inputs_.rows(0, static_cast<int64_t>(h_decode_.size())), h_decode_.data());
  return b;
}

// `logits`: this rank's slice of the vocabulary for the step's rows (the whole row at world_size
// 1). The sampled ids end in sampled_ids_ on every rank, so that the next step's pending ids
// resolve on each device; rank 0 also queues their copy to the host.
void ModelRunner::sample(const StepInput& in, const Tensor& logits) {
  Launched l;
  const int k = in.num_samples();
  const Tensor rows = logits.rows(0, k);
  if (cfg_.world_size > 1 && !in.needs_full_logits()) {
    vp_sampler_.sample(*backend_, *comm_, rows, model_->vocab_start(), in.sampling, sampled_ids_);
    if (rank_ == 0) backend_->queue_sampled(sampled_ids_, k);
    l.num_samples = rank_ == 0 ? k : -1;
    launched_.push_back(std::move(l));
    return;
  }
  const Tensor full = model_->gather_logits(rows);  // collective at world_size > 1
  if (rank_ != 0) {
    l.num_samples = -1;
    launched_.push_back(std::move(l));
    comm_->broadcast(sampled_ids_.rows(0, k), 0);  // rank 0's comes with its sampler, deferred or not
    return;
  }
  l.num_samples = k;
  launched_.push_back(std::move(l));
  if (in.sampling.has_penalties()) apply_penalties(in, full);
  if (in.sampling.has_bias()) backend_->apply_logit_bias(full, in.sampling);
  if (in.defer_bitmask) {
    MINIVLLM_CHECK(!in.sampling.has_bitmask()) << "a StepInput with defer_bitmask carries no mask";
    deferred_ = DeferredSample{in.sampling, full};
    return;
  }
  finish_sample(in.sampling, full);
}

void ModelRunner::finish_sample(const SamplingBatch& batch, const Tensor& full) {
  if (batch.has_bitmask()) backend_->apply_token_bitmask(full, batch);
  backend_->sample_async(full, batch, sampled_ids_);
  if (batch.has_logprobs()) {
    launched_.back().logprobs = batch.logprobs;
    launched_.back().logits = full;
  }
  if (cfg_.world_size > 1) comm_->broadcast(sampled_ids_.rows(0, batch.size()), 0);
}

void ModelRunner::sample_deferred(std::vector<int32_t> bitmask, int words) {
  MINIVLLM_CHECK(deferred_.has_value()) << "sample_deferred without a step launched with defer_bitmask";
  DeferredSample d = std::move(*deferred_);
  deferred_.reset();
  MINIVLLM_CHECK(bitmask.size() == static_cast<size_t>(d.batch.size()) * static_cast<size_t>(words) && words > 0)
      << "sample_deferred: " << bitmask.size() << " mask words for " << d.batch.size() << " rows of " << words;
  d.batch.bitmask = std::move(bitmask);
  d.batch.bitmask_words = words;
  HostScope t("runner.sample_deferred");
  finish_sample(d.batch, d.logits);
}

void ModelRunner::apply_penalties(const StepInput& in, const Tensor& logits) {
  const int s = in.num_samples();
  const size_t rows = static_cast<size_t>(s);
  MINIVLLM_CHECK(in.penalty_slots.size() == rows && in.count_offsets.size() == rows + 1 &&
                 in.count_num_prompt.size() == rows &&
                 static_cast<size_t>(in.count_offsets.back()) == in.count_tokens.size())
      << "StepInput penalty arrays disagree in length";
  if (token_counts_.numel() == 0) {
    token_counts_ = backend_->empty(DType::kI32, {cfg_.max_num_seqs, model_cfg_.vocab_size});
    backend_->fill_bytes(token_counts_, 0);
  }
  TokenCountUpdate u;
  for (int r = 0; r < s; ++r) {
    const int32_t slot = in.penalty_slots[r];
    if (slot < 0) continue;
    if (in.count_offsets[r] == in.count_offsets[r + 1]) {  // a decode: last step's token, now its input
      const int32_t token = in.is_prefill ? in.input_ids[in.last_indices[r]] : in.input_ids[r];
      // The engine launches a penalised row only once its input token is known on the host.
      MINIVLLM_CHECK_GE(token, 0) << "penalties need row " << r << "'s input token on the host";
      u.slots.push_back(slot);
      u.tokens.push_back(token);
      u.in_prompt.push_back(0);
      continue;
    }
    u.reset_slots.push_back(slot);
    for (int32_t i = in.count_offsets[r]; i < in.count_offsets[r + 1]; ++i) {
      u.slots.push_back(slot);
      u.tokens.push_back(in.count_tokens[i]);
      u.in_prompt.push_back(i - in.count_offsets[r] < in.count_num_prompt[r] ? 1 : 0);
    }
  }
  backend_->update_token_counts(token_counts_, u);
  backend_->apply_penalties(logits, token_counts_, in.penalty_slots, in.sampling);
}

std::vector<TokenLogprob> ModelRunner::compute_logprobs(const std::vector<int32_t>& want, const Tensor& logits,
                                                        const std::vector<int32_t>& tokens) {
  const int s = static_cast<int>(tokens.size());
  MINIVLLM_CHECK_EQ(want.size(), static_cast<size_t>(s)) << "StepInput logprobs";
  const int k = std::min<int>(*std::max_element(want.begin(), want.end()), static_cast<int>(model_cfg_.vocab_size));
  std::vector<float> chosen(static_cast<size_t>(s)), top_lp(static_cast<size_t>(s) * std::max(k, 0));
  std::vector<int32_t> top_ids(top_lp.size());
  backend_->compute_logprobs(logits, tokens.data(), std::max(k, 0), chosen.data(), top_ids.data(), top_lp.data());
  std::vector<TokenLogprob> out(static_cast<size_t>(s));
  for (int r = 0; r < s; ++r) {
    const int top = std::min(want[r], k);
    if (top < 0) continue;
    out[r].token_id = tokens[r];
    out[r].logprob = chosen[r];
    for (int j = 0; j < top; ++j) out[r].top.emplace_back(top_ids[r * k + j], top_lp[r * k + j]);
  }
  return out;
}

void ModelRunner::for_row_chunks(const std::vector<int32_t>& row_ids,
                                 const std::function<void(int64_t start, int64_t rows)>& f) {
  const int64_t n = static_cast<int64_t>(row_ids.size()), chunk = cfg_.max_num_seqs;
  for (int64_t start = 0; start < n; start += chunk) {
    const int64_t rows = std::min(chunk, n - start);
    backend_->copy_from_host(last_indices_.rows(0, rows), row_ids.data() + start);
    f(start, rows);
  }
}

std::vector<TokenLogprob> ModelRunner::prompt_logprobs(const StepInput& in, const Tensor& hidden) {
  std::vector<TokenLogprob> out;
  for_row_chunks(in.prompt_logprob_rows, [&](int64_t start, int64_t rows) {
    Tensor logits = model_->gather_logits(model_->compute_logits(hidden, &last_indices_, rows));
    if (rank_ != 0) return;
    const auto at = [&](const std::vector<int32_t>& v) {
      return std::vector<int32_t>(v.begin() + start, v.begin() + start + rows);
    };
    std::vector<TokenLogprob> part = compute_logprobs(at(in.prompt_logprob_top), logits, at(in.prompt_logprob_targets));
    out.insert(out.end(), std::make_move_iterator(part.begin()), std::make_move_iterator(part.end()));
  });
  return out;
}

std::vector<std::vector<float>> ModelRunner::pooled_rows(const StepInput& in, const Tensor& hidden) {
  const int64_t h = model_cfg_.hidden_size;
  std::vector<std::vector<float>> out;
  for_row_chunks(in.pool_rows, [&](int64_t, int64_t rows) {
    const std::vector<float> flat = model_->hidden_rows_to_host(hidden, last_indices_, rows);
    for (int64_t r = 0; r < rows; ++r) out.emplace_back(flat.begin() + r * h, flat.begin() + (r + 1) * h);
  });
  return out;
}

SampledTokens ModelRunner::run(const StepInput& in) {
  launch(in);
  return collect();
}

void ModelRunner::launch(const StepInput& in) {
  check_input(in);
  MINIVLLM_CHECK(launched_.size() < 2 && (launched_.empty() || launched_.back().logprobs.empty()))
      << "a step launched while two are in flight, or after one whose logprobs were not collected";
  MINIVLLM_CHECK(!deferred_) << "a step launched before the last one's sample_deferred (its ids are the next inputs)";
  const int n = in.num_seqs();
  const bool pending = std::any_of(in.input_ids.begin(), in.input_ids.end(), is_pending_token);
  if (in.is_prefill) {
    if (profiler_ != nullptr) profiler_->interrupt();
    AttentionMetadata meta = prepare_prefill(in);
    if (pending) backend_->resolve_pending_ids(input_ids_.rows(0, in.num_tokens()), sampled_ids_);
    Tensor hidden = [&] {
      HostScope t("runner.prefill_forward");
      return model_->forward(input_ids_, positions_, kv_caches_, meta);
    }();
    std::vector<TokenLogprob> prompt_lp;
    std::vector<std::vector<float>> pooled;
    if (!in.prompt_logprob_rows.empty() || (rank_ == 0 && !in.pool_rows.empty())) {
      if (!in.prompt_logprob_rows.empty()) prompt_lp = prompt_logprobs(in, hidden);
      if (rank_ == 0 && !in.pool_rows.empty()) pooled = pooled_rows(in, hidden);
      const int k = in.num_samples();  // last_indices_ held those rows: the sampling rows again
      if (k > 0) backend_->copy_from_host(last_indices_.rows(0, k), in.last_indices.data());
    }
    if (in.num_samples() == 0) {  // only partial prefill chunks: KV written, nothing to sample
      Launched none;
      none.num_samples = -1;
      none.prompt_logprobs = std::move(prompt_lp);
      launched_.push_back(std::move(none));
      return;
    }
    sample(in, model_->compute_logits(hidden, &last_indices_, in.num_samples()));
    launched_.back().prompt_logprobs = std::move(prompt_lp);
    launched_.back().pooled = std::move(pooled);
    return;
  }
  // Decode runs at the graph batch sizes, eager or not, so that both compute the same GEMM shapes and
  // graph replay reproduces eager decode token for token.
  StepProfiler* prof = profiler_.get();
  if (prof != nullptr) prof->begin();
  const int padded = decode_batch_size(n);
  auto graph = graphs_.find(padded);
  DecodeBatch batch = [&] {
    HostScope t("runner.prepare_decode");
    return prepare_decode(in, padded);
  }();
  if (pending) backend_->resolve_pending_ids(batch.input_ids, sampled_ids_);
  if (prof != nullptr) {
    backend_->synchronize();
    prof->mark(StepProfiler::kUpload);
  }
  Tensor logits;
  if (graph != graphs_.end()) {
    HostScope t("runner.replay");
    backend_->replay_graph(graph->second);
    logits = model_->logits_buffer();
  } else {
    Tensor hidden = model_->forward(batch.input_ids, batch.positions, kv_caches_, batch.meta);
    logits = model_->compute_logits(hidden, nullptr, padded);
  }
  if (prof != nullptr) {
    backend_->synchronize();
    prof->mark(StepProfiler::kGraph);
  }
  {
    HostScope t("runner.sample");
    sample(in, logits);
  }
  launched_.back().profiled = prof != nullptr;
}

void ModelRunner::launch_detached(const StepInput& in) {
  MINIVLLM_CHECK(rank_ != 0) << "launch_detached is for the workers: rank 0 collects its steps";
  launch(in);
  launched_.clear();
}

SampledTokens ModelRunner::collect() {
  MINIVLLM_CHECK(!launched_.empty()) << "collect() without a launched step";
  MINIVLLM_CHECK(!deferred_ || launched_.size() > 1) << "collect() of a step that awaits sample_deferred";
  const Launched l = std::move(launched_.front());
  launched_.erase(launched_.begin());
  SampledTokens out;
  out.prompt_logprobs = std::move(l.prompt_logprobs);
  out.pooled = std::move(l.pooled);
  if (l.num_samples < 0) {  // nothing sampled here: wait for the step itself
    backend_->synchronize();
    return out;
  }
  out.token_ids.resize(static_cast<size_t>(l.num_samples));
  HostScope t("runner.take_sampled");
  backend_->take_sampled(out.token_ids.data(), l.num_samples);
  if (!l.logprobs.empty()) out.logprobs = compute_logprobs(l.logprobs, l.logits, out.token_ids);
  if (l.profiled) {
    profiler_->mark(StepProfiler::kSample);
    profiler_->end();
  }
  return out;
}

int ModelRunner::decode_batch_size(int n) const {
  if (backend_->device() == DeviceKind::kCpu) return n;  // no graphs: nothing to match
  auto it = std::lower_bound(graph_sizes_.begin(), graph_sizes_.end(), n);
  return it == graph_sizes_.end() ? n : *it;
}

// Seeds: capture_cudagraph, batch sizes 1, 2, 4, 8 and every multiple of 16 up to
// min(max_num_seqs, 512). The backend shares one memory pool between them.
void ModelRunner::capture_graphs() {
  for (int bs : graph_sizes_) {
    StepInput none;
    none.max_blocks_per_seq = max_blocks_per_seq_;
    DecodeBatch batch = prepare_decode(none, bs);
    auto body = [&] {
      Tensor hidden = model_->forward(batch.input_ids, batch.positions, kv_caches_, batch.meta);
      model_->compute_logits(hidden, nullptr, bs);
    };
    body();  // eager once: plans and kernels are ready before capture
    graphs_[bs] = backend_->capture_graph(body);
  }
  backend_->synchronize();
  if (knob_flag("MINIVLLM_PROBE_GRAPH_LAUNCH")) probe_graph_launch();
}

// Diagnostic (MINIVLLM_PROBE_GRAPH_LAUNCH=1): how much of a replay is launch latency. Per graph size,
// the wall time of one replay waited for alone, against one of 20 replays queued back to back
// (whose launches hide behind the previous replay), and the host time inside the launch call.
void ModelRunner::probe_graph_launch() {
  using clock = std::chrono::steady_clock;
  auto us = [](clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); };
  for (const auto& [bs, handle] : graphs_) {
    constexpr int kReps = 20;
    double alone = 0.0, call = 0.0;
    for (int i = 0; i < kReps; ++i) {
      backend_->synchronize();
      const auto t0 = clock::now();
      backend_->replay_graph(handle);
      const auto t1 = clock::now();
      backend_->synchronize();
      alone += us(clock::now() - t0);
      call += us(t1 - t0);
    }
    backend_->synchronize();
    const auto t0 = clock::now();
    for (int i = 0; i < kReps; ++i) backend_->replay_graph(handle);
    backend_->synchronize();
    const double queued = us(clock::now() - t0);
    std::fprintf(stderr, "[graph-launch] batch %3d: alone %8.1f us, queued %8.1f us, launch call %6.1f us\n", bs,
                 alone / kReps, queued / kReps, call / kReps);
  }
}

std::vector<float> ModelRunner::prefill_all_logits(const StepInput& in) {
  check_input(in);
  MINIVLLM_CHECK(in.is_prefill && in.num_seqs() == 1) << "prefill_all_logits takes a one-sequence prefill";
  AttentionMetadata meta = prepare_prefill(in);
  Tensor hidden = model_->forward(input_ids_, positions_, kv_caches_, meta);
  const int64_t n = meta.num_tokens, v = model_cfg_.vocab_size;
  std::vector<float> out(rank_ == 0 ? static_cast<size_t>(n * v) : 0);
  std::vector<int32_t> every_row(static_cast<size_t>(n));
  std::iota(every_row.begin(), every_row.end(), 0);
  for_row_chunks(every_row, [&](int64_t start, int64_t rows) {
    Tensor logits = model_->gather_logits(model_->compute_logits(hidden, &last_indices_, rows));
    if (rank_ == 0) backend_->copy_to_host(out.data() + start * v, logits);
  });
  return out;
}

}  // namespace minivllm
