// CpuBackend: the host implementation of Backend, fp32 activations; weights fp32 or kept in the
// checkpoint's own format (f16, bf16, q8_0, q4_0, q4_1: cpu_linear.cc, quant_kernels.h).
// It is both a usable backend (OpenBLAS sgemm for linear layers, OpenMP everywhere else) and the
// reference every CUDA kernel is checked against. The ops are split by concept over cpu_*.cc:
// memory, norms, linear, rope, kv cache, attention, elementwise; this header declares them all.
//
// Threads: one OpenMP team does all the parallel work. OpenBLAS runs single-threaded inside it
// (each thread multiplies its own slice of the weight), so two thread pools never spin against
// each other on a small machine.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/quant_kernels.h"
#include "common/tuning.h"

namespace minivllm {

// Bytes allocated through CpuBackend::empty(); shared with the deleters of the tensors, which
// may outlive the backend.
struct CpuMemoryStats {
  std::atomic<size_t> current{0};
  std::atomic<size_t> peak{0};
  void add(size_t bytes);
  void sub(size_t bytes) { current.fetch_sub(bytes); }
};

class CpuBackend : public Backend {
 public:
  // num_threads <= 0: all cores (omp_get_max_threads(), which honours OMP_NUM_THREADS).
  explicit CpuBackend(int num_threads = 0);

  DeviceKind device() const override { return DeviceKind::kCpu; }
  std::string name() const override;
  DType activation_dtype() const override { return DType::kF32; }
  DType weight_dtype() const override { return DType::kF32; }
  // f32, f16, bf16, q8_0, q4_0, q4_1: linear and embedding compute on them as stored (cpu_linear.cc).
  bool keeps_weight_dtype(DType stored) const override;
  int num_threads() const { return num_threads_; }

  // ---- memory (cpu_memory.cc) ----
  Tensor empty(DType dtype, const std::vector<int64_t>& shape) override;
  void copy_from_host(const Tensor& dst, const void* src) override;
  void copy_to_host(void* dst, const Tensor& src) override;
  void copy(const Tensor& dst, const Tensor& src) override;
  void fill_bytes(const Tensor& dst, uint8_t value) override;
  void fill_hashed_uniform(const Tensor& dst, const HashedUniform& h, int64_t base, int64_t row_stride) override;
  void scale(const Tensor& x, float factor) override;
  void synchronize() override {}
  void memory_info(size_t* free_bytes, size_t* total_bytes) override;
  size_t peak_memory_used() override { return stats_->peak.load(); }
  void reset_peak_memory() override { stats_->peak.store(stats_->current.load()); }
  size_t memory_used() const { return stats_->current.load(); }

  // ---- ops ----
  void embedding(const Tensor& ids, const Tensor& weight, int64_t vocab_start, const Tensor& out) override;
  void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) override;
  void add_rms_norm(const Tensor& x, const Tensor& residual, const Tensor& weight, float eps) override;
  void linear(const Tensor& x, const Tensor& weight, const Tensor* bias, const Tensor& out) override;
  // Fusions (cpu_linear.cc): each thread finishes its own output columns (activation, residual add)
  // in the projection's team.
  void linear_act_mul(const Tensor& x, const Tensor& gate_up_weight, const Tensor& scratch, const Tensor& out,
                      Activation act) override;
  void linear_add_residual(const Tensor& x, const Tensor& weight, const Tensor& scratch,
                           const Tensor& residual) override;
  void qk_norm_rope(const Tensor& qkv, int num_q_heads, int num_kv_heads, int head_dim, const Tensor* q_norm,
                    const Tensor* k_norm, float eps, const Tensor& positions, const Tensor& cos_sin) override;
  void qk_sum_squares(const Tensor& qkv, int num_q_heads, int num_kv_heads, int head_dim,
                      const Tensor& sums) override;
  void qk_norm_full_width(const Tensor& qkv, int num_q_heads, int num_kv_heads, int head_dim, const Tensor& sums,
                          int64_t q_width, int64_t k_width, const Tensor& q_norm, const Tensor& k_norm,
                          float eps) override;
  void store_kvcache(const Tensor& qkv, int num_q_heads, const KVCache& cache,
                     const AttentionMetadata& meta) override;
  void attention(const Tensor& qkv, int num_q_heads, const KVCache& cache, const AttentionMetadata& meta,
                 float scale, int window, const Tensor& out, const Tensor* sinks) override;
  bool supports_attention_sinks() const override { return true; }
  bool supports_activation(Activation) const override { return true; }
  bool supports_softcap() const override { return true; }
  void set_attention_softcap(float cap) override;
  void softcap(const Tensor& x, float cap) override;
  void act_mul(const Tensor& gate_up, const Tensor& out, Activation act) override;
  void add_to_residual(const Tensor& x, const Tensor& residual) override;
  void to_activation(const Tensor& x, const Tensor& out) override;
  // Row-wise memcpy of src[R, c] into columns [col_start, col_start + c) of dst[R, C], any dtype (cpu_tp.cc).
  void copy_into_columns(const Tensor& dst, int64_t col_start, const Tensor& src) override;
  void gather_rows(const Tensor& x, const Tensor& indices, const Tensor& out) override;
  void resolve_pending_ids(const Tensor& ids, const Tensor& sampled) override;
  void to_f32(const Tensor& x, const Tensor& out) override;

