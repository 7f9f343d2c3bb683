// Backend: the ops the model is written against, plus memory, graphs and sampling.
// The model never knows which device it runs on. Implementations: cpu/cpu_backend.*, cuda/*.
//
// Conventions shared by every implementation:
// - Activations use activation_dtype() (fp32 on the CPU, bf16 on CUDA); accumulation is fp32.
// - Weights are [out_features, in_features] in weight_dtype(); linear computes y = x W^T (+ b).
// - Integer metadata (ids, positions, slot_mapping, cu_seqlens, block_tables, context_lens) is i32.
// - Outputs are preallocated by the caller; ops never allocate and never synchronise with the host
//   (except copy_to_host / synchronize), so a decode step can be captured as a CUDA graph.
// - The KV cache layout is the backend's own: only store_kvcache and attention touch it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/communicator.h"
#include "backend/persistent_decode_model.h"
#include "common/activation.h"
#include "common/hashed_uniform.h"
#include "common/tensor.h"
#include "sampling/logits_processing.h"
#include "sampling/sampler.h"

namespace minivllm {

// Everything attention needs for one batch (seeds: set_context). Tensors live on the device.
struct AttentionMetadata {
  bool is_prefill = true;
  int num_seqs = 0;
  int num_tokens = 0;      // rows of q
  int block_size = 0;
  int max_seqlen_q = 0;    // prefill: longest query span (host value, known when preparing)
  int max_seqlen_k = 0;    // prefill: longest key span, cached prefix included
  int max_num_blocks = 0;  // columns of block_tables (per-sequence capacity)
  Tensor cu_seqlens_q;     // prefill: i32[num_seqs + 1], query rows of each sequence
  Tensor cu_seqlens_k;     // prefill: i32[num_seqs + 1], key lengths (cached prefix + new tokens)
  Tensor context_lens;     // decode: i32[num_seqs], keys per sequence, the new token included
  // decode, optional: i32[num_seqs], a permutation of 0..num_seqs-1, the order in which a backend
  // whose kernels take the sequences in waves should start them (ModelRunner: longest context
  // first, so that no long sequence starts last and runs alone). Undefined: in batch order. It
  // changes no result, only which sequence's work is issued first.
  Tensor seq_order;
  Tensor slot_mapping;     // i32[num_tokens], cache slot (block * block_size + offset) of each new token; -1 skips
  Tensor block_tables;     // i32[num_seqs, max_num_blocks], -1 padded
};

// Per-layer paged KV cache, allocated by the backend in its own layout.
struct KVCache {
  Tensor k;  // opaque to the model
  Tensor v;
  int num_blocks = 0;
  int block_size = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  // fp8 (kv_cache_spec.h): f32, one scale per (slot, kv head) row of k and of v, in the order of
  // the backend's cache rows; undefined for bf16 / f32 caches.
  Tensor k_scale;
  Tensor v_scale;
  DType dtype() const { return k.defined() ? k.dtype() : DType::kF32; }
};

// A fused linear's prologue: the residual stream (fp32 [T, K]) RMSNormed by `weight` into
// `normed` (activation dtype; scratch a backend may skip), which the linear then reads.
struct NormPrologue {
  const Tensor& residual;
  const Tensor& weight;
  float eps;
  const Tensor& normed;
};

// The qkv projection's epilogue: q and k each normed per head (q_norm / k_norm may be null; eps
// serves both), rotated at `positions` by the cos_sin table, then k and v stored into the cache
// (nothing stored while the cache is undefined: warm-up).
struct RopeStoreEpilogue {
  int num_q_heads, num_kv_heads, head_dim;
  const Tensor* q_norm;
  const Tensor* k_norm;
  float eps;
  const Tensor& positions;
  const Tensor& cos_sin;
  const KVCache& cache;
  const AttentionMetadata& meta;
};

// One rank's experts of a sparse (mixture-of-experts) layer, for Backend::moe_experts_add. Local
// expert i is global expert first_expert + i: gate_up[i] = [W_gate; W_up] ([2 I_r, H]), down[i]
// ([H, I_r]). I_r is this rank's share of each expert's width (tensor parallelism: every rank holds
// every expert, a slice of its rows), or the whole width (expert parallelism: whole experts, a
// range of them per rank).
struct MoeExpertWeights {
  std::vector<Tensor> gate_up;
  std::vector<Tensor> down;
  // Per-expert biases (gpt-oss), f32: gate_up's [2 I_r] (gate, then up) and down's [H] (rank 0's alone
  // where the experts' width is split, so that the all-reduce adds it once). Empty: none.
  std::vector<Tensor> gate_up_bias;
  std::vector<Tensor> down_bias;
  int64_t first_expert = 0;
  int64_t num_experts = 0;  // the layer's, over every rank
  int64_t num_local() const { return static_cast<int64_t>(gate_up.size()); }
};

// Where moe_experts_add works, allocated once by the model for its largest batch (T rows) through
// Backend::allocate_moe_scratch. The default layout (the CPU's, which runs one expert at a time):
// an expert takes each token at most once, so one expert's rows fit T. entries i32[T * k] and
// offsets i32[num_local + 1] hold the (token, slot) pairs grouped by expert. A backend that runs
// every expert at once sizes the fields for all T * k pairs instead, and may leave the ones it does
// not use undefined (the CUDA backend: cuda_moe.cc).
struct MoeScratch {
  Tensor x;        // [T, H], the expert's tokens gathered
  Tensor gate_up;  // [T, 2 I_r]
  Tensor act;      // [T, I_r]
  Tensor y;        // [T, H], the expert's outputs
  Tensor entries;  // i32[T * k]
  Tensor offsets;  // i32[num_local + 1]
  Tensor tiles;    // i32, a backend's own index (CUDA: each expert's first row tile); may be undefined
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual DeviceKind device() const = 0;
  virtual std::string name() const = 0;
  virtual DType activation_dtype() const = 0;
  virtual DType weight_dtype() const = 0;

