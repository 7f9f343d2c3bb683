#include "loader/tensor_slice.h"

#include <cstdint>
#include <cstring>
#include <sstream>

#include "common/check.h"
#include "loader/safetensors.h"

namespace minivllm {

std::string slice_string(int dim, int64_t start, int64_t length) {
  std::ostringstream os;
  const bool overflow = (length > 0 && start > INT64_MAX - length) || (length < 0 && start < INT64_MIN - length);
  os << "[" << start << ", ";
  if (overflow) os << start << " + " << length;
  else os << start + length;
  os << ") along dim " << dim;
  return os.str();
}

SliceGeometry check_slice(const std::string& what, const std::vector<int64_t>& stored_shape,
                          const std::vector<int64_t>& full_shape, int dim, int64_t start, int64_t length) {
  const std::string slice = slice_string(dim, start, length);
  MINIVLLM_CHECK(full_shape == stored_shape)
      << what << ": slice " << slice << " of expected shape " << shape_string(full_shape) << " but the file has "
      << shape_string(stored_shape);
  const int ndim = static_cast<int>(stored_shape.size());
  MINIVLLM_CHECK((dim == 0 || dim == 1) && dim < ndim)
      << what << ": slice " << slice << " of shape " << shape_string(stored_shape)
      << ": dim must be 0 (rows) or 1 (columns) and below the tensor's rank " << ndim;
  const int64_t size = stored_shape[static_cast<size_t>(dim)];
  MINIVLLM_CHECK(start >= 0 && length >= 1 && start <= size && length <= size - start)
      << what << ": slice " << slice << " of shape " << shape_string(stored_shape) << " is out of range (dim " << dim
      << " has " << size << " elements; need 0 <= start, length >= 1, start + length <= " << size << ")";
  SliceGeometry g;
  g.dim = dim;
  g.start = start;
  g.length = length;
  g.dim_size = size;
  // A tensor with a zero dim (elsewhere: `length` >= 1 rules out `dim`) has an empty slice: no
  // chunks at all. Its other dims were never bounded by the file's size (their product with 0 is
  // 0), so their products could overflow, and looping over `outer` empty chunks could run for
  // hours (a fuzzed GGUF: 0 x 1,179,648 x 2,336,462,209,024).
  bool empty = false;
  for (int64_t d : stored_shape) empty = empty || d == 0;
  if (empty) {
    g.outer = 0;
    g.inner = 0;
  } else {
    for (int i = 0; i < dim; ++i) g.outer *= stored_shape[static_cast<size_t>(i)];
    for (int i = dim + 1; i < ndim; ++i) g.inner *= stored_shape[static_cast<size_t>(i)];
  }
  g.out_shape = stored_shape;
  g.out_shape[static_cast<size_t>(dim)] = length;
  return g;
}

void convert_slice_chunks(const SliceGeometry& g, float* out,
                          const std::function<void(int64_t first, int64_t count, float* dst)>& convert) {
  const int64_t n = g.chunk_elems();
  if (g.outer == 1) {  // one contiguous run (a row slice): the converter parallelises it itself
    convert(g.chunk_begin(0), n, out);
    return;
  }
  // Many short runs (a column slice): one per row, spread over the cores when worth it. Converters
  // called from inside run serially (nested OpenMP regions are inactive).
#pragma omp parallel for schedule(static) if (g.outer * n > (int64_t{1} << 16))
  for (int64_t o = 0; o < g.outer; ++o) convert(g.chunk_begin(o), n, out + o * n);
}

void copy_slice_chunks(const SliceGeometry& g, DType dtype, const uint8_t* base, void* out) {
  const size_t chunk = dtype_nbytes(dtype, g.chunk_elems());
  auto* dst = static_cast<uint8_t*>(out);
  for (int64_t o = 0; o < g.outer; ++o) {
    std::memcpy(dst + static_cast<size_t>(o) * chunk, base + dtype_nbytes(dtype, g.chunk_begin(o)), chunk);
  }
}

}  // namespace minivllm
