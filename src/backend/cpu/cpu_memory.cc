// Host memory for CpuBackend: 64-byte aligned allocations, counted (current and peak) so the
// runtime can measure what a warm-up pass used; copies are memcpy, the host is the device.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "backend/cpu/cpu_backend.h"
#include "common/check.h"

namespace minivllm {

void CpuMemoryStats::add(size_t bytes) {
  size_t now = current.fetch_add(bytes) + bytes;
  size_t seen = peak.load();
  while (now > seen && !peak.compare_exchange_weak(seen, now)) {
  }
}

Tensor CpuBackend::empty(DType dtype, const std::vector<int64_t>& shape) {
  const int64_t n = checked_numel(shape);
  // Rounded up to whole cache lines (and at least one) so vector loads past the end stay inside.
  size_t bytes = (dtype_nbytes(dtype, n) + 63) / 64 * 64 + 64;
  void* data = std::aligned_alloc(64, bytes);
  MINIVLLM_CHECK(data != nullptr) << "empty: out of host memory allocating " << bytes << " bytes";
  stats_->add(bytes);
  std::shared_ptr<CpuMemoryStats> stats = stats_;
  std::shared_ptr<void> owner(data, [stats, bytes](void* p) {
    std::free(p);
    stats->sub(bytes);
  });
  return Tensor(data, dtype, shape, DeviceKind::kCpu, std::move(owner));
}

void CpuBackend::copy_from_host(const Tensor& dst, const void* src) {
  MINIVLLM_CHECK(dst.device() == DeviceKind::kCpu) << "copy_from_host: dst " << dst.describe();
  if (dst.nbytes() > 0) std::memcpy(dst.data(), src, dst.nbytes());
}

void CpuBackend::copy_to_host(void* dst, const Tensor& src) {
  MINIVLLM_CHECK(src.device() == DeviceKind::kCpu) << "copy_to_host: src " << src.describe();
  if (src.nbytes() > 0) std::memcpy(dst, src.data(), src.nbytes());
}

void CpuBackend::copy(const Tensor& dst, const Tensor& src) {
  MINIVLLM_CHECK(dst.device() == DeviceKind::kCpu && src.device() == DeviceKind::kCpu)
      << "copy: " << src.describe() << " -> " << dst.describe();
  MINIVLLM_CHECK_EQ(dst.nbytes(), src.nbytes()) << "copy: " << src.describe() << " -> " << dst.describe();
  if (dst.nbytes() > 0 && dst.data() != src.data()) std::memmove(dst.data(), src.data(), dst.nbytes());
}

void CpuBackend::fill_bytes(const Tensor& dst, uint8_t value) {
  MINIVLLM_CHECK(dst.device() == DeviceKind::kCpu) << "fill_bytes: dst " << dst.describe();
  if (dst.nbytes() > 0) std::memset(dst.data(), value, dst.nbytes());
}

void CpuBackend::fill_hashed_uniform(const Tensor& dst, const HashedUniform& h, int64_t base, int64_t row_stride) {
  MINIVLLM_CHECK(dst.device() == DeviceKind::kCpu && dst.dtype() == DType::kF32 && dst.ndim() <= 2)
      << "fill_hashed_uniform: dst " << dst.describe() << " must be a host f32 [rows, cols] or [n]";
  const int64_t rows = dst.ndim() == 2 ? dst.size(0) : 1, cols = dst.numel() / std::max<int64_t>(rows, 1);
  float* out = dst.ptr<float>();
#pragma omp parallel for num_threads(num_threads_) schedule(static) if (dst.numel() >= (1 << 16))
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      out[r * cols + c] = hashed_uniform_value(h, static_cast<uint64_t>(base + r * row_stride + c));
    }
  }
}

void CpuBackend::memory_info(size_t* free_bytes, size_t* total_bytes) {
  std::ifstream in("/proc/meminfo");
  MINIVLLM_CHECK(in.good()) << "memory_info: cannot read /proc/meminfo";
  size_t total_kb = 0, available_kb = 0;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    size_t kb = 0;
    fields >> key >> kb;
    if (key == "MemTotal:") total_kb = kb;
    if (key == "MemAvailable:") available_kb = kb;
  }
  MINIVLLM_CHECK(total_kb > 0) << "memory_info: no MemTotal in /proc/meminfo";
  *total_bytes = total_kb * 1024;
  *free_bytes = available_kb * 1024;
}

}  // namespace minivllm
