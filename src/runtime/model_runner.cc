#include "runtime/model_runner.h"

#include <algorithm>
#include <cstdio>

#include "common/check.h"
#include "runtime/backend_select.h"

namespace minivllm {

ModelRunner::ModelRunner(const RunnerConfig& cfg, const ModelConfig& model_cfg, const WeightSource& weights)
    : cfg_(cfg), model_cfg_(model_cfg) {
  backend_ = make_backend(cfg_.backend, cfg_.device_index, cfg_.num_threads);
  max_blocks_per_seq_ = (cfg_.max_model_length + cfg_.block_size - 1) / cfg_.block_size;
  model_ = std::make_unique<Transformer>(model_cfg_, weights, *backend_, cfg_.max_num_batched_tokens,
                                         cfg_.max_num_seqs, cfg_.max_model_length);
  graph_sizes_ = {1, 2, 4, 8};
  for (int bs = 16; bs <= std::min(cfg_.max_num_seqs, 512); bs += 16) graph_sizes_.push_back(bs);
  while (!graph_sizes_.empty() && graph_sizes_.back() > cfg_.max_num_seqs) graph_sizes_.pop_back();
  if (StepProfiler::enabled()) profiler_ = std::make_unique<StepProfiler>();
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
  decode_inputs_ = backend_->empty(DType::kI32, {s * (4 + max_blocks_per_seq_)});
}

// KV memory is measured, not guessed: what the utilisation target leaves after the weights and
// every activation buffer (all allocated by now; a forward pass allocates nothing more).
void ModelRunner::allocate_kv_cache() {
  const int64_t layers = model_cfg_.num_layers;
  const int64_t block_bytes = cfg_.block_size * layers * model_->kv_bytes_per_token_per_layer();
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
    blocks = budget / block_bytes;
    if (backend_->device() == DeviceKind::kCpu) blocks = std::min(blocks, wanted);
  }
  MINIVLLM_CHECK(blocks >= max_blocks_per_seq_)
      << "the KV cache holds " << blocks << " blocks of " << cfg_.block_size
      << " tokens, fewer than one sequence of max_model_length " << cfg_.max_model_length
      << " needs; lower max_model_length or raise gpu_memory_utilization";
  num_kvcache_blocks_ = static_cast<int>(blocks);
  for (int64_t l = 0; l < layers; ++l) {
    KVCache c = backend_->allocate_kv_cache(num_kvcache_blocks_, cfg_.block_size,
                                            static_cast<int>(model_cfg_.num_kv_heads),
                                            static_cast<int>(model_cfg_.head_dim));
    if (backend_->device() == DeviceKind::kCuda) {  // padded decode rows read real, finite memory
      backend_->fill_bytes(c.k, 0);
      backend_->fill_bytes(c.v, 0);
    }
    kv_caches_.push_back(c);
  }
}

// A dummy prefill of the largest batch: loads kernels, builds GEMM plans.
void ModelRunner::warmup() {
  if (backend_->device() != DeviceKind::kCuda) return;  // nothing to load on the CPU; it would only cost time
  const int len = std::min(cfg_.max_model_length, cfg_.max_num_batched_tokens);
  const int n = std::max(1, std::min(cfg_.max_num_batched_tokens / len, cfg_.max_num_seqs));
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<Sequence*> ptrs;
  SamplingParams greedy;
  greedy.temperature = 0;
  for (int i = 0; i < n; ++i) {
    seqs.push_back(std::make_unique<Sequence>(-1 - i, std::vector<int32_t>(len, 0), greedy, cfg_.block_size));
    seqs.back()->block_table.assign(seqs.back()->num_blocks(), 0);  // all read block 0; nothing is stored
    ptrs.push_back(seqs.back().get());
  }
  AttentionMetadata meta = prepare_prefill(ptrs);
  std::fill(h_slots_.begin(), h_slots_.end(), -1);
  backend_->copy_from_host(slot_mapping_.rows(0, meta.num_tokens), h_slots_.data());
  Tensor hidden = model_->forward(input_ids_, positions_, kv_caches_, meta);
  sample(ptrs, model_->compute_logits(hidden, &last_indices_, n));
}

