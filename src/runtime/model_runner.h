// ModelRunner (seeds: ModelRunner): one per rank. Owns the backend, the communicator, this rank's
// shard of the model, its paged KV cache and its device input buffers. Sizes the KV cache from
// measured free memory (the minimum over ranks), warms up, captures decode CUDA graphs (with their
// all-reduces), uploads a StepInput into its buffers, runs the model; rank 0 samples. It makes no
// scheduling decisions and never sees a Sequence: rank 0's engine builds the StepInput, and the
// workers receive the same one (runtime/worker.h).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "backend/backend.h"
#include "engine/sampling_params.h"
#include "engine/step_input.h"
#include "loader/model_config.h"
#include "loader/weight_source.h"
#include "model/transformer.h"
#include "model/vocab_parallel_sampler.h"
#include "runtime/runner_config.h"
#include "runtime/step_profiler.h"

namespace minivllm {

// What rank 0 sampled in one step.
struct SampledTokens {
  std::vector<int32_t> token_ids;  // one per sequence, in order
  // One per sequence when some row asked for logprobs (rows that did not: empty entries), else empty.
  std::vector<TokenLogprob> logprobs;
  // One per StepInput::prompt_logprob_rows entry, in order.
  std::vector<TokenLogprob> prompt_logprobs;
  // One f32 row of H per StepInput::pool_rows entry, in order (rank 0).
  std::vector<std::vector<float>> pooled;
};

class ModelRunner {
 public:
  // Collective when cfg.world_size > 1: every rank constructs its runner at the same time, with
  // `comm_bootstrap` from make_comm_bootstrap (backend_select.h) on rank 0.
  // `on_communicator` sees the communicator as soon as it exists (a watchdog aborts it if a peer dies
  // while the runner is still being built).
  ModelRunner(const RunnerConfig& cfg, const ModelConfig& model_cfg, const WeightSource& weights, int rank = 0,
              const std::string& comm_bootstrap = "",
              const std::function<void(Communicator&)>& on_communicator = {});
  ~ModelRunner();

  // Rank 0: the sampled tokens, one per sequence, in order (penalised first and with their
  // logprobs when rows ask). Other ranks: empty (they compute their shard and send their logits
  // to rank 0). run() is launch() then collect().
  SampledTokens run(const StepInput& in);
  // Async scheduling: launch() queues the step on the device and returns; collect() waits for its
  // tokens. The next step may be launched before this one is collected: input ids < 0 (pending
  // tokens, engine/step_input.h) are taken on the device from the last launched step's sampled ids.
  // Steps are collected in launch order; a step whose rows ask for logprobs is collected before the
  // next launch (its logits are read then).
  void launch(const StepInput& in);
  SampledTokens collect();
  // Rank 0, after launching a StepInput with defer_bitmask: the grammars' masks, filled on the host
  // while the device ran the forward (one row of `words` words per sampling row; bits as
  // SamplingBatch::bitmask), applied before the step samples. Nothing is launched or collected
  // between the launch and this call but the step before it.
  void sample_deferred(std::vector<int32_t> bitmask, int words);
  // Workers (rank > 0): launch() with nothing to collect: no result of a step comes back to a
  // worker's host, its stream orders the steps, and rank 0 has at most two in flight, so the
  // worker reads the next step's message while its device computes this one.
  void launch_detached(const StepInput& in);

  // Teacher forcing: f32 logits [num_tokens, V] of every computed position of a one-sequence
  // prefill, row-major on the host (rank 0; empty on the others).
  std::vector<float> prefill_all_logits(const StepInput& in);

  int rank() const { return rank_; }
  int num_kvcache_blocks() const { return num_kvcache_blocks_; }
  DType kv_cache_dtype() const { return kv_cache_dtype_; }  // kv_cache_dtype resolved on this backend
  int max_blocks_per_seq() const { return max_blocks_per_seq_; }
  const Backend& backend() const { return *backend_; }
  Communicator& communicator() { return *comm_; }
  bool uses_graphs() const { return !graphs_.empty(); }

