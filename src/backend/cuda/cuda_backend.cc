// CudaBackend: device set-up, memory (cudaMalloc per tensor, freed by the tensor's owner), copies
// on the backend's stream, graphs (captured on that stream, replayed by handle), the sampler's
// host side, and the factory of cuda_backend.h.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <sstream>
#include <string>

#include "backend/cuda/attention_shapes.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/decode_policy.h"
#include "backend/cuda/device_scratch.h"
#include "backend/cuda/nccl_communicator.h"
#include "common/tuning.h"

namespace minivllm::cuda {

CudaBackend::CudaBackend(int device_index) : device_(device_index) {
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  MINIVLLM_CHECK(device_index >= 0 && device_index < count)
      << "cuda backend: device " << device_index << " of " << count << " devices";
  CUDA_CHECK(cudaSetDevice(device_));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
  num_sms_ = prop.multiProcessorCount;
  device_name_ = prop.name;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  gemm_ = std::make_unique<LtGemm>();
  fp8_gemm_ = std::make_unique<Fp8Gemm>();
  // Rows at the smallest head_dim: the lse and counter arrays serve every head_dim.
  decode_partial_rows_ = decode_partial_rows(kMinDecodeHeadDim);
  CUDA_CHECK(cudaMalloc(&decode_partial_o_, kDecodePartialFloats * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&decode_partial_lse_, decode_partial_rows_ * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&decode_counters_, decode_partial_rows_ * sizeof(int)));
  CUDA_CHECK(cudaMemset(decode_counters_, 0, decode_partial_rows_ * sizeof(int)));
  decode_min_partition_ =
      static_cast<int>(knob_int("MINIVLLM_DECODE_MIN_PARTITION").value_or(kDefaultMinDecodePartition));
  decode_max_partition_ = kDefaultMaxDecodePartition;
  decode_mma_max_partition_ = kDefaultMaxDecodeMmaPartition;
  if (const std::optional<int64_t> p = knob_int("MINIVLLM_DECODE_MAX_PARTITION")) {
    decode_max_partition_ = decode_mma_max_partition_ = static_cast<int>(*p);  // every decode kernel's
  }
  if (const std::optional<std::string> w = knob_word("MINIVLLM_DECODE_WIDE")) {
    decode_wide_ = *w != "0";
    decode_wide_always_ = *w == "force";
  }
  prefill_kernel_checked();  // a mistyped MINIVLLM_PREFILL_KERNEL stops here, not at the first prefill
  MINIVLLM_CHECK_EQ(knob("MINIVLLM_DECODE_GEMM_TOKENS").hi, kDecodeGemmMaxTokens) << "the knob table's range";
  decode_gemm_ = prop.major == 9 && prop.minor == 0 && knob_flag("MINIVLLM_DECODE_GEMM");
  fp8_weights_ = knob_flag("MINIVLLM_FP8_WEIGHTS");
  decode_gemm_tokens_ = knob_number("MINIVLLM_DECODE_GEMM_TOKENS");
  moe_gemv_tokens_ = knob_number("MINIVLLM_MOE_GEMV_TOKENS");
  moe_small_tile_rows_ = knob_number("MINIVLLM_MOE_SMALL_TILE_ROWS");
  moe_down_rows_ = static_cast<int>(knob_number("MINIVLLM_MOE_DOWN_ROWS"));
  moe_down_rows_one_ = static_cast<int>(knob_number("MINIVLLM_MOE_DOWN_ROWS_ONE"));
  moe_gate_chunks_ = static_cast<int>(knob_number("MINIVLLM_MOE_GATE_CHUNKS"));
  moe_route_cta_ = knob_flag("MINIVLLM_MOE_ROUTE_CTA");
  moe_norm_route_ = knob_flag("MINIVLLM_MOE_NORM_ROUTE");
  moe_route_in_gate_ = knob_flag("MINIVLLM_MOE_ROUTE_IN_GATE");
  decode_staged_ = knob_flag("MINIVLLM_DECODE_STAGED");
  decode_wide_mma_ = static_cast<int>(knob_int("MINIVLLM_DECODE_WIDE_MMA").value_or(kDecodeWideMmaMaxSeqs));
  decode_wide_mma_heads_ = static_cast<int>(knob_int("MINIVLLM_DECODE_WIDE_MMA_HEADS").value_or(0));
  decode_wide_pairs_ =
      static_cast<int>(knob_int("MINIVLLM_DECODE_WIDE_PAIRS").value_or(kDecodeWidePairsMaxSeqs));
  decode_wide_staged_splits_ = knob_flag("MINIVLLM_DECODE_WIDE_STAGED_SPLITS");
  persistent_ring_ = static_cast<int>(knob_int("MINIVLLM_DECODE_PERSISTENT_RING").value_or(0));
  persistent_prefetch_ = knob_flag("MINIVLLM_DECODE_PERSISTENT_PREFETCH");
  gemv_rope_ = knob_flag("MINIVLLM_GEMV_ROPE");
  gemv_norm_late_ = knob_flag("MINIVLLM_GEMV_NORM_LATE");
  gemv_norm_max_k_ = knob_int("MINIVLLM_GEMV_NORM_MAX_K").value_or(gemv_norm_max_k_);
  gemv_stage_ = knob_flag("MINIVLLM_GEMV_STAGE");
  prefetch_after_attention_ = static_cast<int>(knob_number("MINIVLLM_GEMV_PREFETCH_U_AFTER_ATTENTION"));
  if (const std::optional<int64_t> e = knob_int("MINIVLLM_DECODE_LANE_ELEMS")) {
    decode_lane_elems_ = static_cast<int>(*e);
  }
  if (const std::optional<bool> mma = knob_switch("MINIVLLM_DECODE_MMA")) decode_mma_ = *mma ? 1 : 0;
  if (const std::optional<bool> ring = knob_switch("MINIVLLM_DECODE_RING")) decode_ring_ = *ring ? 1 : 0;
  decode_seq_order_ = knob_switch("MINIVLLM_DECODE_SEQ_ORDER").value_or(decode_use_seq_order());
  if (const std::optional<bool> ring = knob_switch("MINIVLLM_DECODE_MMA_RING")) decode_mma_ring_ = *ring ? 1 : 0;
  decode_mma_pipe_ = knob_flag("MINIVLLM_DECODE_MMA_PIPE");
  decode_held_splits_ = static_cast<int>(knob_number("MINIVLLM_DECODE_HELD_SPLITS"));
  decode_one_split_keys_ =
      static_cast<int>(knob_int("MINIVLLM_DECODE_ONE_SPLIT_KEYS").value_or(kDefaultDecodeOneSplitKeys));
  decode_prefetch_split_ = knob_flag("MINIVLLM_DECODE_PREFETCH_SPLIT");
  if (const std::optional<int64_t> t = knob_int("MINIVLLM_DECODE_MMA_TILES")) {
    decode_mma_tiles_ = static_cast<int>(*t);
  }
  if (StreamIdleProbe::enabled_by_env()) idle_probe_ = std::make_unique<StreamIdleProbe>();
  quant_weights_ = knob_flag("MINIVLLM_QUANT_WEIGHTS");
  if (const std::optional<bool> p = knob_switch("MINIVLLM_QUANT_GEMV_PIPELINE")) quant_gemv_pipeline_ = *p ? 1 : 0;
  quant_fused_codes_ = knob_flag("MINIVLLM_QUANT_FUSED_CODES");
  quant_gemv_stream_ = knob_flag("MINIVLLM_QUANT_GEMV_STREAM");
  quant_stream_stages_ = static_cast<int>(knob_number("MINIVLLM_QUANT_STREAM_STAGES"));
  quant_stream_ctas_ = static_cast<int>(knob_number("MINIVLLM_QUANT_STREAM_CTAS"));
  quant_stream_spread_ = knob_flag("MINIVLLM_QUANT_STREAM_SPREAD");
  fp8_w8a8_ = knob_flag("MINIVLLM_FP8_GEMV_W8A8");
  fp8_w8a8_lane_bytes_ = static_cast<int>(knob_int("MINIVLLM_FP8_W8A8_LANE_BYTES").value_or(0));
  fp8_gemv_one_pairs_ = static_cast<int>(knob_number("MINIVLLM_FP8_GEMV_ONE"));
  fp8_gemv_one_min_codes_ = knob_number("MINIVLLM_FP8_GEMV_ONE_MIN_MB") << 20;
  fp8_gemv_one_x16_ = knob_flag("MINIVLLM_FP8_GEMV_ONE_X16");
  fp8_gemv_one_blocks_ = knob_flag("MINIVLLM_FP8_GEMV_ONE_BLOCKS");
  fp8_block_early_residual_ = knob_flag("MINIVLLM_FP8_BLOCK_EARLY_RESIDUAL");
  fp8_gemv_one_x16_blocks_ = knob_flag("MINIVLLM_FP8_GEMV_ONE_X16_BLOCKS");
  fp8_normed_x16_ = knob_flag("MINIVLLM_FP8_NORMED_X16");
  fp8_rope_scales_ = knob_flag("MINIVLLM_FP8_ROPE_SCALES");
  fp8_kv_rotate_ = knob_flag("MINIVLLM_FP8_KV_ROTATE");
  fp8_add_norm_ = knob_flag("MINIVLLM_FP8_ADD_NORM");
  const std::string block_gemm = knob_mode("MINIVLLM_FP8_BLOCK_GEMM");
  fp8_block_gemm_ = block_gemm == "all" ? Fp8BlockGemm::kAll : block_gemm == "0" ? Fp8BlockGemm::kOff
                                                                                : Fp8BlockGemm::kUncopied;
  fp8_block_gemm_two_terms_ = knob_mode("MINIVLLM_FP8_BLOCK_GEMM_X") == "two";
  fp8_block_gemm_copied_tokens_ = knob_number("MINIVLLM_FP8_BLOCK_GEMM_TOKENS");
  norm_fold_ = decode_gemm_ ? knob_number("MINIVLLM_DECODE_GEMM_NORM_FOLD") : 0;
  gemv_norm_fold_ = static_cast<int>(knob_number("MINIVLLM_GEMV_NORM_FOLD"));
  if (norm_fold_ > 0 || gemv_norm_fold_ > 0) {  // fixed, so that a captured step never grows them
    CUDA_CHECK(cudaMalloc(&fold_x_, static_cast<size_t>(kFoldMaxTokens * kFoldMaxCols) * 2));
    CUDA_CHECK(cudaMalloc(&fold_parts_, static_cast<size_t>(kFoldMaxCols / 128 * kFoldMaxTokens) * sizeof(float)));
  }
  CUDA_CHECK(cudaMalloc(&fp8_x_codes_, static_cast<size_t>(kGemvMaxTokens * kE4m3RowMaxCols)));
  CUDA_CHECK(cudaMalloc(&fp8_x_scales_, static_cast<size_t>(kGemvMaxTokens) * sizeof(float)));
  if (quant_weights_) {  // the block-quantized gemv's x codes, fixed so that a captured step never grows them
    CUDA_CHECK(cudaMalloc(&quant_x_codes_, static_cast<size_t>(kQuantChunkTokens * kQuantMaxK)));
    CUDA_CHECK(cudaMalloc(&quant_x_scales_, static_cast<size_t>(kQuantChunkTokens * kQuantMaxK / 32) * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&quant_x_sums_, static_cast<size_t>(kQuantChunkTokens * kQuantMaxK / 32) * sizeof(float)));
  }
  decode_max_tile_heads_ = kDefaultDecodeTileHeads;
  if (const std::optional<int64_t> h = knob_int("MINIVLLM_DECODE_TILE_HEADS")) {
    decode_max_tile_heads_ = static_cast<int>(*h);
  }
}

CudaBackend::~CudaBackend() {
  // Teardown ignores errors: a destructor must not throw.
  if (idle_probe_) idle_probe_->report(stream_);
  cudaStreamSynchronize(stream_);
  for (Graph& g : graphs_) {
    if (g.exec != nullptr) cudaGraphExecDestroy(g.exec);
    if (g.graph != nullptr) cudaGraphDestroy(g.graph);
  }
  graphs_.clear();
  // Communicators that outlive their backend: with the graphs gone, NCCL can free them now.
  const std::vector<NcclCommunicator*> comms = std::move(comms_);
  comms_.clear();
  for (NcclCommunicator* c : comms) c->on_backend_destroyed();
  gemm_.reset();
  cudaFree(decode_partial_o_);
  cudaFree(decode_partial_lse_);
  cudaFree(quant_x_codes_);
  cudaFree(quant_x_scales_);
  cudaFree(quant_x_sums_);
  cudaFree(fp8_x_codes_);
  cudaFree(fold_x_);
  cudaFree(fold_parts_);
  cudaFree(fp8_x_scales_);
  cudaFree(fp8_block_x_codes_);
  cudaFree(fp8_block_x_scales_);
  cudaFree(quant_w_bf16_);
  cudaFree(decode_counters_);
  if (sample_host_ != nullptr) cudaFreeHost(sample_host_);
  if (sample_device_ != nullptr) cudaFree(sample_device_);
  if (mask_host_ != nullptr) cudaFreeHost(mask_host_);
  if (mask_device_ != nullptr) cudaFree(mask_device_);
  if (mask_copied_ != nullptr) cudaEventDestroy(mask_copied_);
  for (cudaEvent_t e : sample_done_) {
    if (e != nullptr) cudaEventDestroy(e);
  }
  cudaStreamDestroy(stream_);
}

std::string CudaBackend::name() const {
  std::ostringstream s;
  s << "cuda:" << device_ << " (" << device_name_ << ", " << num_sms_ << " SMs)";
  return s.str();
}

Tensor CudaBackend::empty(DType dtype, const std::vector<int64_t>& shape) {
  const int64_t numel = checked_numel(shape);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(stream_, &capture));
  MINIVLLM_CHECK(capture == cudaStreamCaptureStatusNone)
      << "empty: allocation of " << dtype_name(dtype) << " tensor during graph capture (buffers must be preallocated)";
  const size_t bytes = dtype_nbytes(dtype, numel);  // a block-quantized weight: its blocks' bytes
  void* ptr = nullptr;
  CUDA_CHECK(cudaSetDevice(device_));
  const cudaError_t err = cudaMalloc(&ptr, bytes == 0 ? 256 : bytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear the sticky-free error state
    MINIVLLM_FAIL() << "empty: out of device memory allocating " << bytes << " bytes for " << dtype_name(dtype)
                    << " tensor (" << stats_->current.load() << " bytes in use)";
  }
  CUDA_CHECK(err);
  std::shared_ptr<MemoryStats> stats = stats_;
  const size_t cur = stats->current.fetch_add(bytes) + bytes;
  size_t peak = stats->peak.load();
  while (cur > peak && !stats->peak.compare_exchange_weak(peak, cur)) {
  }
  std::shared_ptr<void> owner(ptr, [stats, bytes](void* p) {
    cudaFree(p);  // errors at release are ignored (deleters must not throw)
    stats->current.fetch_sub(bytes);
  });
  return Tensor(ptr, dtype, shape, DeviceKind::kCuda, std::move(owner));
}