// Copies each sequence's block table into a row of `max_blocks_per_seq_` entries at `rows` (rows
// are pre-filled by the caller, so unused entries keep the caller's padding).
void ModelRunner::write_block_tables(const std::vector<Sequence*>& seqs, int32_t* rows) const {
  const size_t mb = static_cast<size_t>(max_blocks_per_seq_);
  for (size_t i = 0; i < seqs.size(); ++i) {
    const auto& bt = seqs[i]->block_table;
    MINIVLLM_CHECK_LE(bt.size(), mb) << "sequence " << seqs[i]->seq_id();
    std::copy(bt.begin(), bt.end(), rows + i * mb);
  }
}

// Seeds: prepare_prefill. Only the uncached tokens are computed; keys span the whole sequence.
AttentionMetadata ModelRunner::prepare_prefill(const std::vector<Sequence*>& seqs) {
  h_ids_.clear();
  h_pos_.clear();
  h_slots_.clear();
  h_cuq_.assign(1, 0);
  h_cuk_.assign(1, 0);
  h_last_.clear();
  AttentionMetadata m;
  m.is_prefill = true;
  m.block_size = cfg_.block_size;
  m.max_num_blocks = max_blocks_per_seq_;
  for (Sequence* seq : seqs) {
    const int len = seq->num_tokens(), cached = seq->num_cached_tokens;
    const auto& toks = seq->token_ids();
    for (int p = cached; p < len; ++p) {
      h_ids_.push_back(toks[p]);
      h_pos_.push_back(p);
      const int block = seq->block_table[p / cfg_.block_size];
      h_slots_.push_back(block * cfg_.block_size + p % cfg_.block_size);
    }
    h_cuq_.push_back(h_cuq_.back() + len - cached);
    h_cuk_.push_back(h_cuk_.back() + len);
    h_last_.push_back(h_cuq_.back() - 1);
    m.max_seqlen_q = std::max(m.max_seqlen_q, len - cached);
    m.max_seqlen_k = std::max(m.max_seqlen_k, len);
  }
  const int n = static_cast<int>(h_ids_.size()), s = static_cast<int>(seqs.size());
  MINIVLLM_CHECK(n >= 1 && n <= cfg_.max_num_batched_tokens) << "prefill of " << n << " tokens";
  m.num_seqs = s;
  m.num_tokens = n;
  backend_->copy_from_host(input_ids_.rows(0, n), h_ids_.data());
  backend_->copy_from_host(positions_.rows(0, n), h_pos_.data());
  backend_->copy_from_host(slot_mapping_.rows(0, n), h_slots_.data());
  backend_->copy_from_host(cu_seqlens_q_.rows(0, s + 1), h_cuq_.data());
  backend_->copy_from_host(cu_seqlens_k_.rows(0, s + 1), h_cuk_.data());
  backend_->copy_from_host(last_indices_.rows(0, s), h_last_.data());
  h_tables_.assign(static_cast<size_t>(s) * max_blocks_per_seq_, -1);
  write_block_tables(seqs, h_tables_.data());
  backend_->copy_from_host(block_tables_.rows(0, s), h_tables_.data());
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
  const Tensor all = decode_inputs_.rows(0, p * (4 + max_blocks_per_seq_));
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
  m.block_tables = all.rows(4 * p, p * (4 + max_blocks_per_seq_)).view({p, max_blocks_per_seq_});
  return b;
}

// Seeds: prepare_decode, padded to `padded_size` rows (a graph's batch size): padding rows store
// nothing (slot -1) and attend one zeroed key of block 0. One host->device copy for everything.
ModelRunner::DecodeBatch ModelRunner::prepare_decode(const std::vector<Sequence*>& seqs, int padded_size) {
  const size_t p = static_cast<size_t>(padded_size), mb = static_cast<size_t>(max_blocks_per_seq_);
  h_decode_.assign(p * (4 + mb), -1);
  int32_t* ids = h_decode_.data();
  int32_t *pos = ids + p, *slots = ids + 2 * p, *ctx = ids + 3 * p, *tables = ids + 4 * p;
  for (size_t i = 0; i < p; ++i) {
    ids[i] = 0;
    pos[i] = 0;
    ctx[i] = 1;
    tables[i * mb] = 0;
  }
  for (size_t i = 0; i < seqs.size(); ++i) {
    const Sequence* seq = seqs[i];
    const int len = seq->num_tokens();
    ids[i] = seq->last_token();
    pos[i] = len - 1;
    ctx[i] = len;
    slots[i] = seq->block_table.back() * cfg_.block_size + seq->last_block_num_tokens() - 1;
  }
  write_block_tables(seqs, tables);
  DecodeBatch b = decode_batch(padded_size);
  backend_->copy_from_host(decode_inputs_.rows(0, static_cast<int64_t>(h_decode_.size())), h_decode_.data());
  return b;
}

