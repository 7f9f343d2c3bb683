// CudaBackend: the Backend on one CUDA device (internal header; CUDA types allowed here, the
// runtime sees only cuda_backend.h). bf16 activations and weights, fp32 accumulation, one stream
// owned by the backend; every op is asynchronous on it except copy_to_host, synchronize, sample.
// Split over: cuda_backend.cc (memory, graphs, sampling), cuda_ops.cc (op checks and launches),
// cuda_gemm.cc (cuBLASLt), and the kernels in *.cu.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_gemm.h"
#include "backend/cuda/fp8_gemm.h"
#include "backend/cuda/moe.h"
#include "backend/cuda/quant_gemv.h"
#include "backend/cuda/stream_idle_probe.h"

namespace minivllm::cuda {

class NcclCommunicator;
struct RopeArgs;  // cuda_kernels.h
struct GemvNorm;     // cuda_kernels.h
struct GemvFoldOut;  // cuda_kernels.h
enum class Fp8Epilogue;  // cuda_kernels.h

// Bytes allocated through empty(); shared with the tensors' deleters, which may outlive the backend.
struct MemoryStats {
  std::atomic<size_t> current{0};
  std::atomic<size_t> peak{0};
};

// Where linear_quant's int8 x comes from: x itself (bf16), or, up to kQuantChunkTokens tokens, the
// RMSNorm of a residual (norm) or act(gate) * up of a gate/up product (gate_up), quantized in the
// kernel that forms them (launch_rms_norm_quantize_x_q8, launch_act_mul_quantize_x_q8).
struct QuantSource {
  const NormPrologue* norm = nullptr;
  const Tensor* gate_up = nullptr;
  Activation act = Activation::kSilu;
};

class CudaBackend : public Backend {
 public:
  explicit CudaBackend(int device_index);
  ~CudaBackend() override;

  DeviceKind device() const override { return DeviceKind::kCuda; }
  std::string name() const override;
  DType activation_dtype() const override { return DType::kBF16; }
  DType weight_dtype() const override { return DType::kBF16; }

  Tensor empty(DType dtype, const std::vector<int64_t>& shape) override;
  void copy_from_host(const Tensor& dst, const void* src) override;
  void copy_to_host(void* dst, const Tensor& src) override;
  void copy(const Tensor& dst, const Tensor& src) override;
  void fill_bytes(const Tensor& dst, uint8_t value) override;
  void fill_hashed_uniform(const Tensor& dst, const HashedUniform& h, int64_t base, int64_t row_stride) override;
  void fill_hashed_e4m3(const Tensor& dst, const HashedUniform& h, float scale, int64_t base,
                        int64_t row_stride) override;
  // FP8 weights (MINIVLLM_FP8_WEIGHTS) and the ggml block types quant_gemv.h reads (Q4_K, Q6_K,
  // Q5_0, Q8_0; MINIVLLM_QUANT_WEIGHTS) stay as stored; other types are decoded to bf16 at load.
  bool keeps_weight_dtype(DType stored) const override {
    return (stored == DType::kF8E4M3 && fp8_weights_) || (quant_weights_ && quant_gemv_supports(stored));
  }
  bool keeps_weight_parts() const override { return quant_weights_; }
  // The MoE kernels read bf16 experts: GGUF block and FP8 experts are decoded to bf16 at load (an
  // FP8 checkpoint's dense linears stay FP8); FP8 expert kernels would read half the bytes.
  bool keeps_expert_dtype(DType stored) const override { return false; }
  // Q6_K rows whose width allows it go planar (quant_gemv.h: every load of the gemv aligned).
  Tensor stored_layout(const Tensor& host) const override;
  Tensor quantize_weight_fp8(const Tensor& w, int64_t col_begin, int64_t col_end) override;
  Tensor decoded_fp8_copy(const Tensor& w) override;
  void scale(const Tensor& x, float factor) override;
  // Gemma 2: the decode kernels of decode_attention.cu and the mma.sync prefill kernel cap scores;
  // a capped model's attention goes to them (cuda_ops.cc).
  bool supports_softcap() const override { return true; }
  void set_attention_softcap(float cap) override;
  void softcap(const Tensor& x, float cap) override;
  void synchronize() override;
  void memory_info(size_t* free_bytes, size_t* total_bytes) override;
  size_t peak_memory_used() override { return stats_->peak.load(); }
  void reset_peak_memory() override { stats_->peak.store(stats_->current.load()); }

