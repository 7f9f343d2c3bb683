// Tensor parallelism on the CPU backend: the communicator factory and copy_into_columns (a rank's
// slice of the logits into the full rows after the gather).
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/shm_communicator.h"
#include "common/check.h"

namespace minivllm {

std::unique_ptr<Communicator> CpuBackend::create_communicator(int rank, int world_size, const std::string& bootstrap) {
  MINIVLLM_CHECK(world_size >= 1 && rank >= 0 && rank < world_size)
      << "create_communicator: rank " << rank << " of world " << world_size;
  if (world_size == 1) return make_single_rank_communicator(*this);
  return std::make_unique<ShmCommunicator>(rank, world_size, bootstrap, num_threads_);
}

void CpuBackend::copy_into_columns(const Tensor& dst, int64_t col_start, const Tensor& src) {
  MINIVLLM_CHECK(dst.defined() && src.defined()) << "copy_into_columns: undefined tensor";
  MINIVLLM_CHECK(dst.device() == DeviceKind::kCpu && src.device() == DeviceKind::kCpu)
      << "copy_into_columns: " << src.describe() << " -> " << dst.describe() << " not on the host";
  MINIVLLM_CHECK(dst.dtype() == src.dtype())
      << "copy_into_columns: src " << src.describe() << " and dst " << dst.describe() << " differ in dtype";
  const int64_t cols = dst.size(-1);
  const int64_t width = src.size(-1);
  const int64_t rows = cols == 0 ? 0 : dst.numel() / cols;
  const int64_t src_rows = width == 0 ? 0 : src.numel() / width;
  MINIVLLM_CHECK(col_start >= 0 && col_start + width <= cols)
      << "copy_into_columns: columns [" << col_start << ", " << col_start + width << ") of dst " << dst.describe();
  MINIVLLM_CHECK(width == 0 || cols == 0 || rows == src_rows)
      << "copy_into_columns: src " << src.describe() << " and dst " << dst.describe() << " differ in rows";
  if (rows == 0 || width == 0) return;
  const size_t esize = dtype_size(dst.dtype());
  const size_t row_bytes = static_cast<size_t>(width) * esize;
  char* d = static_cast<char*>(dst.data()) + static_cast<size_t>(col_start) * esize;
  const char* s = static_cast<const char*>(src.data());
  const size_t dst_stride = static_cast<size_t>(cols) * esize;
#pragma omp parallel for num_threads(num_threads_) if (rows >= 4 && rows * width * esize >= (1 << 20)) schedule(static)
  for (int64_t r = 0; r < rows; ++r) std::memcpy(d + r * dst_stride, s + r * row_bytes, row_bytes);
}

}  // namespace minivllm