std::vector<int32_t> ModelRunner::sample(const std::vector<Sequence*>& seqs, const Tensor& logits) {
  SamplingBatch b;
  for (Sequence* seq : seqs) {
    const SamplingParams& p = seq->params();
    b.temperature.push_back(p.temperature);
    b.top_k.push_back(p.top_k);
    b.top_p.push_back(p.top_p);
    b.min_p.push_back(p.min_p);
    b.uniform.push_back(seq->next_uniform());
  }
  std::vector<int32_t> out(seqs.size());
  backend_->sample(logits.rows(0, static_cast<int64_t>(seqs.size())), b, out.data());
  return out;
}

std::vector<int32_t> ModelRunner::run(const std::vector<Sequence*>& seqs, bool is_prefill) {
  MINIVLLM_CHECK(!seqs.empty() && static_cast<int>(seqs.size()) <= cfg_.max_num_seqs) << seqs.size() << " sequences";
  const int n = static_cast<int>(seqs.size());
  if (is_prefill) {
    AttentionMetadata meta = prepare_prefill(seqs);
    Tensor hidden = model_->forward(input_ids_, positions_, kv_caches_, meta);
    return sample(seqs, model_->compute_logits(hidden, &last_indices_, n));
  }
  // Decode runs at the graph batch sizes, eager or not, so that both compute the same GEMM shapes and
  // graph replay reproduces eager decode token for token.
  StepProfiler* prof = profiler_.get();
  if (prof != nullptr) prof->begin();
  const int padded = decode_batch_size(n);
  auto graph = graphs_.find(padded);
  DecodeBatch batch = prepare_decode(seqs, padded);
  if (prof != nullptr) {
    backend_->synchronize();
    prof->mark(StepProfiler::kUpload);
  }
  Tensor logits;
  if (graph != graphs_.end()) {
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
  std::vector<int32_t> out = sample(seqs, logits);
  if (prof != nullptr) {
    prof->mark(StepProfiler::kSample);
    prof->end();
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
    const std::vector<Sequence*> none;
    DecodeBatch batch = prepare_decode(none, bs);
    auto body = [&] {
      Tensor hidden = model_->forward(batch.input_ids, batch.positions, kv_caches_, batch.meta);
      model_->compute_logits(hidden, nullptr, bs);
    };
    body();  // eager once: plans and kernels are ready before capture
    graphs_[bs] = backend_->capture_graph(body);
  }
  backend_->synchronize();
}

std::vector<float> ModelRunner::prefill_all_logits(Sequence& seq) {
  std::vector<Sequence*> one = {&seq};
  AttentionMetadata meta = prepare_prefill(one);
  Tensor hidden = model_->forward(input_ids_, positions_, kv_caches_, meta);
  const int64_t n = meta.num_tokens, v = model_cfg_.vocab_size, chunk = cfg_.max_num_seqs;
  std::vector<float> out(static_cast<size_t>(n * v));
  std::vector<int32_t> idx;
  for (int64_t start = 0; start < n; start += chunk) {
    const int64_t rows = std::min(chunk, n - start);
    idx.resize(rows);
    for (int64_t i = 0; i < rows; ++i) idx[i] = static_cast<int32_t>(start + i);
    backend_->copy_from_host(last_indices_.rows(0, rows), idx.data());
    Tensor logits = model_->compute_logits(hidden, &last_indices_, rows);
    backend_->copy_to_host(out.data() + start * v, logits);
  }
  return out;
}

}  // namespace minivllm
