// CudaBackend's penalties, logit biases and logprobs: small host arrays staged into one growing device scratch,
// then the kernels of logits_ops.cu on the backend's stream; the token bitmask through pinned memory
// into its own buffer, without waiting. Called after the forward (and its graph) on rank 0, only
// for batches that ask.
#include <cstring>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/logits_kernels.h"
#include "backend/logits_ops_checks.h"

namespace minivllm::cuda {
namespace {

size_t align_up(size_t n) { return (n + 255) & ~size_t{255}; }

}  // namespace

void CudaBackend::ScratchDeleter::operator()(void* p) const {
  if (p != nullptr) cudaFree(p);
}

uint8_t* CudaBackend::logits_scratch(size_t bytes) {
  if (bytes > logits_scratch_bytes_) {
    CUDA_CHECK(cudaStreamSynchronize(stream_));  // the old buffer may still be read
    logits_scratch_.reset();
    void* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, bytes));
    logits_scratch_.reset(p);
    logits_scratch_bytes_ = bytes;
  }
  return static_cast<uint8_t*>(logits_scratch_.get());
}

void CudaBackend::update_token_counts(const Tensor& counts, const TokenCountUpdate& u) {
  check_token_count_update(counts, u);
  MINIVLLM_CHECK(counts.device() == DeviceKind::kCuda) << "update_token_counts: counts " << counts.describe();
  if (u.empty()) return;
  const size_t nr = u.reset_slots.size(), n = u.slots.size();
  const size_t off_slots = align_up(nr * 4), off_tokens = off_slots + align_up(n * 4),
               off_prompt = off_tokens + align_up(n * 4);
  uint8_t* dev = logits_scratch(off_prompt + align_up(n));
  // Pageable sources: each copy returns once its bytes are staged, so the vectors may go.
  if (nr > 0) CUDA_CHECK(cudaMemcpyAsync(dev, u.reset_slots.data(), nr * 4, cudaMemcpyHostToDevice, stream_));
  if (n > 0) {
    CUDA_CHECK(cudaMemcpyAsync(dev + off_slots, u.slots.data(), n * 4, cudaMemcpyHostToDevice, stream_));
    CUDA_CHECK(cudaMemcpyAsync(dev + off_tokens, u.tokens.data(), n * 4, cudaMemcpyHostToDevice, stream_));
    CUDA_CHECK(cudaMemcpyAsync(dev + off_prompt, u.in_prompt.data(), n, cudaMemcpyHostToDevice, stream_));
  }
  const int64_t vocab = counts.size(1);
  launch_reset_token_counts(counts.ptr<int32_t>(), vocab, reinterpret_cast<const int32_t*>(dev),
                            static_cast<int>(nr), stream_);
  launch_count_tokens(counts.ptr<int32_t>(), vocab, reinterpret_cast<const int32_t*>(dev + off_slots),
                      reinterpret_cast<const int32_t*>(dev + off_tokens), dev + off_prompt, static_cast<int>(n),
                      stream_);
  CUDA_CHECK(cudaStreamSynchronize(stream_));  // the scratch is reused by the next call
}