  // ---- mixture of experts (cpu_moe.cc; the kernels as host functions: cpu_moe.h) ----
  bool supports_moe() const override { return true; }
  void moe_route(const Tensor& router_logits, bool renormalize, const Tensor& topk_ids,
                 const Tensor& topk_weights) override;
  void moe_route_biased(const Tensor& router_logits, const Tensor& score_bias, bool sigmoid, int groups,
                        int topk_groups, bool renormalize, float scale, const Tensor& topk_ids,
                        const Tensor& topk_weights) override;
  void moe_experts_add(const Tensor& x, const MoeExpertWeights& w, const Tensor& topk_ids, const Tensor& topk_weights,
                       const MoeScratch& scratch, const Tensor& out, Activation act) override;
  void sigmoid_gate_rows(const Tensor& x, const Tensor& gate, const Tensor& out) override;

  // ---- KV cache: [num_blocks, block_size, num_kv_heads, head_dim] fp32, k and v apart; or fp8
  // e4m3 with f32 scales [num_blocks, block_size, num_kv_heads] (cpu_kvcache.cc) ----
  using Backend::allocate_kv_cache;
  KVCache allocate_kv_cache(int num_blocks, int block_size, int num_kv_heads, int head_dim, DType dtype) override;
  bool supports_kv_cache_dtype(DType dtype) const override;
  std::string supported_kv_cache_dtypes() const override;

  // ---- sampling: the host reference sampler, logits are already on the host ----
  void sample(const Tensor& logits, const SamplingBatch& batch, int32_t* out_tokens) override;
  // The vocabulary-parallel sampler's stages: sampling/shard_sampler.h row by row (cpu_tp.cc).
  void shard_sample_stats(const Tensor& logits, const Tensor& params, int64_t vocab_start,
                          const Tensor& stats, const Tensor& pieces) override;
  void shard_sample_pick(const Tensor& logits, const Tensor& params, int64_t vocab_start, int rank,
                         const Tensor& all_stats, const Tensor& pieces, const Tensor& picks) override;
  void shard_sample_merge(const Tensor& all_picks, int world, const Tensor& tokens) override;
  // Penalties and logprobs: the host reference, rows in parallel (cpu_logits_ops.cc).
  void update_token_counts(const Tensor& counts, const TokenCountUpdate& update) override;
  void apply_penalties(const Tensor& logits, const Tensor& counts, const std::vector<int32_t>& slots,
                       const SamplingBatch& batch) override;
  void apply_logit_bias(const Tensor& logits, const SamplingBatch& batch) override;
  void apply_token_bitmask(const Tensor& logits, const SamplingBatch& batch) override;
  void compute_logprobs(const Tensor& logits, const int32_t* tokens, int k, float* chosen, int32_t* top_ids,
                        float* top_logprobs) override;

  // ---- tensor parallelism (cpu_tp.cc): world 1 is the single-rank communicator, more ranks are
  // processes sharing the memfd segment of make_cpu_comm_bootstrap (shm_communicator.h) ----
  std::unique_ptr<Communicator> create_communicator(int rank, int world_size, const std::string& bootstrap) override;

 private:
  int num_threads_;
  cpu::ActScratch act_scratch_;  // linear's quantised activations (grown once, reused)
  cpu::SuperActScratch super_act_scratch_;  // the same per super-block, for the K-quant GEMMs
  std::vector<float> attention_partials_;  // decode attention's per-span softmax states (grown once)
  float attention_softcap_ = 0.0f;         // set_attention_softcap (Gemma 2); 0: none
  // An fp8 cache's keys (and the queries) rotated (MINIVLLM_FP8_KV_ROTATE, read when made).
  bool fp8_kv_rotate_ = knob_flag("MINIVLLM_FP8_KV_ROTATE");
  std::shared_ptr<CpuMemoryStats> stats_ = std::make_shared<CpuMemoryStats>();
};

std::unique_ptr<Backend> make_cpu_backend(int num_threads = 0);

}  // namespace minivllm