  void embedding(const Tensor& ids, const Tensor& weight, int64_t vocab_start, const Tensor& out) override;
  void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) override;
  void add_rms_norm(const Tensor& x, const Tensor& residual, const Tensor& weight, float eps) override;
  void linear(const Tensor& x, const Tensor& weight, const Tensor* bias, const Tensor& out) override;
  void qk_norm_rope(const Tensor& qkv, int num_q_heads, int num_kv_heads, int head_dim, const Tensor* q_norm,
                    const Tensor* k_norm, float eps, const Tensor& positions, const Tensor& cos_sin) override;
  void store_kvcache(const Tensor& qkv, int num_q_heads, const KVCache& cache,
                     const AttentionMetadata& meta) override;
  void attention(const Tensor& qkv, int num_q_heads, const KVCache& cache, const AttentionMetadata& meta,
                 float scale, int window, const Tensor& out, const Tensor* sinks) override;
  void act_mul(const Tensor& gate_up, const Tensor& out, Activation act) override;
  // One kernel: norm + rope of q and k, and k (rotated) and v into the cache.
  void qk_norm_rope_store(const Tensor& qkv, const RopeStoreEpilogue& e) override;
  // 1..8 tokens where linear takes the gemv: one gemv writing act(g) * u; otherwise the default.
  void linear_act_mul(const Tensor& x, const Tensor& gate_up_weight, const Tensor& scratch, const Tensor& out,
                      Activation act) override;
  void add_to_residual(const Tensor& x, const Tensor& residual) override;
  void to_activation(const Tensor& x, const Tensor& out) override;
  void norm_add_norm(const Tensor& x, const Tensor& out_norm, float out_eps, const Tensor& residual,
                     const Tensor& next_norm, float next_eps) override;
  void qk_sum_squares(const Tensor& qkv, int num_q_heads, int num_kv_heads, int head_dim,
                      const Tensor& sums) override;
  void qk_norm_full_width(const Tensor& qkv, int num_q_heads, int num_kv_heads, int head_dim, const Tensor& sums,
                          int64_t q_width, int64_t k_width, const Tensor& q_norm, const Tensor& k_norm,
                          float eps) override;
  // Where linear would take the gemv: the RMSNorm computed inside the gemv's CTAs (one launch);
  // the o / down projections add into the fp32 residual in the gemv's epilogue (one launch).
  // Otherwise the norm, then cuBLASLt; and cuBLASLt accumulating into the residual (beta = 1).
  void rms_norm_linear(const NormPrologue& pro, const Tensor& weight, const Tensor* bias, const Tensor& out) override;
  void rms_norm_linear_act_mul(const NormPrologue& pro, const Tensor& gate_up_weight, const Tensor& scratch,
                               const Tensor& out, Activation act) override;
  void rms_norm_mlp_add_residual(const NormPrologue& pro, const Tensor& gate_up_weight, const Tensor& down_weight,
                                 const Tensor& gate_up, const Tensor& act, const Tensor& down_scratch,
                                 const Tensor& residual, Activation a) override;
  // Where the qkv projection takes the gemv (1-2 tokens) and there are no q/k norms, the gemv's
  // epilogue applies the rope and the cache store (gemv_rope_takes).
  void rms_norm_linear_rope_store(const NormPrologue& pro, const Tensor& weight, const Tensor* bias, const Tensor& qkv,
                                  const RopeStoreEpilogue& epi) override;
  void linear_rope_store(const Tensor& x, const Tensor& weight, const Tensor* bias, const Tensor& qkv,
                         const RopeStoreEpilogue& epi) override;
  void note_next_norm(const Tensor& residual, const Tensor& norm_weight, float eps) override;
  void linear_add_residual(const Tensor& x, const Tensor& weight, const Tensor& scratch,
                           const Tensor& residual) override;
  void gather_rows(const Tensor& x, const Tensor& indices, const Tensor& out) override;
  void to_f32(const Tensor& x, const Tensor& out) override;