void CudaBackend::apply_penalties(const Tensor& logits, const Tensor& counts, const std::vector<int32_t>& slots,
                                  const SamplingBatch& b) {
  check_penalty_args(logits, counts, slots, b);
  MINIVLLM_CHECK(logits.device() == DeviceKind::kCuda && counts.device() == DeviceKind::kCuda)
      << "apply_penalties: logits " << logits.describe() << ", counts " << counts.describe();
  const size_t rows = slots.size();
  if (rows == 0) return;
  const size_t a = align_up(rows * 4);
  uint8_t* dev = logits_scratch(4 * a);
  CUDA_CHECK(cudaMemcpyAsync(dev, slots.data(), rows * 4, cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK(cudaMemcpyAsync(dev + a, b.presence_penalty.data(), rows * 4, cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK(cudaMemcpyAsync(dev + 2 * a, b.frequency_penalty.data(), rows * 4, cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK(cudaMemcpyAsync(dev + 3 * a, b.repetition_penalty.data(), rows * 4, cudaMemcpyHostToDevice, stream_));
  launch_apply_penalties(logits.ptr<float>(), static_cast<int64_t>(rows), logits.size(1), counts.ptr<int32_t>(),
                         reinterpret_cast<const int32_t*>(dev), reinterpret_cast<const float*>(dev + a),
                         reinterpret_cast<const float*>(dev + 2 * a), reinterpret_cast<const float*>(dev + 3 * a),
                         stream_);
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::apply_logit_bias(const Tensor& logits, const SamplingBatch& b) {
  check_logit_bias_args(logits, b);
  MINIVLLM_CHECK(logits.device() == DeviceKind::kCuda) << "apply_logit_bias: logits " << logits.describe();
  const size_t rows = static_cast<size_t>(logits.size(0)), n = b.bias_ids.size();
  if (rows == 0 || n == 0) return;
  const size_t off_ids = align_up((rows + 1) * 4), off_values = off_ids + align_up(n * 4);
  uint8_t* dev = logits_scratch(off_values + align_up(n * 4));
  CUDA_CHECK(cudaMemcpyAsync(dev, b.bias_offsets.data(), (rows + 1) * 4, cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK(cudaMemcpyAsync(dev + off_ids, b.bias_ids.data(), n * 4, cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK(cudaMemcpyAsync(dev + off_values, b.bias_values.data(), n * 4, cudaMemcpyHostToDevice, stream_));
  launch_apply_logit_bias(logits.ptr<float>(), static_cast<int64_t>(rows), logits.size(1),
                          reinterpret_cast<const int32_t*>(dev), reinterpret_cast<const int32_t*>(dev + off_ids),
                          reinterpret_cast<const float*>(dev + off_values), stream_);
  CUDA_CHECK(cudaStreamSynchronize(stream_));  // the scratch is reused by the next call
}

void CudaBackend::apply_token_bitmask(const Tensor& logits, const SamplingBatch& b) {
  check_token_bitmask_args(logits, b);
  MINIVLLM_CHECK(logits.device() == DeviceKind::kCuda) << "apply_token_bitmask: logits " << logits.describe();
  const size_t rows = static_cast<size_t>(logits.size(0)), bytes = b.bitmask.size() * 4;
  if (rows == 0) return;
  // No stream synchronisation: a pageable copy or the shared scratch's would make the host wait
  // for the forward in flight, which is what the masks are filled beside.
  if (mask_copied_ == nullptr) CUDA_CHECK(cudaEventCreateWithFlags(&mask_copied_, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventSynchronize(mask_copied_));  // the last mask left the staging buffer (long since)
  if (bytes > mask_bytes_) {
    CUDA_CHECK(cudaStreamSynchronize(stream_));  // the old device buffer may still be read
    if (mask_host_ != nullptr) CUDA_CHECK(cudaFreeHost(mask_host_));
    if (mask_device_ != nullptr) CUDA_CHECK(cudaFree(mask_device_));
    mask_host_ = mask_device_ = nullptr;
    mask_bytes_ = 0;
    CUDA_CHECK(cudaMallocHost(&mask_host_, bytes));
    CUDA_CHECK(cudaMalloc(&mask_device_, bytes));
    mask_bytes_ = bytes;
  }
  std::memcpy(mask_host_, b.bitmask.data(), bytes);
  CUDA_CHECK(cudaMemcpyAsync(mask_device_, mask_host_, bytes, cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK(cudaEventRecord(mask_copied_, stream_));
  // The device buffer is rewritten only by a later copy on this stream, after this kernel.
  launch_apply_token_bitmask(logits.ptr<float>(), static_cast<int64_t>(rows), logits.size(1),
                             static_cast<const int32_t*>(mask_device_), b.bitmask_words, stream_);
}

void CudaBackend::compute_logprobs(const Tensor& logits, const int32_t* tokens, int k, float* chosen,
                                   int32_t* top_ids, float* top_logprobs) {
  check_logprobs_args(logits, tokens, k);
  MINIVLLM_CHECK(logits.device() == DeviceKind::kCuda) << "compute_logprobs: logits " << logits.describe();
  MINIVLLM_CHECK(k <= kMaxTopLogprobs) << "compute_logprobs: k " << k << " > " << kMaxTopLogprobs;
  const size_t rows = static_cast<size_t>(logits.size(0));
  if (rows == 0) return;
  const size_t top = rows * static_cast<size_t>(k) * 4;
  const size_t off_chosen = align_up(rows * 4), off_ids = off_chosen + align_up(rows * 4),
               off_lp = off_ids + align_up(top);
  uint8_t* dev = logits_scratch(off_lp + align_up(top));
  CUDA_CHECK(cudaMemcpyAsync(dev, tokens, rows * 4, cudaMemcpyHostToDevice, stream_));
  launch_logprobs(logits.ptr<float>(), static_cast<int64_t>(rows), logits.size(1),
                  reinterpret_cast<const int32_t*>(dev), k, reinterpret_cast<float*>(dev + off_chosen),
                  reinterpret_cast<int32_t*>(dev + off_ids), reinterpret_cast<float*>(dev + off_lp), stream_);
  CUDA_CHECK(cudaMemcpyAsync(chosen, dev + off_chosen, rows * 4, cudaMemcpyDeviceToHost, stream_));
  if (top > 0) {
    CUDA_CHECK(cudaMemcpyAsync(top_ids, dev + off_ids, top, cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaMemcpyAsync(top_logprobs, dev + off_lp, top, cudaMemcpyDeviceToHost, stream_));
  }
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

}  // namespace minivllm::cuda