  // ---- memory ----
  virtual Tensor empty(DType dtype, const std::vector<int64_t>& shape) = 0;
  // Host -> device; may be asynchronous on the backend's stream, `src` must stay valid until
  // the next synchronize().
  virtual void copy_from_host(const Tensor& dst, const void* src) = 0;
  // Device -> host, synchronous.
  virtual void copy_to_host(void* dst, const Tensor& src) = 0;
  // Device -> device, same byte count.
  virtual void copy(const Tensor& dst, const Tensor& src) = 0;
  // Fills every byte with `value` (tests poison outputs with it).
  virtual void fill_bytes(const Tensor& dst, uint8_t value) = 0;
  // A shard of dummy weights made in place (common/hashed_uniform.h): element (r, c) of dst
  // ([rows, cols], or [n] as one row; f32 or bf16) = hashed_uniform_value(h, base + r * row_stride + c),
  // rounded to dst's dtype as upload_weight rounds.
  virtual void fill_hashed_uniform(const Tensor& dst, const HashedUniform& h, int64_t base, int64_t row_stride) = 0;
  // The same as e4m3 codes (dst kF8E4M3 [rows, cols]): code = e4m3(value / scale), rounded to
  // nearest and saturating (common/fp8.h's f32_to_e4m3). Load time only; the default goes through
  // the host.
  virtual void fill_hashed_e4m3(const Tensor& dst, const HashedUniform& h, float scale, int64_t base,
                                int64_t row_stride);
  // Online FP8 quantization of a device weight w ([rows, cols], f32 or bf16): each row through e4m3
  // with its own scale amax / 448 over all its columns (common/fp8.h), then columns [col_begin,
  // col_end) kept (a row-parallel shard still rounds whole rows). Returned as this backend keeps FP8
  // weights: e4m3 codes with per-row scales where keeps_weight_dtype(kF8E4M3), else the rounded
  // values in weight_dtype(). Load time only (it allocates). The default goes through the host.
  virtual Tensor quantize_weight_fp8(const Tensor& w, int64_t col_begin, int64_t col_end);
  // An FP8 weight's values (codes with their scale grid, on this backend) decoded once, for the
  // batches its FP8 GEMM cannot take (block scales), when the backend keeps such a copy
  // (WeightScales::decoded); undefined when it does not. Load time only (it allocates).
  virtual Tensor decoded_fp8_copy(const Tensor& w) { return Tensor(); }
  virtual void synchronize() = 0;
  // Uploads an fp32 host tensor as weight_dtype() (or as fp32 when keep_f32).
  Tensor upload_weight(const Tensor& host_f32, bool keep_f32 = false);
  // Whether linear and embedding compute on weights kept as `stored` (a checkpoint's own dtype:
  // f16, bf16, or the block-quantised q8_0 / q4_0 / q4_1) without converting them. The CPU backend
  // does; the CUDA backend converts every weight to weight_dtype(). kF8E4M3: linear computes on
  // FP8 weights (codes with Tensor::scales()); the CUDA backend does, the CPU (the reference)
  // dequantizes them at load.
  virtual bool keeps_weight_dtype(DType stored) const { return false; }
  // The same for a mixture-of-experts layer's expert weights (moe_experts_add), which a backend's
  // expert kernels may take in fewer types than its linears: the others are decoded at load.
  virtual bool keeps_expert_dtype(DType stored) const { return keeps_weight_dtype(stored); }
  // Uploads a host weight of any stored dtype: as it is where keeps_weight_dtype, else decoded to
  // fp32 and uploaded as upload_weight does.
  Tensor upload_stored_weight(const Tensor& host);
  // Whether linear takes a weight stacked from parts of different kept block types (WeightParts);
  // otherwise such parts are re-encoded to one type, or decoded, at load (ShardContext::upload_rows).
  virtual bool keeps_weight_parts() const { return false; }
  // A kept weight's bytes as this backend lays them out (the same dtype and bytes, perhaps
  // reordered for its kernels: the CUDA backend's planar Q6_K rows). Default: as stored.
  virtual Tensor stored_layout(const Tensor& host) const { return host; }

