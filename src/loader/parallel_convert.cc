#include "loader/parallel_convert.h"

#include <algorithm>
#include <cstdint>

namespace minivllm {

void convert_to_f32_parallel(const void* src, DType from, float* dst, size_t n) {
  constexpr size_t kChunk = size_t{1} << 16;
  if (n <= kChunk) {
    convert_to_f32(src, from, dst, n);
    return;
  }
  const size_t elem = dtype_size(from);
  const auto* bytes = static_cast<const uint8_t*>(src);
  const int64_t chunks = static_cast<int64_t>((n + kChunk - 1) / kChunk);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const size_t begin = static_cast<size_t>(c) * kChunk;
    const size_t count = std::min(kChunk, n - begin);
    convert_to_f32(bytes + begin * elem, from, dst + begin, count);
  }
}

}  // namespace minivllm
