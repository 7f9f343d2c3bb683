// ModelRunner (seeds: ModelRunner): owns the backend, the model, the paged KV cache and the device
// input buffers of one rank. Sizes the KV cache from measured free memory, warms up, captures decode
// CUDA graphs, turns scheduled Sequences into batches (prepare_prefill / prepare_decode), runs the
// model and samples. It makes no scheduling decisions.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "engine/sequence.h"
#include "loader/model_config.h"
#include "loader/weight_source.h"
#include "model/transformer.h"
#include "runtime/runner_config.h"
#include "runtime/step_profiler.h"

namespace minivllm {

class ModelRunner {
 public:
  ModelRunner(const RunnerConfig& cfg, const ModelConfig& model_cfg, const WeightSource& weights);
  ~ModelRunner();

  // Sampled token ids, one per sequence, in order.
  std::vector<int32_t> run(const std::vector<Sequence*>& seqs, bool is_prefill);

  // Teacher forcing: f32 logits [num_uncached_tokens, V] of every position of one prefill sequence
  // (its block table allocated), row-major on the host.
  std::vector<float> prefill_all_logits(Sequence& seq);

  int num_kvcache_blocks() const { return num_kvcache_blocks_; }
  const Backend& backend() const { return *backend_; }
  bool uses_graphs() const { return !graphs_.empty(); }

 private:
  void allocate_buffers();
  void allocate_kv_cache();
  void warmup();
  void capture_graphs();
  AttentionMetadata prepare_prefill(const std::vector<Sequence*>& seqs);
  // A decode batch's inputs: views of decode_inputs_ laid out for its padded size.
  struct DecodeBatch {
    Tensor input_ids, positions;
    AttentionMetadata meta;
  };
  DecodeBatch prepare_decode(const std::vector<Sequence*>& seqs, int padded_size);
  DecodeBatch decode_batch(int padded_size);
  void write_block_tables(const std::vector<Sequence*>& seqs, int32_t* rows) const;
  std::vector<int32_t> sample(const std::vector<Sequence*>& seqs, const Tensor& logits);

  RunnerConfig cfg_;
  ModelConfig model_cfg_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Transformer> model_;
  std::vector<KVCache> kv_caches_;
  int num_kvcache_blocks_ = 0;
  int max_blocks_per_seq_ = 0;

  // Device inputs, sized once.
  Tensor input_ids_, positions_, slot_mapping_, cu_seqlens_q_, cu_seqlens_k_, block_tables_, last_indices_;
  // Decode inputs of P padded rows, packed so that one copy uploads them all (each host->device
  // copy costs host and stream time at batch 1): ids [P], positions [P], slots [P], context
  // lengths [P], block tables [P, max_blocks_per_seq_]. Each graph captures the views of its P.
  Tensor decode_inputs_;
  // Host staging, reused between steps.
  std::vector<int32_t> h_ids_, h_pos_, h_slots_, h_cuq_, h_cuk_, h_tables_, h_last_, h_decode_;
  std::unique_ptr<StepProfiler> profiler_;  // MINIVLLM_PROFILE_STEPS=1 only

  int decode_batch_size(int n) const;

  std::vector<int> graph_sizes_;  // 1, 2, 4, 8, 16, 32, ... <= min(max_num_seqs, 512)
  std::map<int, int> graphs_;     // decode batch size -> graph handle
};

}  // namespace minivllm