  // Free and total device memory in bytes (CPU: a budget from the host's memory).
  virtual void memory_info(size_t* free_bytes, size_t* total_bytes) = 0;
  virtual size_t peak_memory_used() = 0;
  virtual void reset_peak_memory() = 0;

  // ---- ops ----
  // out[t] = weight[ids[t] - vocab_start] when vocab_start <= ids[t] < vocab_start + rows, else 0.
  // out may be fp32 on every backend (the CPU's activations are fp32; CUDA also takes bf16).
  virtual void embedding(const Tensor& ids, const Tensor& weight, int64_t vocab_start, const Tensor& out) = 0;
  // out = rms_norm(x) * weight, per row. out may alias x. x may also be the fp32 residual stream.
  virtual void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) = 0;
  // residual += x; x = rms_norm(residual) * weight  (both in place, per row). The residual is fp32
  // or the activation dtype; the model keeps it fp32.
  virtual void add_rms_norm(const Tensor& x, const Tensor& residual, const Tensor& weight, float eps) = 0;
  // out[T, N] = x[T, K] * weight[N, K]^T (+ bias[N]). out is the activation dtype, or f32 (the
  // logits: no rounding before sampling).
  virtual void linear(const Tensor& x, const Tensor& weight, const Tensor* bias, const Tensor& out) = 0;
  // In place on qkv[T, (nq + 2 nkv) * head_dim]: optional per-head RMSNorm of q and k (q_norm,
  // k_norm of Qwen3, each [head_dim]; pass nullptr to skip), then rotary embedding of q and k in
  // the half-split (GPT-NeoX / HF) layout. cos_sin[max_pos, r] (fp32): cos in the first r / 2
  // columns, sin in the rest; r, the rotary dims, is head_dim or less (partial_rotary_factor: the
  // first r dims of each head rotate in pairs (i, i + r / 2), the rest pass through;
  // check_rotary_dim says whether a backend can).
  virtual void qk_norm_rope(const Tensor& qkv, int num_q_heads, int num_kv_heads, int head_dim,
                            const Tensor* q_norm, const Tensor* k_norm, float eps, const Tensor& positions,
                            const Tensor& cos_sin) = 0;
  // q/k norms over all heads at once (OLMo 2), in two steps so that tensor parallelism can sum
  // the squares over its ranks in between. qk_sum_squares: sums (f32 [T, 2]) = for each token of
  // qkv[T, (nq + 2 nkv) * head_dim], the sum of the squares of its q (column 0) and of its k
  // (column 1), in fp32. qk_norm_full_width: q[t] = q[t] * rsqrt(sums[t, 0] / q_width + eps) *
  // q_norm, k likewise (q_norm f32 [nq head_dim], k_norm f32 [nkv head_dim]; q_width, k_width the
  // widths the sums cover: every rank's heads), in place.
  virtual void qk_sum_squares(const Tensor& qkv, int num_q_heads, int num_kv_heads, int head_dim,
                              const Tensor& sums) = 0;
  // An undefined `sums` (one rank: q_width and k_width this qkv's own): the sums made here as well.
  virtual void qk_norm_full_width(const Tensor& qkv, int num_q_heads, int num_kv_heads, int head_dim,
                                  const Tensor& sums, int64_t q_width, int64_t k_width, const Tensor& q_norm,
                                  const Tensor& k_norm, float eps) = 0;
  // Writes k and v of every token of qkv into the cache at slot_mapping (-1 skips the token).
  // An fp8 cache stores the keys rotated (common/fp8.h: kv_rotate_row, MINIVLLM_FP8_KV_ROTATE), and
  // this write also rotates q and k of every row of qkv in place, padding rows included: attention
  // then reads rotated queries against rotated keys, and q.k is unchanged. A caller that attends
  // with queries it has not stored rotates them itself.
  virtual void store_kvcache(const Tensor& qkv, int num_q_heads, const KVCache& cache,
                             const AttentionMetadata& meta) = 0;
  // out[T, nq * head_dim] = causal softmax(q k^T * scale) v over the paged cache, reading q from
  // qkv. Prefill: varlen over cu_seqlens_q / cu_seqlens_k, the query rows being the last ones of
  // each key span. Decode: one query row per sequence over context_lens keys.
  // window > 0: sliding-window attention (Mistral, Gemma 3's local layers; HF's convention): the
  // query at position p sees keys at positions p - window < j <= p, `window` keys at most. The
  // kernels read no cache block wholly before the window, whose block_tables entry may be stale.
  // sinks (gpt-oss; nullptr: none): f32 [num_q_heads], one logit per head that joins each softmax's
  // denominator and no value: out = sum_j e^(s_j) v_j / (e^(sink) + sum_j e^(s_j)).
  virtual void attention(const Tensor& qkv, int num_q_heads, const KVCache& cache,
                         const AttentionMetadata& meta, float scale, int window, const Tensor& out,
                         const Tensor* sinks) = 0;
  // Whether attention takes sinks, and act_mul and the MLP ops `act`: a backend without them refuses
  // such a model at start-up (the Transformer names the feature).
  virtual bool supports_attention_sinks() const { return false; }
  virtual bool supports_activation(Activation act) const { return act != Activation::kSwigluOai; }
  // out[T, I] = act(gate_up[:, :I]) * gate_up[:, I:], act the model's gate activation (SiLU for
  // SwiGLU, GELU-tanh for GeGLU).
  virtual void act_mul(const Tensor& gate_up, const Tensor& out, Activation act) = 0;
  // residual (f32) += x (activation dtype or f32), same shape.
  virtual void add_to_residual(const Tensor& x, const Tensor& residual) = 0;
  // A sublayer's output norm, its residual add and the next sublayer's input (sandwich norms: Gemma,
  // GLM-4, OLMo 2): x = rms_norm(x) * out_norm (rounded to x's dtype, as rms_norm rounds), residual
  // (f32) += x, then x = rms_norm(residual) * next_norm, or x = the residual rounded to x's dtype where
  // next_norm is empty (the next sublayer has no input norm). The default runs those ops one by one;
  // a backend may run them as one kernel with the same roundings.
  virtual void norm_add_norm(const Tensor& x, const Tensor& out_norm, float out_eps, const Tensor& residual,
                             const Tensor& next_norm, float next_eps);
  // out (activation dtype) = x (f32, same shape), rounded once: a sublayer with no input norm
  // reads the residual stream as it is (OLMo 2).
  virtual void to_activation(const Tensor& x, const Tensor& out) = 0;
  // x (f32) *= factor, in place (Gemma's embedding scale on the residual stream).
  virtual void scale(const Tensor& x, float factor) = 0;
  // Gemma 2's soft-capping; a backend without it refuses such a model at start-up through
  // supports_softcap (the Transformer names it). set_attention_softcap: every later attention()
  // passes each scaled score s through cap * tanh(s / cap) before its softmax (0: none); softcap:
  // x (f32) -> cap * tanh(x / cap) in place (the final logits). The defaults throw.
  virtual bool supports_softcap() const { return false; }
  virtual void set_attention_softcap(float cap);
  virtual void softcap(const Tensor& x, float cap);