  // Mixture of experts (cuda_moe.cc, kernels in moe*.cu): bf16 experts, up to kMoeMaxLocalExperts
  // a rank. The scratch holds every (token, slot) pair of up to kMoeChunkTokens tokens (larger
  // batches go through in chunks); x and gate_up stay undefined (gathered and fused in the kernels).
  bool supports_moe() const override { return true; }
  MoeScratch allocate_moe_scratch(int64_t max_tokens, int64_t hidden, int64_t inter, int k,
                                  int64_t num_local) override;
  void moe_route(const Tensor& router_logits, bool renormalize, const Tensor& topk_ids,
                 const Tensor& topk_weights) override;
  void rms_norm_moe_route(const NormPrologue& pro, const Tensor& router_weight, const Tensor& router_logits,
                          bool renormalize, const Tensor& topk_ids, const Tensor& topk_weights) override;
  // Up to moe_gemv_tokens_ tokens: the gemvs over the pairs (moe_gemv.cu); more: grouping by expert
  // and the grouped GEMMs (moe.cu, moe_gemm.cu).
  void moe_experts_add(const Tensor& x, const MoeExpertWeights& w, const Tensor& topk_ids, const Tensor& topk_weights,
                       const MoeScratch& scratch, const Tensor& out, Activation act) override;
  // Where the norm-route launch takes the layer, at most kMoeWarpRouteMaxExperts experts and the
  // decode gemvs: the norm and router gemv, then the gate/up gemv routing for itself
  // (MINIVLLM_MOE_ROUTE_IN_GATE), then the down gemv. Elsewhere the two ops.
  void rms_norm_moe_experts_add(const NormPrologue& pro, const Tensor& router_weight, const Tensor& router_logits,
                                bool renormalize, const Tensor& topk_ids, const Tensor& topk_weights,
                                const MoeExpertWeights& w, const MoeScratch& scratch, const Tensor& out,
                                Activation act) override;
  void moe_route_biased(const Tensor& router_logits, const Tensor& score_bias, bool sigmoid, int groups,
                        int topk_groups, bool renormalize, float scale, const Tensor& topk_ids,
                        const Tensor& topk_weights) override;
  void sigmoid_gate_rows(const Tensor& x, const Tensor& gate, const Tensor& out) override;
  static constexpr int64_t kMoeChunkTokens = 4096;
  // moe_experts_add's checked arguments, as its launches take them.
  struct MoePlan {
    MoeExpertTable gate_up, down;
    MoeShape shape;
    int64_t chunk;  // tokens the scratch takes at once
    bool out_f32;
    bool gemv;  // the decode gemvs (else grouping and the grouped GEMMs)
  };
  MoePlan plan_moe_experts(const Tensor& x, const MoeExpertWeights& w, const Tensor& topk_ids,
                           const Tensor& topk_weights, const MoeScratch& scratch, const Tensor& out) const;
  bool norm_route_takes(const NormPrologue& pro, const Tensor& router_weight, const Tensor& router_logits,
                        const Tensor& topk_ids, const Tensor& topk_weights) const;
  void launch_norm_route(const NormPrologue& pro, const Tensor& router_weight, const Tensor& router_logits, int k,
                         bool renormalize, int32_t* ids, float* weights, bool route);
  void launch_moe_gemvs(const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights, const MoePlan& p,
                        const MoeScratch& scratch, const Tensor& out, Activation act, const MoeGateRoute* route);

  // The persistent decode kernel (issue 50; cuda_persistent.cc, persistent_decode.cu): bf16 weights
  // and cache, head_dim 64 or 128, up to kPdMaxBatch sequences where the shared memory allows.
  std::string prepare_persistent_decode(PersistentDecodeModel& m) override;
  void persistent_decode(const PersistentDecodeModel& m, const Tensor& residual, const Tensor& positions,
                         const std::vector<KVCache>& caches, const AttentionMetadata& meta) override;

  // [num_blocks, num_kv_heads, block_size, head_dim] bf16, k and v apart; or fp8 e4m3 in the same
  // layout with f32 scales [num_blocks, num_kv_heads, block_size] (rope_kvcache.cu).
  using Backend::allocate_kv_cache;
  KVCache allocate_kv_cache(int num_blocks, int block_size, int num_kv_heads, int head_dim, DType dtype) override;
  bool supports_kv_cache_dtype(DType dtype) const override;
  std::string supported_kv_cache_dtypes() const override;
  // GQA group 1..16, head_dim 64, 96, 128, 256 (attention_shapes.h).
  void check_attention_shape(int num_q_heads, int num_kv_heads, int head_dim) const override;
  void check_rotary_dim(int head_dim, int rotary_dim) const override;

  // One cudaMemcpy2DAsync on the stream.
  void copy_into_columns(const Tensor& dst, int64_t col_start, const Tensor& src) override;
  // world_size 1: make_single_rank_communicator; otherwise an NcclCommunicator on this stream.
  std::unique_ptr<Communicator> create_communicator(int rank, int world_size, const std::string& bootstrap) override;

  void sample(const Tensor& logits, const SamplingBatch& batch, int32_t* out_tokens) override;
  // Tokens to pinned memory (one of two halves, alternating) and an event; take_sampled waits on it.
  void sample_async(const Tensor& logits, const SamplingBatch& batch, const Tensor& tokens) override;
  void take_sampled(int32_t* out_tokens, int rows) override;
  void queue_sampled(const Tensor& tokens, int rows) override;
  // The vocabulary-parallel sampler's stages (sampler.cu).
  void shard_sample_stats(const Tensor& logits, const Tensor& params, int64_t vocab_start,
                          const Tensor& stats, const Tensor& pieces) override;
  void shard_sample_pick(const Tensor& logits, const Tensor& params, int64_t vocab_start, int rank,
                         const Tensor& all_stats, const Tensor& pieces, const Tensor& picks) override;
  void shard_sample_merge(const Tensor& all_picks, int world, const Tensor& tokens) override;
  void resolve_pending_ids(const Tensor& ids, const Tensor& sampled) override;
  // Penalties and logprobs (cuda_logits_ops.cc, kernels in logits_ops.cu).
  void update_token_counts(const Tensor& counts, const TokenCountUpdate& update) override;
  void apply_penalties(const Tensor& logits, const Tensor& counts, const std::vector<int32_t>& slots,
                       const SamplingBatch& batch) override;
  void apply_logit_bias(const Tensor& logits, const SamplingBatch& batch) override;
  void apply_token_bitmask(const Tensor& logits, const SamplingBatch& batch) override;
  void compute_logprobs(const Tensor& logits, const int32_t* tokens, int k, float* chosen, int32_t* top_ids,
                        float* top_logprobs) override;