 private:
  void allocate_buffers();
  void allocate_kv_cache();
  void warmup();
  void capture_graphs();
  void probe_graph_launch();
  AttentionMetadata prepare_prefill(const StepInput& in);
  // A decode batch's inputs: views of decode_inputs_ laid out for its padded size.
  struct DecodeBatch {
    Tensor input_ids, positions;
    AttentionMetadata meta;
  };
  DecodeBatch prepare_decode(const StepInput& in, int padded_size);
  DecodeBatch decode_batch(int padded_size);
  void sample(const StepInput& in, const Tensor& logits);
  // Rank 0: the mask, the sampler and the logits kept for logprobs, for the last launched step.
  void finish_sample(const SamplingBatch& batch, const Tensor& full);
  // Penalties in place on the logits (after the graph), from the counts kept per slot.
  void apply_penalties(const StepInput& in, const Tensor& logits);
  std::vector<TokenLogprob> compute_logprobs(const std::vector<int32_t>& want, const Tensor& logits,
                                             const std::vector<int32_t>& tokens);
  // f(start, rows) for consecutive chunks of at most max_num_seqs of `row_ids` (token rows), each
  // chunk uploaded into last_indices_ first, the rows compute_logits and hidden_rows_to_host read.
  void for_row_chunks(const std::vector<int32_t>& row_ids, const std::function<void(int64_t start, int64_t rows)>& f);
  // The prompt_logprob_rows' logits from the prefill's hidden states, a chunk of rows at a time
  // (collective at world_size > 1; rank 0 returns the logprobs). The caller uploads the sampling
  // rows' indices again afterwards.
  std::vector<TokenLogprob> prompt_logprobs(const StepInput& in, const Tensor& hidden);
  // Rank 0: the pool_rows' final-normed hidden states (the same chunks).
  std::vector<std::vector<float>> pooled_rows(const StepInput& in, const Tensor& hidden);
  void check_input(const StepInput& in) const;

  RunnerConfig cfg_;
  ModelConfig model_cfg_;
  int rank_ = 0;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<Transformer> model_;
  std::vector<KVCache> kv_caches_;
  int num_kvcache_blocks_ = 0;
  DType kv_cache_dtype_ = DType::kF32;
  int max_blocks_per_seq_ = 0;

  // Device inputs, sized once.
  Tensor input_ids_, positions_, slot_mapping_, cu_seqlens_q_, cu_seqlens_k_, block_tables_, last_indices_;
  // Decode inputs of P padded rows, packed so that one copy uploads them all (each host->device
  // copy costs host and stream time at batch 1): ids [P], positions [P], slots [P], context
  // lengths [P], the attention's sequence order [P] (decode_seq_order.h), block tables
  // [P, max_blocks_per_seq_]. Each graph captures the views of its P.
  static constexpr int kDecodeRows = 5;  // the [P] arrays before the block tables
  Tensor decode_inputs_;
  // Host staging, reused between steps.
  std::vector<int32_t> h_decode_;
  std::unique_ptr<StepProfiler> profiler_;  // MINIVLLM_PROFILE_STEPS=1 only
  // Rank 0: the penalties' token counts, i32[max_num_seqs, V] (a row per Scheduler slot),
  // allocated by the first step that has penalties.
  Tensor token_counts_;
  // Every rank: the last launched step's sampled ids, one per sampling row (pending ids read them).
  Tensor sampled_ids_;
  VocabParallelSampler vp_sampler_;  // world_size > 1
  // Launched steps not yet collected, oldest first (at most two).
  struct Launched {
    int num_samples = 0;            // -1: nothing sampled (a step of partial prefill chunks; other ranks)
    std::vector<int32_t> logprobs;  // the rows' logprobs requests, empty when none asks
    Tensor logits;                  // read by collect() for the logprobs
    bool profiled = false;          // a decode step the StepProfiler times
    std::vector<TokenLogprob> prompt_logprobs;  // computed at launch (rank 0)
    std::vector<std::vector<float>> pooled;     // the same
  };
  std::vector<Launched> launched_;
  // Rank 0: the last launched step, launched with defer_bitmask, until sample_deferred: its
  // sampling rows and its logits (penalties and biases applied).
  struct DeferredSample {
    SamplingBatch batch;
    Tensor logits;
  };
  std::optional<DeferredSample> deferred_;

  int decode_batch_size(int n) const;

  std::vector<int> graph_sizes_;  // 1, 2, 4, 8, 16, 32, ... <= min(max_num_seqs, 512)
  std::map<int, int> graphs_;     // decode batch size -> graph handle
};

}  // namespace minivllm