  // ---- mixture of experts (model/fused_moe.h; a backend without them refuses MoE models at
  // start-up through supports_moe, naming the missing piece) ----
  // Whether moe_route and moe_experts_add are implemented.
  virtual bool supports_moe() const { return false; }
  // What a backend without them lacks, for the model's start-up error.
  virtual std::string moe_missing() const;
  // moe_experts_add's working space for batches of up to max_tokens rows, top-k routing and
  // num_local experts of width inter (this rank's I_r). The default: MoeScratch's layout, in the
  // activation dtype.
  virtual MoeScratch allocate_moe_scratch(int64_t max_tokens, int64_t hidden, int64_t inter, int k,
                                          int64_t num_local);
  // Routing, per row of router_logits f32[T, E]: the k = topk_ids.size(1) experts of largest
  // softmax probability (equal logits: the lower id first), topk_ids i32[T, k] in decreasing order,
  // topk_weights f32[T, k] their probabilities, divided by their sum when renormalize
  // (norm_topk_prob).
  virtual void moe_route(const Tensor& router_logits, bool renormalize, const Tensor& topk_ids,
                         const Tensor& topk_weights);
  // Routing by a score bias (DeepSeek-V3 and GLM-4.5 with sigmoid scores, ERNIE 4.5 with softmax ones):
  // per row of router_logits f32[T, E], scores s = sigmoid(logit), or the softmax over all E experts; the
  // k = topk_ids.size(1) experts are chosen by s + score_bias (f32 [E], for the choice only), among the
  // topk_groups of `groups` equal groups of experts whose two best choice values sum highest (equal
  // values: the lower index first), in decreasing order of that value; topk_weights = the chosen s,
  // divided by their sum (+ 1e-20) when renormalize, times scale (routed_scaling_factor).
  virtual void moe_route_biased(const Tensor& router_logits, const Tensor& score_bias, bool sigmoid, int groups,
                                int topk_groups, bool renormalize, float scale, const Tensor& topk_ids,
                                const Tensor& topk_weights) = 0;
  // A sparse layer's entry: pro.normed = RMSNorm(pro.residual), router_logits f32[T, E] = pro.normed
  // router_weight^T, then moe_route. A backend may do the three in one pass; the default composes them.
  virtual void rms_norm_moe_route(const NormPrologue& pro, const Tensor& router_weight, const Tensor& router_logits,
                                  bool renormalize, const Tensor& topk_ids, const Tensor& topk_weights) {
    rms_norm(pro.residual, pro.weight, pro.eps, pro.normed);
    linear(pro.normed, router_weight, nullptr, router_logits);
    moe_route(router_logits, renormalize, topk_ids, topk_weights);
  }
  // out [T, H] (f32: the residual stream, or the activation dtype) += for each (t, j) whose expert
  // e = topk_ids[t, j] is one of w's: topk_weights[t, j] * (act(x[t] W_gate,e^T) * (x[t] W_up,e^T)) W_down,e^T.
  // x [T, H] in the activation dtype. The tokens are grouped by expert, each expert's tokens go
  // through its MLP as one batch, and the weighted outputs are added in expert order.
  virtual void moe_experts_add(const Tensor& x, const MoeExpertWeights& w, const Tensor& topk_ids,
                               const Tensor& topk_weights, const MoeScratch& scratch, const Tensor& out,
                               Activation act);
  // A sparse layer's entry and experts at once: rms_norm_moe_route, then moe_experts_add(pro.normed,
  // ...) into out. topk_ids, topk_weights and pro.normed are written either way. A backend may route
  // inside the experts' first kernel; the default composes the two.
  virtual void rms_norm_moe_experts_add(const NormPrologue& pro, const Tensor& router_weight,
                                        const Tensor& router_logits, bool renormalize, const Tensor& topk_ids,
                                        const Tensor& topk_weights, const MoeExpertWeights& w,
                                        const MoeScratch& scratch, const Tensor& out, Activation act) {
    rms_norm_moe_route(pro, router_weight, router_logits, renormalize, topk_ids, topk_weights);
    moe_experts_add(pro.normed, w, topk_ids, topk_weights, scratch, out, act);
  }