  bool supports_graphs() const override { return true; }
  int capture_graph(const std::function<void()>& body) override;
  void replay_graph(int handle) override;

  cudaStream_t stream() const { return stream_; }
  int device_index() const { return device_; }

  // ---- for NcclCommunicator (nccl_communicator.h) ----
  // A live communicator on this backend: ~CudaBackend calls its on_backend_destroyed().
  void attach_communicator(NcclCommunicator* comm);
  void detach_communicator(NcclCommunicator* comm);
  // During a capture: the graph holds a collective of the communicator whose abort flag this is.
  // replay_graph refuses the graph once the flag is set.
  void note_captured_collective(const std::shared_ptr<std::atomic<bool>>& comm_aborted);
  // Destroys the graphs that captured collectives of that communicator (NCCL frees a communicator
  // only once they are gone); their handles then fail in replay_graph. Never throws.
  void drop_graphs_of(const std::atomic<bool>* comm_aborted);

 private:
  void ensure_sample_buffers(int rows);
  void ensure_sample_buffers(int rows, const Tensor& tokens);  // at least tokens' rows (up to 2^20)
  // rope_args' cache fields from the cache and the step's slots (none before the cache exists).
  void rope_cache_args(RopeArgs& a, const Tensor& qkv, const KVCache& cache, const AttentionMetadata& meta,
                       const char* op = "qk_norm_rope_store") const;
  // Whether the qkv gemv applies the rope itself (its caller has checked that the gemv takes it).
  bool gemv_rope_takes(int64_t n, const RopeStoreEpilogue& epi) const;
  // Past the gemv, a per-row FP8 weight's GEMM into scratch, then one pass that scales it and adds it
  // into the fp32 out (kAddF32) or forms act(gate) * up (kActMul). False where the FP8 GEMM declines.
  bool fp8_fused(const char* op, const Tensor& x, const Tensor& weight, const Tensor& scratch, const Tensor& out,
                 Fp8Epilogue e, Activation act);
  // The same behind the prologue's RMSNorm: x's codes come straight from the residual, the normed
  // rows never written (kStore: the product in out, + bias; kActMul: in scratch). False where the
  // gemv takes the batch, the epilogues are unfused, or the FP8 GEMM declines.
  bool fp8_normed(const char* op, const NormPrologue& pro, const Tensor& weight, const Tensor* bias,
                  const Tensor& scratch, const Tensor& out, Fp8Epilogue e, Activation act);
  // Whether fp8_normed's codes-from-the-residual path takes this weight and prologue: a per-row FP8
  // weight the FP8 GEMM takes, a batch past the gemv, K of 8s up to kE4m3RowMaxCols, the normed codes on.
  bool fp8_norm_takes(const NormPrologue& pro, const Tensor& weight) const;
  // rms_norm_linear_rope_store / linear_rope_store once gemv_rope_takes: x is rms_norm(norm) when
  // norm != nullptr, else x.
  void gemv_rope_store(const char* op, const GemvNorm* norm, const Tensor* x, const Tensor& weight, const Tensor* bias,
                       const Tensor& qkv, const RopeStoreEpilogue& epi, int64_t tokens);
  // Whether a linear of this shape goes to gemv.cu rather than cuBLASLt.
  bool use_gemv(const Tensor& x, const Tensor& weight, int64_t tokens, int64_t n, int64_t k,
                bool norm_prologue = false) const;
  // Whether rms_norm_linear(_act_mul) fuses: an fp32 residual of [tokens, k] the gemv takes.
  bool use_gemv_norm(const Tensor& residual, const Tensor& weight, int64_t n, int64_t k) const;
  bool gemv_norm_late(int64_t tokens) const;  // GemvNorm::late for a normed gemv of `tokens` rows
  // The normed gemv's description of pro's RMSNorm (norm_f32: its weight is fp32): late and staged as
  // the knobs say.
  GemvNorm gemv_norm(const NormPrologue& pro, bool norm_f32, int64_t tokens) const;
  // FP8 weights (Tensor::scales()): the FP8 gemv up to kGemvMaxTokens tokens, else cuBLASLt's FP8
  // GEMM (fp8_gemm.h), else (block scales) the e4m3 decode GEMM (fp8_block_gemm) or the decoded
  // weight's bf16 GEMM. `e`: store
  // (+ bias) into out, act(gate) * up into out (w = [gate; up]), or add into the fp32 out.
  enum class Fp8Out { kStore, kActMul, kAddF32 };
  bool fp8_gemv_takes(const Tensor& x, const Tensor& w) const;
  // W8A8 at gemv batches (MINIVLLM_FP8_GEMV_W8A8): whether the e4m3-codes gemv takes w for this many
  // tokens (K of 64s up to kE4m3RowMaxCols, scale blocks of whole chunks), and, behind a norm, the
  // normed quantizer then that gemv (false where it does not take them: the caller goes on).
  bool fp8_w8a8_takes(const Tensor& w, int64_t tokens) const;
  bool fp8_w8a8_normed(const char* op, const NormPrologue& pro, const Tensor& weight, const Tensor* bias,
                       const Tensor& out, Fp8Out e, Activation act);
  // The W8A8 gemv on the x codes the caller's quantizer just wrote (fp8_x_codes_), with this backend's knobs.
  void w8a8_gemv(const Tensor& w, const void* bias, bool bias_f32, void* out, bool out_f32, Fp8GemvOut e,
                 Activation act, int64_t tokens, int64_t n);
  static Fp8GemvOut gemv_out(Fp8Out e);
  static DecodeGemmEpilogue gemm_out(Fp8Out e);  // the same for decode_gemm.cu
  // Block-scaled FP8 weights past the gemv, up to kDecodeGemmMaxTokens (MINIVLLM_FP8_BLOCK_GEMM: those
  // without a bf16 copy by default): x's codes, one scale a token, in two e4m3 terms
  // (MINIVLLM_FP8_BLOCK_GEMM_X), from rms_norm(pro->residual) when pro is set, else from x; then
  // decode_gemm.cu's e4m3 kernel. False where it does not take the weight or shape (nothing
  // launched: the caller goes on).
  bool fp8_block_gemm(const NormPrologue* pro, const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& out,
                      DecodeGemmEpilogue e, Activation act);
  // rms_norm_linear_rope_store on FP8 weights past the gemv: the bare product into qkv, scaled by the
  // rope kernel (false where it does not take them: the caller goes on).
  bool fp8_rope_scales(const char* op, const NormPrologue& pro, const Tensor& weight, const Tensor* bias,
                       const Tensor& qkv, const RopeStoreEpilogue& epi);
  // An RMSNorm of the residual (note_next_norm's, or the one whose codes fp8_add_norm left staged).
  struct PendingNorm {
    const void* residual = nullptr;
    const void* weight = nullptr;
    bool weight_f32 = false;
    float eps = 0.0f;
    int64_t tokens = 0;
    int64_t parts = 0;  // the gemv fold's sums a token (GemvFoldOut); 0: the decode GEMM's 128-column tiles
    bool matches(const NormPrologue& pro, int64_t t) const {
      return residual != nullptr && residual == pro.residual.data() && weight == pro.weight.data() &&
             eps == pro.eps && tokens == t;
    }
  };
  // linear_add_residual on FP8 weights past the gemv with note_next_norm's norm pending: the GEMM,
  // then the add and that norm's codes in one kernel, staged for the next FP8 linear (false where
  // it does not take them: the caller goes on).
  bool fp8_add_norm(const Tensor& x, const Tensor& weight, const Tensor& scratch, const Tensor& residual,
                    const PendingNorm& next);
  // rms_norm(pro) W^T (+ bias) as one decode GEMM on the folded norm's input, where folded_ is pro's
  // norm (kStore, or kActMul with W = [W_gate; W_up]); false otherwise. folded_ is used up either way.
  bool folded_linear(const NormPrologue& pro, const Tensor& weight, const Tensor* bias, const Tensor& out,
                     DecodeGemmEpilogue e, Activation act);
  // The bare product of rms_norm(pro)'s codes and weight into out (fp8_gemm_'s run_unscaled_normed),
  // on the codes fp8_add_norm staged when they are that norm's; returns x's scales (nullptr: no plan).
  const float* fp8_normed_product(const NormPrologue& pro, int64_t tokens, const Tensor& weight, bool norm_f32,
                                  void* out);
  void linear_fp8(const char* op, const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& out, Fp8Out e,
                  Activation act = Activation::kSilu);
  // Block-quantized weights (quant_gemv.h): up to kQuantChunkTokens tokens, x quantized to int8 and
  // the gemv on the blocks, 8 tokens a launch; more tokens (N and K multiples of 8), W decoded into
  // a bf16 scratch for cuBLASLt. add: out (f32) += x W^T, no bias. x is unused with a norm or
  // gate_up source.
  void linear_quant(const char* op, const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& out, bool add,
                    const QuantSource& src = {});
  // Whether a block-quantized weight behind pro takes x's codes straight from the residual
  // (MINIVLLM_QUANT_FUSED_CODES): a decode batch (at most kQuantChunkTokens tokens) of an fp32
  // residual, K a multiple of 32 up to kQuantNormMaxK.
  bool quant_norm_takes(const NormPrologue& pro, const Tensor& weight) const;
  // The gemv kernel (and the streamed one's grid) for a call of `tokens` tokens on n rows of W.
  QuantGemvPlan quant_gemv_plan(DType wtype, int64_t tokens, int64_t n, int64_t k, const void* w,
                                size_t row_bytes) const;
  static constexpr int64_t kQuantChunkTokens = 64;
  static constexpr int64_t kQuantMaxK = 65536;
  // Whether a linear the gemv does not take goes to decode_gemm.cu rather than cuBLASLt.
  bool use_decode_gemm(const Tensor& x, const Tensor& weight, const Tensor& out, int64_t tokens, int64_t n,
                       int64_t k, bool gated = false) const;

