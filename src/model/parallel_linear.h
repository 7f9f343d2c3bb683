// The seeds' tensor-parallel linear layers. Each rank holds only its shard of the weight, loaded
// straight from the checkpoint's memory map (WeightSource::get_f32_slice, or get_stored_slice when
// the backend computes on the checkpoint's own format: Backend::keeps_weight_dtype), and calls backend ops
// and the communicator; with world_size 1 every layer is the plain, unsharded linear.
//
//   ColumnParallelLinear        W [out, in]: rank r holds rows [r out/ws, (r+1) out/ws); output sharded
//   MergedColumnParallelLinear  [gate; up]: each part column-sharded, concatenated per rank
//   QKVParallelLinear           [q; k; v]: heads sharded (q heads and kv heads each / ws)
//   RowParallelLinear           W [out, in]: rank r holds columns [r in/ws, ...); partial sums all-reduced
#pragma once

#include <array>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/communicator.h"
#include "loader/weight_source.h"

namespace minivllm {

// One rank's part of a checkpoint tensor: `length` rows or columns (dim 0 or 1) from `start`.
struct ShardPart {
  std::string name;
  std::vector<int64_t> shape;  // the whole tensor's
  int dim = 0;
  int64_t start = 0, length = 0;
  std::vector<int64_t> part_shape() const;
};

// Where a rank's shard comes from and goes to: the checkpoint, the backend and the communicator.
struct ShardContext {
  const WeightSource& src;
  Backend& backend;
  Communicator& comm;
  bool experts = false;  // the weights are a MoE layer's experts (Backend::keeps_expert_dtype)
  int rank() const { return comm.rank(); }
  int world_size() const { return comm.world_size(); }
  // `name` [rows, cols] (cols 0: 1-D), rows split into world_size parts: this rank's part.
  ShardPart row_shard(const std::string& name, int64_t rows, int64_t cols) const;
  // `name` [rows, cols], columns split into world_size parts: this rank's part (a quantised
  // tensor's column split must fall on its 32-element blocks).
  ShardPart col_shard(const std::string& name, int64_t rows, int64_t cols) const;
  // The whole tensor (replicated on every rank: norms), fp32.
  Tensor replicated(const std::string& name, std::vector<int64_t> shape) const;
  // The parts concatenated along rows as one device weight. Dummy weights are made in place on the
  // device (WeightSource::hashed_uniform, hashed_fp8); others are read on the host, in their stored
  // dtype when they share one the backend keeps, else all decoded to fp32 (a checkpoint mixing
  // types), and uploaded.
  Tensor upload_rows(const std::vector<ShardPart>& parts) const;
  // Dummy weights of an FP8 config: the codes made in place and the scale grid the host path
  // (read, stack_fp8_rows, upload_stored_weight) would give; nullopt where that grid is not one of
  // the two shapes built here (the host path then runs).
  std::optional<Tensor> make_fp8_codes_in_place(const std::vector<ShardPart>& parts) const;

 private:
  Tensor read(const ShardPart& part) const;  // the part on the host
  bool keeps(DType stored) const;             // whether the backend computes on `stored` here
  // Host parts of different kept types, each uploaded, as one WeightParts weight [rows, cols].
  Tensor stack_parts(const std::vector<Tensor>& host_parts, int64_t rows, int64_t cols) const;
  Tensor make_rows_in_place(const std::vector<ShardPart>& parts) const;
  Tensor make_fp8_in_place(const std::vector<ShardPart>& parts) const;  // dummy weights, online FP8
};

class ColumnParallelLinear {
 public:
  ColumnParallelLinear() = default;
  ColumnParallelLinear(const ShardContext& ctx, const std::string& name, int64_t in, int64_t out, bool bias);
  const Tensor& weight() const { return weight_; }
  const Tensor* bias() const { return bias_.empty() ? nullptr : &bias_; }
  // out[T, out / ws] = x W_r^T (+ b_r).
  void forward(Backend& b, const Tensor& x, const Tensor& out) const { b.linear(x, weight_, bias(), out); }

 protected:
  Tensor weight_, bias_;
};

class MergedColumnParallelLinear : public ColumnParallelLinear {
 public:
  MergedColumnParallelLinear() = default;
  // Parts named `names`, each [out, in] (gate_proj, up_proj).
  MergedColumnParallelLinear(const ShardContext& ctx, const std::vector<std::string>& names, int64_t in, int64_t out);
};

class QKVParallelLinear : public ColumnParallelLinear {
 public:
  QKVParallelLinear() = default;
  // The q, k and v modules (+ ".weight", ".bias").
  QKVParallelLinear(const ShardContext& ctx, const std::array<std::string, 3>& modules, int64_t hidden,
                    int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, bool bias);
};

class RowParallelLinear {
 public:
  RowParallelLinear() = default;
  // bias: the module's [out] bias (gpt-oss's o_proj), added once: by rank 0 before the all-reduce.
  RowParallelLinear(const ShardContext& ctx, const std::string& name, int64_t in, int64_t out, bool bias = false);
  const Tensor& weight() const { return weight_; }
  // residual (fp32 [T, out]) += x_r W_r^T summed over ranks. One rank: the backend's fused
  // epilogue add (`scratch`, activation dtype [T, out], may hold the product). Several: the
  // partial product into `scratch` (or `partial`, fp32 [T, out], with MINIVLLM_TP_PARTIALS=f32),
  // all-reduced, then added: the all-reduce comes before the residual add. With several ranks
  // also normed = rms_norm(residual) * norm_weight (the next block's input norm) where it can
  // (true): in the all-reduce's kernel, or in the add after it (Backend::add_rms_norm) when
  // normed is `scratch`; MINIVLLM_TP_FUSED_NORM=0 never. False: only the residual was updated;
  // the caller norms it. One rank: the norm is noted for the backend (Backend::note_next_norm) unless
  // !note_norm (its consumer is not a linear that takes a folded norm: the MoE's norm-route).
  bool forward_add_residual_norm(Backend& b, Communicator& comm, const Tensor& x, const Tensor& scratch,
                                 const Tensor& partial, const Tensor& residual, const Tensor& norm_weight, float eps,
                                 const Tensor& normed, bool note_norm = true) const;
  // out (activation dtype [T, out]) = x_r W_r^T summed over ranks: the whole product, for a caller
  // that transforms it before the residual add (Gemma's output norms).
  void forward(Backend& b, Communicator& comm, const Tensor& x, const Tensor& out) const;
  // MINIVLLM_TP_PARTIALS=f32: whether forward_add_residual_norm needs `partial` at world_size > 1.
  static bool tp_partials_f32();
  static bool fused_norm_off();  // MINIVLLM_TP_FUSED_NORM=0

 private:
  const Tensor* bias() const { return bias_.defined() ? &bias_ : nullptr; }
  Tensor weight_;
  Tensor bias_;  // f32 [out] on rank 0 where the module has one; else undefined
};

// world_size > 1: p (this rank's partial sums, [T, out]) all-reduced and added to the residual,
// then normed into `normed` where it can (returns true), as forward_add_residual_norm's second
// half; shared by every row-parallel output (the MoE layer's experts too).
bool all_reduce_add_residual_norm(Backend& b, Communicator& comm, const Tensor& p, const Tensor& residual,
                                  const Tensor& norm_weight, float eps, const Tensor& normed);

}  // namespace minivllm