  // A shared expert's gate (Qwen2-MoE): out[t, :] *= sigmoid(x[t] . gate) for each row t, x [T, H] in
  // the activation dtype (the normed rows the experts read), gate f32 [H], out [T, N] in the activation
  // dtype, each value rounded once. The layer scales the shared expert's input to its down projection:
  // that projection is linear, so its output is scaled the same.
  virtual void sigmoid_gate_rows(const Tensor& x, const Tensor& gate, const Tensor& out) = 0;

  // ---- fusions (defaults compose the ops above; a backend overrides what it can fuse) ----
  // The epilogue alone: qk_norm_rope, then store_kvcache.
  virtual void qk_norm_rope_store(const Tensor& qkv, const RopeStoreEpilogue& e) {
    qk_norm_rope(qkv, e.num_q_heads, e.num_kv_heads, e.head_dim, e.q_norm, e.k_norm, e.eps, e.positions, e.cos_sin);
    store_kvcache(qkv, e.num_q_heads, e.cache, e.meta);
  }
  // out[T, I] = act(x W_gate^T) * (x W_up^T), gate_up_weight = [W_gate; W_up] ([2I, K]);
  // scratch [T, 2I] may hold the unfused product.
  virtual void linear_act_mul(const Tensor& x, const Tensor& gate_up_weight, const Tensor& scratch,
                              const Tensor& out, Activation act) {
    linear(x, gate_up_weight, nullptr, scratch);
    act_mul(scratch, out, act);
  }
  // The pre-norm transformer's pattern: out = normed W^T (+ bias), normed the prologue's.
  virtual void rms_norm_linear(const NormPrologue& pro, const Tensor& weight, const Tensor* bias, const Tensor& out) {
    rms_norm(pro.residual, pro.weight, pro.eps, pro.normed);
    linear(pro.normed, weight, bias, out);
  }
  // Same, into linear_act_mul.
  virtual void rms_norm_linear_act_mul(const NormPrologue& pro, const Tensor& gate_up_weight, const Tensor& scratch,
                                       const Tensor& out, Activation act) {
    rms_norm(pro.residual, pro.weight, pro.eps, pro.normed);
    linear_act_mul(pro.normed, gate_up_weight, scratch, out, act);
  }
  // The qkv projection between both: a backend may put the q/k norms, the rope and the cache
  // store into the projection.
  virtual void rms_norm_linear_rope_store(const NormPrologue& pro, const Tensor& weight, const Tensor* bias,
                                          const Tensor& qkv, const RopeStoreEpilogue& epi) {
    rms_norm_linear(pro, weight, bias, qkv);
    qk_norm_rope_store(qkv, epi);
  }
  // The same from x already normed (tensor parallelism: the all-reduce normed it).
  virtual void linear_rope_store(const Tensor& x, const Tensor& weight, const Tensor* bias, const Tensor& qkv,
                                 const RopeStoreEpilogue& epi) {
    linear(x, weight, bias, qkv);
    qk_norm_rope_store(qkv, epi);
  }
  // The dense gated MLP at one rank, after its RMSNorm: residual += act(x W_gate^T) * (x W_up^T) W_down^T
  // with x = the prologue's normed rows. gate_up [T, 2I] and act [T, I] are scratch a backend may leave
  // unwritten; down_scratch [T, K] may hold the down product.
  virtual void rms_norm_mlp_add_residual(const NormPrologue& pro, const Tensor& gate_up_weight,
                                         const Tensor& down_weight, const Tensor& gate_up, const Tensor& act,
                                         const Tensor& down_scratch, const Tensor& residual, Activation a) {
    rms_norm_linear_act_mul(pro, gate_up_weight, gate_up, act, a);
    linear_add_residual(act, down_weight, down_scratch, residual);
  }
  // A hint: the next linear_add_residual into `residual` is followed by rms_norm(residual) by
  // norm_weight, eps (a fused call's prologue). A backend may make that norm's output for the next
  // linear in the add's own pass, and use it where that prologue comes with the same residual and
  // norm; it must still write the residual. Ignoring it is always correct.
  virtual void note_next_norm(const Tensor& residual, const Tensor& norm_weight, float eps) {
    (void)residual, (void)norm_weight, (void)eps;
  }
  // residual (fp32 [T, N]) += x W^T; scratch [T, N] (activation dtype) may hold the product.
  virtual void linear_add_residual(const Tensor& x, const Tensor& weight, const Tensor& scratch,
                                   const Tensor& residual) {
    linear(x, weight, nullptr, scratch);
    add_to_residual(scratch, residual);
  }
  // dst[R, C] columns [col_start, col_start + c) = src[R, c] (same dtype): a rank's slice of the
  // logits into their full row (ParallelLMHead after gather). Asynchronous like copy().
  virtual void copy_into_columns(const Tensor& dst, int64_t col_start, const Tensor& src) = 0;
  // out[i] = x[indices[i]] (rows), e.g. the last token of each sequence before the LM head.
  virtual void gather_rows(const Tensor& x, const Tensor& indices, const Tensor& out) = 0;
  // Converts x to fp32 into out (same shape), e.g. logits for sampling.
  virtual void to_f32(const Tensor& x, const Tensor& out) = 0;

