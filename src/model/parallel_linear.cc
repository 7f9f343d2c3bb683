#include "model/parallel_linear.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "common/check.h"
#include "common/tuning.h"
#include "common/fp8_weight.h"
#include "common/quant_blocks.h"

namespace minivllm {
namespace {

int64_t split(int64_t n, int world, const std::string& name, const char* what) {
  MINIVLLM_CHECK(n % world == 0) << name << ": " << what << " " << n << " does not divide by world_size " << world;
  return n / world;
}

}  // namespace

std::vector<int64_t> ShardPart::part_shape() const {
  std::vector<int64_t> s = shape;
  s[static_cast<size_t>(dim)] = length;
  return s;
}

bool ShardContext::keeps(DType stored) const {
  return experts ? backend.keeps_expert_dtype(stored) : backend.keeps_weight_dtype(stored);
}

Tensor ShardContext::read(const ShardPart& p) const {
  // A missing tensor falls through to get_f32_slice, whose error names the tensor, file and slice.
  if (p.shape.size() == 2 && src.has(p.name) && keeps(src.stored_dtype(p.name))) {
    return src.get_stored_slice(p.name, p.shape, p.dim, p.start, p.length);
  }
  return src.get_f32_slice(p.name, p.shape, p.dim, p.start, p.length);
}

ShardPart ShardContext::row_shard(const std::string& name, int64_t rows, int64_t cols) const {
  const int64_t part = split(rows, world_size(), name, "rows");
  std::vector<int64_t> shape = cols > 0 ? std::vector<int64_t>{rows, cols} : std::vector<int64_t>{rows};
  return ShardPart{name, shape, 0, rank() * part, part};
}

ShardPart ShardContext::col_shard(const std::string& name, int64_t rows, int64_t cols) const {
  const int64_t part = split(cols, world_size(), name, "columns");
  return ShardPart{name, {rows, cols}, 1, rank() * part, part};
}

Tensor ShardContext::replicated(const std::string& name, std::vector<int64_t> shape) const {
  return src.get_f32(name, shape);
}

Tensor ShardContext::stack_parts(const std::vector<Tensor>& host_parts, int64_t rows, int64_t cols) const {
  auto stacked = std::make_shared<WeightParts>();
  for (const Tensor& p : host_parts) stacked->parts.push_back(backend.upload_stored_weight(p));
  const Tensor& first = stacked->parts.front();
  return Tensor(first.data(), first.dtype(), {rows, cols}, first.device()).with_parts(std::move(stacked));
}

Tensor ShardContext::upload_rows(const std::vector<ShardPart>& shard_parts) const {
  MINIVLLM_CHECK(!shard_parts.empty()) << "upload_rows: no parts";
  if (std::all_of(shard_parts.begin(), shard_parts.end(),
                  [&](const ShardPart& p) { return src.has(p.name) && src.hashed_uniform(p.name).has_value(); })) {
    return make_rows_in_place(shard_parts);
  }
  if (keeps(DType::kF8E4M3) &&
      std::all_of(shard_parts.begin(), shard_parts.end(),
                  [&](const ShardPart& p) { return src.has(p.name) && src.hashed_fp8(p.name).has_value(); })) {
    if (std::optional<Tensor> w = make_fp8_codes_in_place(shard_parts)) return *w;
  }
  std::vector<Tensor> parts;
  for (const ShardPart& p : shard_parts) parts.push_back(read(p));
  if (parts.size() == 1) return backend.upload_stored_weight(parts.front());
  const auto is_fp8 = [](const Tensor& t) { return t.dtype() == DType::kF8E4M3; };
  if (std::all_of(parts.begin(), parts.end(), is_fp8)) return backend.upload_stored_weight(stack_fp8_rows(parts));
  for (Tensor& p : parts) {
    if (is_fp8(p)) p = dequantize_fp8_weight(p);  // mixed with unquantized parts: all as values
  }
  int64_t rows = 0;
  const bool one_d = parts.front().ndim() == 1;
  const int64_t cols = one_d ? 1 : parts.front().size(1);
  DType dtype = parts.front().dtype();
  bool mixed = false, widens = !one_d;
  for (const Tensor& p : parts) {
    MINIVLLM_CHECK(one_d || p.size(1) == cols) << "upload_rows: parts of different widths";
    rows += p.size(0);
    mixed = mixed || p.dtype() != dtype;
    widens = widens && widens_to_q8_0(p.dtype());
  }
  // Mixed types: re-encoded as Q8_0 where it holds every part value for value (llama-quantize's Q5_0
  // q/k beside a Q8_0 v); else kept part by part where the backend reads such a weight (Q4_K q/k
  // beside a Q6_K v), else every part decoded to fp32.
  if (mixed && !widens && !one_d && backend.keeps_weight_parts() &&
      std::all_of(parts.begin(), parts.end(), [&](const Tensor& p) { return keeps(p.dtype()); })) {
    return stack_parts(parts, rows, cols);
  }
  if (mixed) dtype = widens ? DType::kQ8_0 : DType::kF32;
  Tensor out = one_d ? host_tensor(dtype, {rows}) : host_tensor(dtype, {rows, cols});
  char* dst = static_cast<char*>(out.data());
  for (const Tensor& p : parts) {
    if (p.dtype() == dtype) {
      std::memcpy(dst, p.data(), p.nbytes());
    } else if (dtype == DType::kQ8_0) {
      widen_to_q8_0(p.dtype(), p.data(), dst, p.numel());
    } else {
      dequantize_to_f32(p.dtype(), p.data(), reinterpret_cast<float*>(dst), p.numel());
    }
    dst += dtype_nbytes(dtype, p.numel());
  }
  return backend.upload_stored_weight(out);
}

// Dummy weights: each part's rows of the device weight are filled where they lie, at the indices
// the part has in its whole tensor (no host copy: a 70B model's shards load in about a second).
Tensor ShardContext::make_rows_in_place(const std::vector<ShardPart>& parts) const {
  if (src.stored_dtype(parts.front().name) == DType::kF8E4M3) return make_fp8_in_place(parts);
  const bool one_d = parts.front().shape.size() == 1;
  int64_t rows = 0;
  for (const ShardPart& p : parts) rows += p.part_shape()[0];
  const int64_t cols = one_d ? 1 : parts.front().part_shape()[1];
  Tensor out = backend.empty(backend.weight_dtype(), one_d ? std::vector<int64_t>{rows} : std::vector<int64_t>{rows, cols});
  int64_t row = 0;
  for (const ShardPart& p : parts) {
    const std::vector<int64_t> ps = p.part_shape();
    MINIVLLM_CHECK(one_d == (ps.size() == 1) && (one_d || ps[1] == cols))
        << "upload_rows: " << p.name << " does not stack with " << parts.front().name;
    const int64_t full_cols = one_d ? 1 : p.shape[1];
    // Element (r, c) of the part is element (start + r, c) (a row shard) or (r, start + c) (a
    // column shard) of the whole tensor.
    const int64_t base = p.dim == 0 ? p.start * full_cols : p.start;
    backend.fill_hashed_uniform(out.rows(row, row + ps[0]), *src.hashed_uniform(p.name), base, one_d ? 1 : full_cols);
    row += ps[0];
  }
  return out;
}

// Online FP8 of dummy weights: each part made in place with whole rows (a column shard's rows too:
// a row's scale spans all its columns, at every world size), quantized on the device
// (Backend::quantize_weight_fp8), and the parts' codes and per-row scales stacked.
Tensor ShardContext::make_fp8_in_place(const std::vector<ShardPart>& parts) const {
  std::vector<Tensor> quantized;
  int64_t rows = 0;
  for (const ShardPart& p : parts) {
    MINIVLLM_CHECK(p.shape.size() == 2 && src.stored_dtype(p.name) == DType::kF8E4M3)
        << "upload_rows: " << p.name << " does not stack with " << parts.front().name << " as an FP8 weight";
    const int64_t full_cols = p.shape[1];
    const int64_t part_rows = p.dim == 0 ? p.length : p.shape[0];
    Tensor whole = backend.empty(backend.weight_dtype(), {part_rows, full_cols});
    backend.fill_hashed_uniform(whole, *src.hashed_uniform(p.name), p.dim == 0 ? p.start * full_cols : 0, full_cols);
    const int64_t c0 = p.dim == 1 ? p.start : 0, c1 = p.dim == 1 ? p.start + p.length : full_cols;
    quantized.push_back(backend.quantize_weight_fp8(whole, c0, c1));
    rows += part_rows;
  }
  if (quantized.size() == 1) return quantized.front();
  const Tensor& first = quantized.front();
  Tensor out = backend.empty(first.dtype(), {rows, first.size(1)});
  const std::shared_ptr<const WeightScales>& fs = first.scales();
  Tensor grid = fs ? backend.empty(DType::kF32, {rows, fs->grid.size(1)}) : Tensor();
  int64_t row = 0;
  for (const Tensor& q : quantized) {
    const int64_t n = q.size(0);
    backend.copy(out.rows(row, row + n), q);
    if (grid.defined()) {  // one grid row per weight row, the same blocks in every part
      MINIVLLM_CHECK(q.scales() && q.scales()->block_rows == 1 && q.scales()->block_cols == fs->block_cols)
          << "upload_rows: online FP8 scales are per row";
      backend.copy(grid.rows(row, row + n), q.scales()->grid);
    }
    row += n;
  }
  if (!grid.defined()) return out;
  return out.with_scales(std::make_shared<WeightScales>(WeightScales{grid, 1, fs->block_cols, Tensor()}));
}

// The grid is one of two shapes, each what the host path's canonical weight holds:
//  - a scale spanning whole rows (per channel or per tensor): one scale a row, blocks of 1 x cols;
//  - blocks narrower than the columns: each part's [ceil(rows / br), ceil(cols / bc)] blocks stacked,
//    when every part but the last has whole blocks of rows (a block taller than the weight is cut).
// The codes of each part are made where they lie, at the indices the part has in its whole tensor.
std::optional<Tensor> ShardContext::make_fp8_codes_in_place(const std::vector<ShardPart>& parts) const {
  struct Piece {
    HashedFp8 f;
    int64_t rows, cols, base, full_cols, br, bc;
  };
  std::vector<Piece> pieces;
  int64_t rows = 0;
  for (const ShardPart& p : parts) {
    if (p.shape.size() != 2) return std::nullopt;
    const HashedFp8 f = *src.hashed_fp8(p.name);
    const std::vector<int64_t> ps = p.part_shape();
    const int64_t full_rows = p.shape[0], full_cols = p.shape[1];
    const int64_t br = f.block_rows > 0 ? f.block_rows : full_rows, bc = f.block_cols > 0 ? f.block_cols : full_cols;
    // A slice that cuts a block (of a dimension with blocks: 0 means one scale spans it, any slice
    // keeps it): the host path reports it by name.
    const int64_t block = p.dim == 0 ? f.block_rows : f.block_cols, size = p.dim == 0 ? full_rows : full_cols;
    if (block > 1 && (p.start % block != 0 || ((p.start + p.length) % block != 0 && p.start + p.length != size))) {
      return std::nullopt;
    }
    pieces.push_back({f, ps[0], ps[1], p.dim == 0 ? p.start * full_cols : p.start, full_cols, br, bc});
    rows += ps[0];
  }
  const int64_t cols = pieces.front().cols;
  const bool row_scales = std::all_of(pieces.begin(), pieces.end(), [&](const Piece& q) { return q.bc >= q.full_cols; });
  const bool blocks = std::all_of(pieces.begin(), pieces.end(), [&](const Piece& q) {
    return q.bc < cols && q.br == pieces.front().br && q.bc == pieces.front().bc;
  });
  if (!row_scales && !blocks) return std::nullopt;
  if (blocks && std::any_of(pieces.begin(), pieces.end() - 1, [](const Piece& q) { return q.rows % q.br != 0; })) {
    return std::nullopt;
  }
  const int64_t bc = row_scales ? cols : pieces.front().bc;
  const int64_t br = row_scales ? 1 : std::min(pieces.front().br, rows);
  const int64_t grid_cols = row_scales ? 1 : (cols + bc - 1) / bc;
  auto grid_rows_of = [&](const Piece& q) { return row_scales ? q.rows : (q.rows + q.br - 1) / q.br; };
  int64_t grid_rows = 0;
  for (const Piece& q : pieces) grid_rows += grid_rows_of(q);
  Tensor grid_host = host_tensor(DType::kF32, {grid_rows, grid_cols});
  Tensor codes = backend.empty(DType::kF8E4M3, {rows, cols});
  int64_t row = 0;
  float* g = grid_host.ptr<float>();
  for (const Piece& q : pieces) {
    backend.fill_hashed_e4m3(codes.rows(row, row + q.rows), q.f.values, q.f.scale, q.base, q.full_cols);
    g = std::fill_n(g, grid_rows_of(q) * grid_cols, q.f.scale);
    row += q.rows;
  }
  Tensor grid = backend.empty(DType::kF32, {grid_rows, grid_cols});
  backend.copy_from_host(grid, grid_host.data());
  backend.synchronize();  // grid_host dies here
  auto scales = std::make_shared<WeightScales>(WeightScales{grid, br, bc, Tensor()});
  scales->decoded = backend.decoded_fp8_copy(codes.with_scales(scales));
  return codes.with_scales(std::move(scales));
}

ColumnParallelLinear::ColumnParallelLinear(const ShardContext& ctx, const std::string& name, int64_t in, int64_t out,
                                           bool bias) {
  weight_ = ctx.upload_rows({ctx.row_shard(name + ".weight", out, in)});
  if (bias) bias_ = ctx.upload_rows({ctx.row_shard(name + ".bias", out, 0)});
}

MergedColumnParallelLinear::MergedColumnParallelLinear(const ShardContext& ctx, const std::vector<std::string>& names,
                                                       int64_t in, int64_t out) {
  std::vector<ShardPart> parts;
  for (const std::string& n : names) parts.push_back(ctx.row_shard(n, out, in));
  weight_ = ctx.upload_rows(parts);
}

QKVParallelLinear::QKVParallelLinear(const ShardContext& ctx, const std::array<std::string, 3>& modules,
                                     int64_t hidden, int64_t num_heads, int64_t num_kv_heads, int64_t head_dim,
                                     bool bias) {
  const int ws = ctx.world_size();
  MINIVLLM_CHECK(num_heads % ws == 0 && num_kv_heads % ws == 0)
      << modules[0] << ": " << num_heads << " attention heads and " << num_kv_heads
      << " KV heads must both divide by world_size " << ws;
  const int64_t nq = num_heads * head_dim, nkv = num_kv_heads * head_dim;
  auto parts = [&](const char* kind, int64_t cols) {
    return std::vector<ShardPart>{ctx.row_shard(modules[0] + kind, nq, cols), ctx.row_shard(modules[1] + kind, nkv, cols),
                               ctx.row_shard(modules[2] + kind, nkv, cols)};
  };
  weight_ = ctx.upload_rows(parts(".weight", hidden));
  if (bias) bias_ = ctx.upload_rows(parts(".bias", 0));
}

RowParallelLinear::RowParallelLinear(const ShardContext& ctx, const std::string& name, int64_t in, int64_t out,
                                     bool bias) {
  weight_ = ctx.upload_rows({ctx.col_shard(name + ".weight", out, in)});
  if (bias && ctx.rank() == 0) {
    bias_ = ctx.backend.upload_weight(ctx.replicated(name + ".bias", {out}), /*keep_f32=*/true);
  }
}

bool RowParallelLinear::forward_add_residual_norm(Backend& b, Communicator& comm, const Tensor& x,
                                                  const Tensor& scratch, const Tensor& partial,
                                                  const Tensor& residual, const Tensor& norm_weight, float eps,
                                                  const Tensor& normed, bool note_norm) const {
  if (comm.world_size() == 1 && bias_.defined()) {  // linear_add_residual takes no bias: the product, then the add
    b.linear(x, weight_, &bias_, scratch);
    b.add_to_residual(scratch, residual);
    return false;
  }
  if (comm.world_size() == 1) {
    if (note_norm) b.note_next_norm(residual, norm_weight, eps);  // a backend may make that norm's input in the add
    b.linear_add_residual(x, weight_, scratch, residual);
    return false;
  }
  // The partial products travel in the activation dtype (`scratch`: bf16 on CUDA, half the bytes
  // of fp32 for the all-reduce, which at world_size 2 costs a decode step more than any GEMM), as
  // the one-rank path's unfused epilogue rounds the product before its add. The sum itself is
  // fp32 and rounded once. MINIVLLM_TP_PARTIALS=f32 sends fp32 partial sums (`partial`) instead.
  const Tensor& p = tp_partials_f32() ? partial : scratch;
  b.linear(x, weight_, bias(), p);
  return all_reduce_add_residual_norm(b, comm, p, residual, norm_weight, eps, normed);
}

bool all_reduce_add_residual_norm(Backend& b, Communicator& comm, const Tensor& p, const Tensor& residual,
                                  const Tensor& norm_weight, float eps, const Tensor& normed) {
  const bool norm = !RowParallelLinear::fused_norm_off();
  // The kernel reads each tile of p before it writes that tile of normed: p may be normed.
  if (norm && comm.all_reduce_sum_into_norm(p, residual, norm_weight, eps, normed)) return true;
  if (comm.all_reduce_sum_into(p, residual)) return false;  // the reduction adds into the residual itself
  comm.all_reduce_sum(p);
  // NCCL's messages (past the one-shot kernel's limit: the long prefill steps) and the CPU: the
  // add and the norm in one pass over the residual, when the sum already sits where the norm goes
  // (bf16 partials in the activation scratch). Bit-identical to add_to_residual, then rms_norm.
  if (norm && p.data() == normed.data() && p.dtype() == normed.dtype() && p.numel() == normed.numel()) {
    b.add_rms_norm(p, residual, norm_weight, eps);
    return true;
  }
  b.add_to_residual(p, residual);
  return false;
}

void RowParallelLinear::forward(Backend& b, Communicator& comm, const Tensor& x, const Tensor& out) const {
  b.linear(x, weight_, bias(), out);
  if (comm.world_size() > 1) comm.all_reduce_sum(out);
}

bool RowParallelLinear::fused_norm_off() {
  static const bool off = !knob_flag("MINIVLLM_TP_FUSED_NORM");
  return off;
}

bool RowParallelLinear::tp_partials_f32() {
  static const bool f32 = knob_mode("MINIVLLM_TP_PARTIALS") == "f32";
  return f32;
}

}  // namespace minivllm