  int device_ = 0;
  int num_sms_ = 0;
  std::string device_name_;
  cudaStream_t stream_ = nullptr;
  std::shared_ptr<MemoryStats> stats_ = std::make_shared<MemoryStats>();
  std::unique_ptr<LtGemm> gemm_;
  std::unique_ptr<Fp8Gemm> fp8_gemm_;

  // Split-KV scratch, allocated once at start-up for the largest split count the policy allows,
  // so nothing is allocated inside a captured decode step.
  float* decode_partial_o_ = nullptr;
  float* decode_partial_lse_ = nullptr;
  int* decode_counters_ = nullptr;   // one per (seq, kv head): decode_partial_rows_ of them, zeroed
  int prefetch_after_attention_ = 0;  // the o projection's gemv prefetch; MINIVLLM_GEMV_PREFETCH_U_AFTER_ATTENTION
  bool after_attention_ = false;      // attention() ran last: the next linear_add_residual is the o projection
  bool gemv_stage_ = false;  // one-token gemvs after a gemv stage their rows (GemvNorm::stage); MINIVLLM_GEMV_STAGE
  int64_t gemv_norm_max_k_ = 1024;  // longest rows a normed gemv folds the norm into; MINIVLLM_GEMV_NORM_MAX_K
  bool gemv_norm_late_ = false;  // the normed gemvs scale by 1 / rms at the end (GemvNorm::late); MINIVLLM_GEMV_NORM_LATE
  bool gemv_rope_ = false;  // the qkv gemv applies rope and stores k, v (models without q/k norms); MINIVLLM_GEMV_ROPE=0: off
  int64_t decode_partial_rows_ = 0;  // lse and counter capacity: (seq, q head, split) rows at head_dim 64
  int decode_min_partition_ = 0;     // least keys per split (decode_policy.h)
  int decode_max_partition_ = 0;     // most keys per split, 0 = no limit (decode_policy.h)
  int decode_mma_max_partition_ = 0;  // the same for the tensor-core kernels
  int decode_held_splits_ = 8;        // MINIVLLM_DECODE_HELD_SPLITS: tensor-core splits follow the context (0: off)
  int decode_one_split_keys_ = 0;     // batch 1: contexts up to this are one split (decode_policy.h)
  bool decode_prefetch_split_ = true;  // MINIVLLM_DECODE_PREFETCH_SPLIT: batch 1's splits into L2 whole
  bool decode_wide_ = true;          // 16-warp decode CTAs at small batch; MINIVLLM_DECODE_WIDE=0: off
  bool decode_wide_always_ = false;  // MINIVLLM_DECODE_WIDE=force: at every batch size (tuning, tests)
  int persistent_ring_ = 0;           // most ring slots of the persistent kernel, 0: its own (MINIVLLM_DECODE_PERSISTENT_RING)
  bool persistent_prefetch_ = true;   // MINIVLLM_DECODE_PERSISTENT_PREFETCH
  int decode_wide_pairs_ = 1;        // most sequences for wide CTAs of two q heads (MINIVLLM_DECODE_WIDE_PAIRS)
  bool decode_wide_staged_splits_ = true;  // the pairs' bf16 splits staged (MINIVLLM_DECODE_WIDE_STAGED_SPLITS)
  bool decode_gemm_ = false;         // Hopper only (sm_90a code); MINIVLLM_DECODE_GEMM=0: off
  bool fp8_weights_ = true;          // compute on FP8 weights; MINIVLLM_FP8_WEIGHTS=0: their values in bf16 (A/B)
  bool quant_weights_ = false;       // keep GGUF block types as stored (MINIVLLM_QUANT_WEIGHTS=1), else decoded to bf16
  bool quant_gemv_stream_ = true;    // MINIVLLM_QUANT_GEMV_STREAM: the streamed gemv where it applies
  int quant_stream_stages_ = 2;      // MINIVLLM_QUANT_STREAM_STAGES
  int quant_stream_ctas_ = 4;        // MINIVLLM_QUANT_STREAM_CTAS
  bool quant_stream_spread_ = true;  // MINIVLLM_QUANT_STREAM_SPREAD
  int quant_gemv_pipeline_ = -1;     // MINIVLLM_QUANT_GEMV_PIPELINE: 0 / 1 forced, -1 quant_gemv_piped's choice
  bool quant_fused_codes_ = true;    // quant_norm_takes's paths (MINIVLLM_QUANT_FUSED_CODES)
  bool fp8_w8a8_ = true;              // fp8_w8a8_takes's paths (MINIVLLM_FP8_GEMV_W8A8)
  int fp8_w8a8_lane_bytes_ = 0;       // MINIVLLM_FP8_W8A8_LANE_BYTES; 0: by the grid
  int fp8_gemv_one_pairs_ = 0;        // MINIVLLM_FP8_GEMV_ONE; 0: one token takes the 16-row kernel too
  int64_t fp8_gemv_one_min_codes_ = 0;  // MINIVLLM_FP8_GEMV_ONE_MIN_MB, in codes
  bool fp8_gemv_one_x16_ = false;       // MINIVLLM_FP8_GEMV_ONE_X16
  bool fp8_gemv_one_blocks_ = true;     // MINIVLLM_FP8_GEMV_ONE_BLOCKS
  bool fp8_block_early_residual_ = true;  // MINIVLLM_FP8_BLOCK_EARLY_RESIDUAL
  bool fp8_gemv_one_x16_blocks_ = true;  // MINIVLLM_FP8_GEMV_ONE_X16_BLOCKS
  bool fp8_normed_x16_ = false;          // MINIVLLM_FP8_NORMED_X16
  bool fp8_rope_scales_ = true;       // MINIVLLM_FP8_ROPE_SCALES: fp8_rope_scales's path
  bool fp8_kv_rotate_ = true;  // MINIVLLM_FP8_KV_ROTATE: an fp8 cache's keys and the queries rotated
  bool fp8_add_norm_ = true;          // MINIVLLM_FP8_ADD_NORM: fp8_add_norm's path
  PendingNorm next_norm_;             // note_next_norm's, until the next linear_add_residual
  // The folded norm (MINIVLLM_DECODE_GEMM_NORM_FOLD): a bf16 decode GEMM's residual add made the next
  // RMSNorm's input in fold_x_ and its partial sums of squares in fold_parts_ (DecodeGemmArgs::fold_w);
  // folded_ names that norm until the linear after it takes them (folded_linear) or anything else runs.
  int64_t norm_fold_ = 0;  // 0: off; else the least tokens x N at which an add the gemv would take folds
  // MINIVLLM_GEMV_NORM_FOLD: one token's adds fold the next norm (GemvFoldOut) into rows past
  // gemv_norm_max_k_ (1) or every row (2); 0: off. The buffers are fold_x_ and fold_parts_.
  int gemv_norm_fold_ = 1;
  // Whether an add of `tokens` x n into `residual` with `next` pending folds that norm; *fold then
  // points into the fold buffers.
  bool gemv_fold_out(const PendingNorm& next, const Tensor& residual, int64_t tokens, int64_t n,
                     GemvFoldOut* fold) const;
  // Whether folded_ names a gemv fold of pro's norm at `tokens`; *norm then reads it. Used up either way.
  bool take_gemv_fold(const NormPrologue& pro, int64_t tokens, GemvNorm* norm);
  void* fold_x_ = nullptr;       // bf16 [kFoldMaxTokens, kFoldMaxCols]
  float* fold_parts_ = nullptr;  // [kFoldMaxCols / 128, kFoldMaxTokens]
  PendingNorm folded_;
  PendingNorm staged_norm_;           // whose codes sit in fp8_gemm_'s activation scratch
  uint8_t* fp8_x_codes_ = nullptr;   // [kGemvMaxTokens, kE4m3RowMaxCols]: fixed, so a captured step never grows it
  float* fp8_x_scales_ = nullptr;    // [kGemvMaxTokens]
  // MINIVLLM_FP8_BLOCK_GEMM: which block-scaled weights fp8_block_gemm takes (those without a bf16
  // copy, all, or none)
  enum class Fp8BlockGemm { kOff, kUncopied, kAll };
  Fp8BlockGemm fp8_block_gemm_ = Fp8BlockGemm::kAll;
  bool fp8_block_gemm_two_terms_ = true;  // MINIVLLM_FP8_BLOCK_GEMM_X: x as two e4m3 terms
  int64_t fp8_block_gemm_copied_tokens_ = 64;  // MINIVLLM_FP8_BLOCK_GEMM_TOKENS (all: copied weights up to it)
  // fp8_block_gemm's x codes [kDecodeGemmMaxTokens, K] (twice: the second terms) and scales, grown
  // at load (decoded_fp8_copy) to the widest block-scaled weight's K, so that a captured step never
  // grows them.
  void* fp8_block_x_codes_ = nullptr;
  size_t fp8_block_x_codes_bytes_ = 0;
  void* fp8_block_x_scales_ = nullptr;
  size_t fp8_block_x_scales_bytes_ = 0;
  int8_t* quant_x_codes_ = nullptr;  // [kQuantChunkTokens, kQuantMaxK]
  float* quant_x_scales_ = nullptr;  // [kQuantChunkTokens, kQuantMaxK / 32]
  float* quant_x_sums_ = nullptr;    // [kQuantChunkTokens, kQuantMaxK / 32] (QuantX::sums)
  void* quant_w_bf16_ = nullptr;     // a weight decoded for cuBLASLt, grown outside graph capture
  size_t quant_w_bf16_bytes_ = 0;
  int64_t decode_gemm_tokens_ = 0;   // decode_gemm for every linear up to this many tokens (MINIVLLM_DECODE_GEMM_TOKENS)
  int64_t moe_gemv_tokens_ = 8;      // MoE batches up to this many tokens take the gemvs (MINIVLLM_MOE_GEMV_TOKENS)
  int moe_gate_chunks_ = 2;          // MoE decode gate/up gemv: row chunks a lane (MINIVLLM_MOE_GATE_CHUNKS)
  int moe_down_rows_ = 4;            // MoE decode down gemv: output rows a CTA (MINIVLLM_MOE_DOWN_ROWS)
  int moe_down_rows_one_ = 8;        // the same at one token (MINIVLLM_MOE_DOWN_ROWS_ONE)
  bool moe_route_cta_ = true;        // MoE route: a CTA a token at decode sizes (MINIVLLM_MOE_ROUTE_CTA)
  bool moe_norm_route_ = true;       // MoE norm, router and route in one launch (MINIVLLM_MOE_NORM_ROUTE)
  bool moe_route_in_gate_ = true;    // the experts' gate/up gemv routes for itself (MINIVLLM_MOE_ROUTE_IN_GATE)
  int64_t moe_small_tile_rows_ = 48;  // grouped GEMMs take 32-row tiles up to this many rows an expert
                                     // on average (MINIVLLM_MOE_SMALL_TILE_ROWS)
  int decode_ring_ = -1;             // MINIVLLM_DECODE_RING: 0 off, 1 wherever it fits, -1 decode_use_ring
  bool decode_staged_ = false;       // wide CTAs stage their keys in shared memory; MINIVLLM_DECODE_STAGED=0: off
  int decode_wide_mma_ = 0;          // their batches of up to this many sequences on the tensor cores, staged
                                     // (MINIVLLM_DECODE_WIDE_MMA; decode_policy.h)
  int decode_wide_mma_heads_ = 0;    // its q heads a CTA, 0: decode_wide_mma_heads (MINIVLLM_DECODE_WIDE_MMA_HEADS)
  int decode_max_tile_heads_ = 0;    // q heads per CTA of the tiled decode kernels (decode_policy.h)
  int decode_lane_elems_ = 0;        // MINIVLLM_DECODE_LANE_ELEMS: 8 or 16 key elements a lane, 0 = decode_use_lane16
  int decode_mma_ = -1;              // MINIVLLM_DECODE_MMA: 0 off, 1 wherever it fits, -1 = decode_use_mma
  float attention_softcap_ = 0.0f;   // set_attention_softcap (Gemma 2); 0: none
  bool decode_seq_order_ = true;     // MINIVLLM_DECODE_SEQ_ORDER, else decode_use_seq_order: CTAs take seq_order
  int decode_mma_ring_ = -1;         // MINIVLLM_DECODE_MMA_RING: 0 registers, 1 ring, -1 decode_mma_ring
  int decode_mma_tiles_ = 0;         // MINIVLLM_DECODE_MMA_TILES: tiles a step of the register kernel, 0 = its default
  bool decode_mma_pipe_ = false;     // MINIVLLM_DECODE_MMA_PIPE=1 pipelines the register kernel's loads (tuning)