  // ---- KV cache ----
  // Throws, naming the shape and what is supported, when attention cannot run these heads (this
  // rank's q and kv heads). The model calls it before loading weights, so an unsupported model
  // fails at start-up, never in a step. The CPU backend takes any shape.
  virtual void check_attention_shape(int num_q_heads, int num_kv_heads, int head_dim) const {}
  // Throws, naming partial_rotary_factor, when the rope cannot rotate only the first rotary_dim
  // of head_dim dims; also called at start-up. The CPU backend can.
  virtual void check_rotary_dim(int head_dim, int rotary_dim) const {}
  // Also fails at start-up for a block_size this backend cannot index, or a dtype it cannot store
  // (supports_kv_cache_dtype). store_kvcache and attention read the dtype from the cache.
  virtual KVCache allocate_kv_cache(int num_blocks, int block_size, int num_kv_heads, int head_dim, DType dtype) = 0;
  // The cache in the activation dtype (the kv_cache_dtype key's auto).
  KVCache allocate_kv_cache(int num_blocks, int block_size, int num_kv_heads, int head_dim) {
    return allocate_kv_cache(num_blocks, block_size, num_kv_heads, head_dim, activation_dtype());
  }
  // The KV cache element types this backend stores and attends over (kv_cache_spec.h). The
  // runner asks before sizing the cache, so an unsupported kv_cache_dtype fails at start-up.
  virtual bool supports_kv_cache_dtype(DType dtype) const = 0;
  // "f32 (auto), fp8_e4m3": for the error that names what is supported.
  virtual std::string supported_kv_cache_dtypes() const = 0;