void CudaBackend::copy_from_host(const Tensor& dst, const void* src) {
  MINIVLLM_CHECK(dst.device() == DeviceKind::kCuda) << "copy_from_host: dst " << dst.describe() << " is not on the GPU";
  if (dst.nbytes() == 0) return;
  if (idle_probe_) idle_probe_->step_begins(stream_);  // a step's inputs come first
  CUDA_CHECK(cudaMemcpyAsync(dst.data(), src, dst.nbytes(), cudaMemcpyHostToDevice, stream_));
}

void CudaBackend::copy_to_host(void* dst, const Tensor& src) {
  MINIVLLM_CHECK(src.device() == DeviceKind::kCuda) << "copy_to_host: src " << src.describe() << " is not on the GPU";
  if (src.nbytes() == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(dst, src.data(), src.nbytes(), cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::copy(const Tensor& dst, const Tensor& src) {
  MINIVLLM_CHECK_EQ(dst.nbytes(), src.nbytes()) << "copy: dst " << dst.describe() << " src " << src.describe();
  if (dst.nbytes() == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), dst.nbytes(), cudaMemcpyDefault, stream_));
}

void CudaBackend::copy_into_columns(const Tensor& dst, int64_t col_start, const Tensor& src) {
  MINIVLLM_CHECK(dst.device() == DeviceKind::kCuda && src.device() == DeviceKind::kCuda)
      << "copy_into_columns: dst " << dst.describe() << " src " << src.describe() << " must be on the GPU";
  MINIVLLM_CHECK(dst.ndim() == 2 && src.ndim() == 2)
      << "copy_into_columns: dst " << dst.describe() << " src " << src.describe() << " must be 2-D";
  MINIVLLM_CHECK(dst.dtype() == src.dtype())
      << "copy_into_columns: dst " << dst.describe() << " src " << src.describe() << " differ in dtype";
  MINIVLLM_CHECK_EQ(dst.size(0), src.size(0)) << "copy_into_columns: dst " << dst.describe() << " src " << src.describe();
  MINIVLLM_CHECK(col_start >= 0 && col_start + src.size(1) <= dst.size(1))
      << "copy_into_columns: columns [" << col_start << ", " << col_start + src.size(1) << ") outside dst "
      << dst.describe();
  if (src.numel() == 0) return;
  const size_t es = dtype_size(dst.dtype());
  char* d = static_cast<char*>(dst.data()) + static_cast<size_t>(col_start) * es;
  CUDA_CHECK(cudaMemcpy2DAsync(d, static_cast<size_t>(dst.size(1)) * es, src.data(), static_cast<size_t>(src.size(1)) * es,
                               static_cast<size_t>(src.size(1)) * es, static_cast<size_t>(src.size(0)),
                               cudaMemcpyDeviceToDevice, stream_));
}

std::unique_ptr<Communicator> CudaBackend::create_communicator(int rank, int world_size, const std::string& bootstrap) {
  MINIVLLM_CHECK(world_size >= 1 && rank >= 0 && rank < world_size)
      << "create_communicator: rank " << rank << " of world_size " << world_size;
  if (world_size == 1) return make_single_rank_communicator(*this);
  return std::make_unique<NcclCommunicator>(*this, rank, world_size, bootstrap);
}

void CudaBackend::attach_communicator(NcclCommunicator* comm) { comms_.push_back(comm); }

void CudaBackend::detach_communicator(NcclCommunicator* comm) {
  comms_.erase(std::remove(comms_.begin(), comms_.end(), comm), comms_.end());
}

void CudaBackend::fill_bytes(const Tensor& dst, uint8_t value) {
  MINIVLLM_CHECK(dst.device() == DeviceKind::kCuda) << "fill_bytes: dst " << dst.describe() << " is not on the GPU";
  if (dst.nbytes() == 0) return;
  CUDA_CHECK(cudaMemsetAsync(dst.data(), value, dst.nbytes(), stream_));
}

void CudaBackend::fill_hashed_uniform(const Tensor& dst, const HashedUniform& h, int64_t base, int64_t row_stride) {
  MINIVLLM_CHECK(dst.device() == DeviceKind::kCuda && (dst.dtype() == DType::kF32 || dst.dtype() == DType::kBF16) &&
                 dst.ndim() <= 2)
      << "fill_hashed_uniform: dst " << dst.describe() << " must be a GPU f32 or bf16 [rows, cols] or [n]";
  const int64_t rows = dst.ndim() == 2 ? dst.size(0) : 1, cols = dst.numel() / std::max<int64_t>(rows, 1);
  launch_fill_hashed_uniform(dst.data(), dst.dtype() == DType::kBF16, rows, cols, h, base, row_stride, stream_);
}

void CudaBackend::fill_hashed_e4m3(const Tensor& dst, const HashedUniform& h, float scale, int64_t base,
                                   int64_t row_stride) {
  MINIVLLM_CHECK(dst.device() == DeviceKind::kCuda && dst.dtype() == DType::kF8E4M3 && dst.ndim() == 2 && scale > 0.0f)
      << "fill_hashed_e4m3: dst " << dst.describe() << " must be a GPU FP8 [rows, cols] tensor, scale " << scale
      << " positive";
  launch_fill_hashed_e4m3(static_cast<uint8_t*>(dst.data()), dst.size(0), dst.size(1), h, scale, base, row_stride,
                          stream_);
}

// Online FP8 of a weight made on the device (dummy weights): each row quantized over all its
// columns by the same kernel that quantizes the FP8 GEMM's activations; per-row scales.
Tensor CudaBackend::quantize_weight_fp8(const Tensor& w, int64_t col_begin, int64_t col_end) {
  MINIVLLM_CHECK(w.device() == DeviceKind::kCuda && w.ndim() == 2 &&
                 (w.dtype() == DType::kF32 || w.dtype() == DType::kBF16) && col_begin >= 0 && col_begin < col_end &&
                 col_end <= w.size(1))
      << "quantize_weight_fp8: " << w.describe() << " columns [" << col_begin << ", " << col_end
      << ") must be a GPU f32 or bf16 [rows, cols] weight and a column range in it";
  const int64_t rows = w.size(0), cols = w.size(1), out_cols = col_end - col_begin;
  Tensor codes = empty(DType::kF8E4M3, {rows, out_cols});
  Tensor grid = empty(DType::kF32, {rows, 1});
  launch_quantize_e4m3_groups(w.data(), w.dtype() == DType::kF32, rows, cols, cols, col_begin, col_end,
                              static_cast<uint8_t*>(codes.data()), grid.ptr<float>(), stream_);
  synchronize();  // the caller frees w next
  return codes.with_scales(std::make_shared<WeightScales>(WeightScales{grid, 1, out_cols, Tensor()}));
}

// Block-scaled FP8 weights (Qwen3-*-FP8's 128 x 128) have cuBLASLt's FP8 GEMM only as W8A8
// (Fp8Gemm::run_blocks, from MINIVLLM_FP8_BLOCK_CUBLAS tokens); the weights it takes need no copy.
// For the others (the knob off, or K not of 512s) each call past the gemv's batches would decode
// the weight to bf16 first, a write and a read of twice its bytes per call. A bf16 copy made once
// at load replaces that, while the GPU's free memory stays above MINIVLLM_FP8_BLOCK_BF16_FREE_PCT
// of its total (the KV cache is sized after the weights, from what is left); the gemv still reads
// the codes. Per-row scales need no copy.
Tensor CudaBackend::decoded_fp8_copy(const Tensor& w) {
  MINIVLLM_CHECK(w.device() == DeviceKind::kCuda && w.dtype() == DType::kF8E4M3 && w.ndim() == 2 && w.scales())
      << "decoded_fp8_copy: " << w.describe() << " must be a GPU FP8 weight with its scale grid";
  const int64_t n = w.size(0), k = w.size(1);
  if (fp8_gemm_takes(*w.scales(), n, k) || k % 8 != 0 || n % 8 != 0) return Tensor();
  // fp8_block_gemm's x scratch, at load (outside any capture): two terms of up to 256 tokens.
  if (fp8_block_gemm_ != Fp8BlockGemm::kOff && decode_gemm_) {
    grow_device_scratch(&fp8_block_x_codes_, &fp8_block_x_codes_bytes_,
                        static_cast<size_t>(2 * kDecodeGemmMaxTokens * k), stream_, "FP8 block GEMM",
                        "activation codes");
    grow_device_scratch(&fp8_block_x_scales_, &fp8_block_x_scales_bytes_, kDecodeGemmMaxTokens * sizeof(float), stream_,
                        "FP8 block GEMM", "activation scales");
  }
  if (fp8_gemm_->takes_blocks(w)) return Tensor();  // (after the scratch: fp8_block_gemm still takes w below the knob)
  const int64_t bytes = n * k * 2;
  size_t free_b = 0, total_b = 0;
  memory_info(&free_b, &total_b);
  const double keep = static_cast<double>(knob_number("MINIVLLM_FP8_BLOCK_BF16_FREE_PCT")) / 100.0;
  if (static_cast<double>(free_b) - static_cast<double>(bytes) < keep * static_cast<double>(total_b)) return Tensor();
  Tensor out = empty(DType::kBF16, {n, k});
  launch_dequantize_fp8(fp8_weight_view(w), n, k, out.data(), stream_);
  synchronize();
  return out;
}

void CudaBackend::synchronize() { CUDA_CHECK(cudaStreamSynchronize(stream_)); }

void CudaBackend::memory_info(size_t* free_bytes, size_t* total_bytes) {
  CUDA_CHECK(cudaSetDevice(device_));
  CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
}

void CudaBackend::check_attention_shape(int num_q_heads, int num_kv_heads, int head_dim) const {
  MINIVLLM_CHECK(num_q_heads > 0 && attention_shape_supported(num_q_heads, num_kv_heads, head_dim))
      << "cuda backend: the model's " << describe_unsupported_attention(num_q_heads, num_kv_heads, head_dim);
}

// The rope kernels (rope_kvcache.cu, the gemv's rope epilogue) rotate the first rotary_dim dims of
// each head in pairs (i, i + rotary_dim / 2) and pass the rest through, as the CPU backend does;
// an odd rotary width (or one wider than the head) has no such pairing.
void CudaBackend::check_rotary_dim(int head_dim, int rotary_dim) const {
  MINIVLLM_CHECK(rope_rotary_dim_supported(head_dim, rotary_dim))
      << "cuda backend: unsupported partial_rotary_factor: the model rotates " << rotary_dim << " of head_dim "
      << head_dim << " dims; the CUDA rope kernels take an even number of rotary dims, 2 to head_dim";
}

Tensor CudaBackend::stored_layout(const Tensor& host) const {
  if (host.dtype() != DType::kQ6_K || host.ndim() != 2 || !q6_k_planar(host.size(1))) return host;
  Tensor planar = host_tensor(DType::kQ6_K, host.shape());
  pack_q6_k_planar(host.data(), planar.data(), host.size(0), host.size(1));
  return planar;
}

bool CudaBackend::supports_kv_cache_dtype(DType dtype) const {
  return dtype == DType::kBF16 || dtype == DType::kF8E4M3;
}

std::string CudaBackend::supported_kv_cache_dtypes() const { return "auto (bf16), bf16, fp8 (e4m3)"; }

KVCache CudaBackend::allocate_kv_cache(int num_blocks, int block_size, int num_kv_heads, int head_dim, DType dtype) {
  MINIVLLM_CHECK(num_blocks > 0 && num_kv_heads > 0) << "allocate_kv_cache: blocks " << num_blocks << " kv_heads "
                                                     << num_kv_heads;
  MINIVLLM_CHECK(supports_kv_cache_dtype(dtype))
      << "cuda backend: a KV cache of " << dtype_name(dtype) << " is not supported; supported: "
      << supported_kv_cache_dtypes();
  // The attention kernels find a key's block and offset by shift and mask.
  MINIVLLM_CHECK(block_size > 0 && (block_size & (block_size - 1)) == 0)
      << "cuda backend: block_size " << block_size
      << " not supported; the CUDA kernels take a power of two (16, 32, 64, 128, 256, ...)";
  MINIVLLM_CHECK(attention_head_dim_supported(head_dim))
      << "allocate_kv_cache: head_dim " << head_dim << " not supported by the CUDA kernels; "
      << supported_attention_shapes();
  KVCache c;
  c.k = empty(dtype, {num_blocks, num_kv_heads, block_size, head_dim});
  c.v = empty(dtype, {num_blocks, num_kv_heads, block_size, head_dim});
  c.num_blocks = num_blocks;
  c.block_size = block_size;
  c.num_kv_heads = num_kv_heads;
  c.head_dim = head_dim;
  if (dtype == DType::kF8E4M3) {  // one f32 scale per cache row (block, kv head, offset)
    c.k_scale = empty(DType::kF32, {num_blocks, num_kv_heads, block_size});
    c.v_scale = empty(DType::kF32, {num_blocks, num_kv_heads, block_size});
  }
  return c;
}

// ---- graphs ----

int CudaBackend::capture_graph(const std::function<void()>& body) {
  CUDA_CHECK(cudaSetDevice(device_));
  // Thread-local mode: other threads' unsafe calls (e.g. a cudaMalloc elsewhere) stay legal.
  CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  Graph g;
  capture_comms_.clear();
  try {
    body();
  } catch (...) {
    cudaStreamEndCapture(stream_, &g.graph);  // leave the stream usable
    if (g.graph != nullptr) cudaGraphDestroy(g.graph);
    cudaGetLastError();
    capture_comms_.clear();
    throw;
  }
  g.comms = std::move(capture_comms_);
  capture_comms_.clear();
  try {
    CUDA_CHECK(cudaStreamEndCapture(stream_, &g.graph));
    CUDA_CHECK(cudaGraphInstantiate(&g.exec, g.graph, 0));
  } catch (...) {
    if (g.graph != nullptr) cudaGraphDestroy(g.graph);  // it may hold collectives: NCCL waits for it
    throw;
  }
  graphs_.push_back(std::move(g));
  return static_cast<int>(graphs_.size()) - 1;
}

void CudaBackend::replay_graph(int handle) {
  MINIVLLM_CHECK(handle >= 0 && handle < static_cast<int>(graphs_.size()))
      << "replay_graph: unknown handle " << handle << " (" << graphs_.size() << " graphs)";
  const Graph& g = graphs_[handle];
  MINIVLLM_CHECK(!g.dropped) << "replay_graph: graph " << handle << " was destroyed with its communicator";
  for (const auto& aborted : g.comms) {
    MINIVLLM_CHECK(!aborted->load()) << "replay_graph: graph " << handle
                                     << " holds collectives of a communicator that was aborted";
  }
  CUDA_CHECK(cudaGraphLaunch(g.exec, stream_));
}

void CudaBackend::note_captured_collective(const std::shared_ptr<std::atomic<bool>>& comm_aborted) {
  for (const auto& c : capture_comms_) {
    if (c == comm_aborted) return;
  }
  capture_comms_.push_back(comm_aborted);
}

void CudaBackend::drop_graphs_of(const std::atomic<bool>* comm_aborted) {
  for (Graph& g : graphs_) {
    bool holds = false;
    for (const auto& c : g.comms) holds = holds || c.get() == comm_aborted;
    if (!holds || g.dropped) continue;
    if (g.exec != nullptr) cudaGraphExecDestroy(g.exec);
    if (g.graph != nullptr) cudaGraphDestroy(g.graph);
    g.exec = nullptr;
    g.graph = nullptr;
    g.dropped = true;
  }
  cudaGetLastError();
}

// ---- sampling ----

// Sized for the whole tokens buffer (its rows, up to 2^20) at the first call: growing the buffers
// later would have to wait for a sampling still in flight (async scheduling keeps one).
void CudaBackend::ensure_sample_buffers(int rows, const Tensor& tokens) {
  ensure_sample_buffers(std::max<int>(rows, static_cast<int>(std::min<int64_t>(tokens.numel(), 1 << 20))));
}

void CudaBackend::ensure_sample_buffers(int rows) {
  if (sample_done_[0] == nullptr) {
    for (cudaEvent_t& e : sample_done_) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  if (rows <= sample_capacity_) return;
  MINIVLLM_CHECK_EQ(samples_issued_, samples_taken_) << "sample buffers grown while a sampling is outstanding";
  if (sample_host_ != nullptr) CUDA_CHECK(cudaFreeHost(sample_host_));
  if (sample_device_ != nullptr) CUDA_CHECK(cudaFree(sample_device_));
  sample_host_ = nullptr;
  sample_device_ = nullptr;
  const size_t bytes = static_cast<size_t>(rows) * 6 * 4;
  CUDA_CHECK(cudaMallocHost(&sample_host_, 2 * bytes));
  CUDA_CHECK(cudaMalloc(&sample_device_, bytes + static_cast<size_t>(rows) * kGreedyScratchBytesPerRow));
  sample_capacity_ = rows;
}

void CudaBackend::sample_async(const Tensor& logits, const SamplingBatch& batch, const Tensor& tokens) {
  MINIVLLM_CHECK(logits.device() == DeviceKind::kCuda && logits.dtype() == DType::kF32 && logits.ndim() == 2)
      << "sample: logits " << logits.describe() << " must be f32[S, V] on the GPU";
  const int rows = batch.size();
  const int64_t vocab = logits.size(1);
  MINIVLLM_CHECK_EQ(logits.size(0), rows) << "sample: logits " << logits.describe();
  MINIVLLM_CHECK(tokens.device() == DeviceKind::kCuda && tokens.dtype() == DType::kI32 && tokens.numel() >= rows)
      << "sample: tokens " << tokens.describe() << " for " << rows << " rows";
  MINIVLLM_CHECK(batch.top_k.size() == static_cast<size_t>(rows) && batch.top_p.size() == static_cast<size_t>(rows) &&
                 batch.min_p.size() == static_cast<size_t>(rows) && batch.uniform.size() == static_cast<size_t>(rows))
      << "sample: SamplingBatch fields differ in length (temperature has " << rows << ")";
  MINIVLLM_CHECK(vocab > 0 && vocab < (int64_t{1} << 31)) << "sample: vocab " << vocab;
  for (int i = 0; i < rows; ++i) {
    MINIVLLM_CHECK(batch.temperature[i] >= 0.0f && batch.top_p[i] > 0.0f && batch.top_p[i] <= 1.0f &&
                   batch.min_p[i] >= 0.0f && batch.min_p[i] <= 1.0f)
        << "sample: row " << i << " has temperature " << batch.temperature[i] << " top_p " << batch.top_p[i]
        << " min_p " << batch.min_p[i];
  }
  MINIVLLM_CHECK_LT(samples_issued_ - samples_taken_, 2) << "sample: two samplings already outstanding";
  ensure_sample_buffers(rows, tokens);
  const int half = static_cast<int>(samples_issued_ % 2);
  // This half's last user was taken (waited for) before: its host arrays are free to rewrite.
  auto* host = static_cast<uint8_t*>(sample_host_) + static_cast<size_t>(half) * sample_capacity_ * 6 * 4;
  const size_t n = static_cast<size_t>(rows) * 4;
  auto* dev = static_cast<uint8_t*>(sample_device_);
  int32_t* dev_tokens = tokens.ptr<int32_t>();
  const bool greedy = std::all_of(batch.temperature.begin(), batch.temperature.end(), [](float t) { return t == 0.0f; });
  if (rows > 0) {
    if (greedy) {  // no params to upload; the argmax spread over many CTAs (sampler.cu)
      void* scratch = dev + static_cast<size_t>(sample_capacity_) * 6 * 4;
      launch_greedy_sample(logits.ptr<float>(), rows, vocab, scratch, dev_tokens, stream_);
    } else {
      std::memcpy(host, batch.temperature.data(), n);
      std::memcpy(host + n, batch.top_k.data(), n);
      std::memcpy(host + 2 * n, batch.top_p.data(), n);
      std::memcpy(host + 3 * n, batch.min_p.data(), n);
      std::memcpy(host + 4 * n, batch.uniform.data(), n);
      CUDA_CHECK(cudaMemcpyAsync(dev, host, 5 * n, cudaMemcpyHostToDevice, stream_));
      SampleParamsDevice p{reinterpret_cast<const float*>(dev), reinterpret_cast<const int32_t*>(dev + n),
                           reinterpret_cast<const float*>(dev + 2 * n), reinterpret_cast<const float*>(dev + 3 * n),
                           reinterpret_cast<const float*>(dev + 4 * n)};
      launch_sample(logits.ptr<float>(), rows, vocab, p, dev_tokens, stream_);
    }
  }
  queue_sampled(tokens, rows);
}

void CudaBackend::queue_sampled(const Tensor& tokens, int rows) {
  MINIVLLM_CHECK(tokens.device() == DeviceKind::kCuda && tokens.dtype() == DType::kI32 && tokens.numel() >= rows)
      << "queue_sampled: tokens " << tokens.describe() << " for " << rows << " rows";
  MINIVLLM_CHECK_LT(samples_issued_ - samples_taken_, 2) << "queue_sampled: two samplings already outstanding";
  ensure_sample_buffers(rows, tokens);
  const int half = static_cast<int>(samples_issued_ % 2);
  // This half's last user was taken (waited for) before: its host arrays are free to rewrite.
  auto* host = static_cast<uint8_t*>(sample_host_) + static_cast<size_t>(half) * sample_capacity_ * 6 * 4;
  const size_t n = static_cast<size_t>(rows) * 4;
  if (rows > 0) CUDA_CHECK(cudaMemcpyAsync(host + 5 * n, tokens.ptr<int32_t>(), n, cudaMemcpyDeviceToHost, stream_));
  if (idle_probe_) idle_probe_->step_ends(stream_);
  CUDA_CHECK(cudaEventRecord(sample_done_[half], stream_));
  sample_rows_[half] = rows;
  ++samples_issued_;
}

namespace {

void check_shard_inputs(const Tensor& logits, const Tensor& params, int64_t vocab_start, const char* op) {
  MINIVLLM_CHECK(logits.device() == DeviceKind::kCuda && logits.dtype() == DType::kF32 && logits.ndim() == 2 &&
                 params.device() == DeviceKind::kCuda && params.dtype() == DType::kF32 &&
                 params.numel() >= 2 * logits.size(0))
      << op << ": logits " << logits.describe() << " (f32 [S, V] on the GPU), params " << params.describe();
  MINIVLLM_CHECK(vocab_start >= 0 && vocab_start + logits.size(1) < (int64_t{1} << 24))
      << op << ": ids up to " << vocab_start + logits.size(1) << " (ids travel as floats, exact below 2^24)";
}

static_assert(Backend::kShardPieceFloats == kShardPieceFloats, "backend.h sizes what the kernels keep");

void check_shard_pieces(const Tensor& pieces, int64_t rows, const char* op) {
  MINIVLLM_CHECK(pieces.device() == DeviceKind::kCuda && pieces.dtype() == DType::kF32 &&
                 pieces.numel() >= Backend::kShardPieceFloats * rows)
      << op << ": pieces " << pieces.describe() << " for " << rows << " rows (f32 [rows * "
      << Backend::kShardPieceFloats << "] on the GPU)";
}

}  // namespace

void CudaBackend::shard_sample_stats(const Tensor& logits, const Tensor& params, int64_t vocab_start,
                                     const Tensor& stats, const Tensor& pieces) {
  check_shard_inputs(logits, params, vocab_start, "shard_sample_stats");
  const int64_t rows = logits.size(0);
  MINIVLLM_CHECK(stats.device() == DeviceKind::kCuda && stats.dtype() == DType::kF32 && stats.numel() >= 4 * rows)
      << "shard_sample_stats: stats " << stats.describe() << " for " << rows << " rows";
  check_shard_pieces(pieces, rows, "shard_sample_stats");
  launch_shard_sample_stats(logits.ptr<float>(), rows, logits.size(1), params.ptr<float>(), vocab_start,
                            stats.ptr<float>(), pieces.ptr<float>(), stream_);
}

void CudaBackend::shard_sample_pick(const Tensor& logits, const Tensor& params, int64_t vocab_start, int rank,
                                    const Tensor& all_stats, const Tensor& pieces, const Tensor& picks) {
  check_shard_inputs(logits, params, vocab_start, "shard_sample_pick");
  const int64_t rows = logits.size(0);
  MINIVLLM_CHECK(all_stats.device() == DeviceKind::kCuda && all_stats.dtype() == DType::kF32 &&
                 picks.device() == DeviceKind::kCuda && picks.dtype() == DType::kI32 && picks.numel() >= rows &&
                 (rows == 0 || all_stats.numel() % (4 * rows) == 0))
      << "shard_sample_pick: all_stats " << all_stats.describe() << " picks " << picks.describe() << " for " << rows
      << " rows";
  if (rows == 0) return;
  const int world = static_cast<int>(all_stats.numel() / (4 * rows));
  MINIVLLM_CHECK(rank >= 0 && rank < world) << "shard_sample_pick: rank " << rank << " of " << world;
  check_shard_pieces(pieces, rows, "shard_sample_pick");
  launch_shard_sample_pick(logits.ptr<float>(), rows, logits.size(1), params.ptr<float>(), vocab_start, rank, world,
                           all_stats.ptr<float>(), pieces.ptr<float>(), picks.ptr<int32_t>(), stream_);
}

void CudaBackend::shard_sample_merge(const Tensor& all_picks, int world, const Tensor& tokens) {
  MINIVLLM_CHECK(all_picks.device() == DeviceKind::kCuda && all_picks.dtype() == DType::kI32 &&
                 tokens.device() == DeviceKind::kCuda && tokens.dtype() == DType::kI32 && world >= 1 &&
                 all_picks.numel() % world == 0 && all_picks.numel() / world >= tokens.numel())
      << "shard_sample_merge: all_picks " << all_picks.describe() << " of " << world << " ranks, tokens "
      << tokens.describe();
  launch_shard_sample_merge(all_picks.ptr<int32_t>(), world, all_picks.numel() / world, tokens.numel(),
                            tokens.ptr<int32_t>(), stream_);
}

void CudaBackend::take_sampled(int32_t* out_tokens, int rows) {
  MINIVLLM_CHECK_LT(samples_taken_, samples_issued_) << "take_sampled: nothing was sampled";
  const int half = static_cast<int>(samples_taken_ % 2);
  MINIVLLM_CHECK_EQ(sample_rows_[half], rows) << "take_sampled: rows";
  ++samples_taken_;  // even when the wait fails: the half is given up
  CUDA_CHECK(cudaEventSynchronize(sample_done_[half]));
  const auto* host = static_cast<const uint8_t*>(sample_host_) + static_cast<size_t>(half) * sample_capacity_ * 6 * 4;
  std::memcpy(out_tokens, host + 5 * static_cast<size_t>(rows) * 4, static_cast<size_t>(rows) * 4);
}

void CudaBackend::sample(const Tensor& logits, const SamplingBatch& batch, int32_t* out_tokens) {
  const int rows = batch.size();
  ensure_sample_buffers(std::max(rows, 1));
  // The tokens' device home: the sixth array of the parameter area.
  auto* dev = static_cast<uint8_t*>(sample_device_);
  Tensor tokens(dev + 5 * static_cast<size_t>(sample_capacity_) * 4, DType::kI32, {std::max(rows, 1)},
                DeviceKind::kCuda);
  sample_async(logits, batch, tokens);
  take_sampled(out_tokens, rows);
}

void CudaBackend::resolve_pending_ids(const Tensor& ids, const Tensor& sampled) {
  MINIVLLM_CHECK(ids.device() == DeviceKind::kCuda && ids.dtype() == DType::kI32 && sampled.device() == DeviceKind::kCuda &&
                 sampled.dtype() == DType::kI32)
      << "resolve_pending_ids: ids " << ids.describe() << " sampled " << sampled.describe();
  launch_resolve_pending_ids(ids.ptr<int32_t>(), ids.numel(), sampled.ptr<int32_t>(), sampled.numel(), stream_);
}

}  // namespace minivllm::cuda

namespace minivllm {

std::unique_ptr<Backend> make_cuda_backend(int device_index) {
  return std::make_unique<cuda::CudaBackend>(device_index);
}

int cuda_device_count() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

bool cuda_device_available() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return count > 0;
}

}  // namespace minivllm