  std::unique_ptr<StreamIdleProbe> idle_probe_;  // MINIVLLM_PROFILE_GPU_IDLE=1 only

  // Sampling: parameters staged through pinned memory.
  int sample_capacity_ = 0;
  // Pinned, two halves (async scheduling keeps two samplings outstanding): each 5 arrays of
  // sample_capacity_ 4-byte values + tokens.
  void* sample_host_ = nullptr;
  void* sample_device_ = nullptr;  // one half's layout, then the greedy argmax scratch
  cudaEvent_t sample_done_[2] = {nullptr, nullptr};  // the tokens of half i reached the host
  int sample_rows_[2] = {0, 0};
  int64_t samples_issued_ = 0, samples_taken_ = 0;  // half = count % 2

  // Structured outputs' token bitmask: staged through pinned memory into a buffer of its own, so
  // that applying it never waits for the stream (the engine fills a step's masks while the
  // forward runs, and queues the sampler behind it). mask_copied_: the staging buffer was read.
  void* mask_host_ = nullptr;
  void* mask_device_ = nullptr;
  size_t mask_bytes_ = 0;
  cudaEvent_t mask_copied_ = nullptr;

  // Penalties and logprobs: their small inputs and outputs, grown as needed (never in a graph).
  struct ScratchDeleter {
    void operator()(void* p) const;
  };
  uint8_t* logits_scratch(size_t bytes);
  std::unique_ptr<void, ScratchDeleter> logits_scratch_;
  size_t logits_scratch_bytes_ = 0;

  struct Graph {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    bool dropped = false;
    // Abort flags of the communicators whose collectives the graph holds.
    std::vector<std::shared_ptr<std::atomic<bool>>> comms;
  };
  std::vector<Graph> graphs_;
  std::vector<std::shared_ptr<std::atomic<bool>>> capture_comms_;  // of the capture in progress
  std::vector<NcclCommunicator*> comms_;
};

}  // namespace minivllm::cuda