  // ---- sampling ----
  // logits: f32[S, V] on the device. Writes S token ids to out_tokens (host).
  virtual void sample(const Tensor& logits, const SamplingBatch& batch, int32_t* out_tokens) = 0;
  // Async scheduling: samples as sample() does, into `tokens` (i32[>= S] on the device), and queues
  // their copy to the host without waiting; take_sampled() waits for the oldest such copy and
  // writes its `rows` tokens to out_tokens. At most two are outstanding. This default samples at once.
  virtual void sample_async(const Tensor& logits, const SamplingBatch& batch, const Tensor& tokens);
  virtual void take_sampled(int32_t* out_tokens, int rows);
  // Tokens that other ops left in `tokens` (i32[>= rows] on the device; the vocabulary-parallel
  // sampler's): their copy to the host is queued as sample_async queues its own, and
  // take_sampled() returns them in turn.
  virtual void queue_sampled(const Tensor& tokens, int rows);

  // ---- vocabulary-parallel sampling (world_size > 1, rows without filters; the semantics of
  // sampling/sampler.h over the whole vocabulary, which no rank holds) ----
  // logits f32[S, Vr] are ids [vocab_start, vocab_start + Vr) of each row; params f32[S, 2] holds
  // each row's (temperature, uniform) on the device. Stage 1: each row's summary of this slice,
  // stats f32[S, 4] = (max logit m, lowest id holding m, mass sum_i exp((l_i - m) / T) (0 when
  // T == 0), 0). NaN and -inf logits weigh nothing (the CPU backend rejects NaN and +inf as
  // sample() does). pieces f32[S * kShardPieceFloats]: this rank's own working state for stage 2
  // (the CUDA kernels keep each row's piece masses there, so that the pick need not read the slice
  // again to find the piece that holds the draw); pass the same tensor to shard_sample_pick.
  static constexpr int64_t kShardPieceFloats = 33;
  virtual void shard_sample_stats(const Tensor& logits, const Tensor& params, int64_t vocab_start,
                                  const Tensor& stats, const Tensor& pieces) = 0;
  // Stage 2, once every rank's stats are gathered into all_stats f32[W * S * 4] (rank-major):
  // every rank finds where each row's draw falls (greedy: the largest m, lowest id on ties; else
  // the inverse CDF over the ranks' masses in id order, then within the slice that holds the
  // crossing). picks i32[>= S]: the token where this rank holds it, else -1.
  virtual void shard_sample_pick(const Tensor& logits, const Tensor& params, int64_t vocab_start, int rank,
                                 const Tensor& all_stats, const Tensor& pieces, const Tensor& picks) = 0;
  // Stage 3, once the picks are gathered into all_picks i32[W * P] (rank-major, P >= rows):
  // tokens[s] = the one pick of row s that is not -1 (the largest).
  virtual void shard_sample_merge(const Tensor& all_picks, int world, const Tensor& tokens) = 0;

  // In place on ids (i32[n], on the device): each id < 0 becomes sampled[-id - 1], a token the
  // previous step sampled and the host has not seen yet (engine/step_input.h: pending_token).
  virtual void resolve_pending_ids(const Tensor& ids, const Tensor& sampled) = 0;

  // ---- penalties and logprobs (rank 0; called only for batches that ask for them, after the
  // forward and its graph; semantics in sampling/logits_processing.h) ----
  // counts: i32[slots, V], kept on the device between steps. Zeroes the rows update.reset_slots,
  // then counts each (slots[i], tokens[i]) as a prompt or a generated token.
  virtual void update_token_counts(const Tensor& counts, const TokenCountUpdate& update) = 0;
  // In place on logits f32[S, V]: row r with slots[r] >= 0 gets batch row r's penalties over
  // counts[slots[r]]; the other rows are left alone.
  virtual void apply_penalties(const Tensor& logits, const Tensor& counts, const std::vector<int32_t>& slots,
                               const SamplingBatch& batch) = 0;
  // In place on logits f32[S, V]: row r gets the batch's bias entries [bias_offsets[r],
  // bias_offsets[r + 1]) added (logit_bias, min_tokens, bad_words; apply_bias_row in
  // logits_processing.h); a -inf entry bans its token.
  virtual void apply_logit_bias(const Tensor& logits, const SamplingBatch& batch) = 0;
  // In place on logits f32[S, V]: row r's tokens whose bit is clear in the batch's bitmask row r
  // become -inf (structured outputs; apply_bitmask_row in logits_processing.h).
  virtual void apply_token_bitmask(const Tensor& logits, const SamplingBatch& batch) = 0;
  // For each row r of logits f32[S, V]: chosen[r] = the log-softmax at tokens[r]; the k most likely
  // tokens (k <= V) into top_ids / top_logprobs [S, k]. All host arrays.
  virtual void compute_logprobs(const Tensor& logits, const int32_t* tokens, int k, float* chosen, int32_t* top_ids,
                                float* top_logprobs) = 0;

  // ---- tensor parallelism ----
  // This rank's communicator over this backend's tensors (and stream). `bootstrap` is what
  // make_comm_bootstrap (runtime/backend_select.h) gave rank 0 before the workers started: the
  // shared-memory segment's fd on the CPU, NCCL's unique id on CUDA. Collective: every rank calls it.
  virtual std::unique_ptr<Communicator> create_communicator(int rank, int world_size, const std::string& bootstrap) = 0;

  // ---- the persistent decode kernel (issue 50) ----
  // Checks that this backend can run `m`'s layers as one kernel, allocates its scratch into it and
  // sets m.max_batch. Returns why not (empty when it can), so the model keeps its layer-by-layer path.
  virtual std::string prepare_persistent_decode(PersistentDecodeModel& m);
  // Every layer of a decode batch of at most m.max_batch sequences (one token each, bf16 cache):
  // reads the residual stream (f32 [n, H], the embedded tokens), writes each layer's k and v into
  // `caches` and leaves the last layer's output added into the residual. The final norm is the
  // caller's.
  virtual void persistent_decode(const PersistentDecodeModel& m, const Tensor& residual, const Tensor& positions,
                                 const std::vector<KVCache>& caches, const AttentionMetadata& meta);

  // ---- graphs (decode) ----
  virtual bool supports_graphs() const { return false; }
  // Records `body` as a graph, returns its handle (>= 0). All graphs share one memory pool.
  virtual int capture_graph(const std::function<void()>& body) { return -1; }
  virtual void replay_graph(int handle) {}

 private:
  std::vector<std::vector<int32_t>> sampled_on_host_;  // the default sample_async's results, oldest first
};

}  // namespace minivllm
