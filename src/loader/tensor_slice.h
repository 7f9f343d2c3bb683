// The checks and geometry that the WeightSources' get_f32_slice share: a slice [start, start +
// length) along one dim of a row-major tensor is `outer` contiguous chunks of `length * inner`
// elements, converted chunk by chunk straight from the mapped bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/dtype.h"

namespace minivllm {

struct SliceGeometry {
  int dim = 0;
  int64_t start = 0;
  int64_t length = 0;
  int64_t outer = 1;     // product of the dims before `dim` (0, as inner, for a tensor with a zero dim)
  int64_t dim_size = 0;  // the full size of `dim`
  int64_t inner = 1;     // product of the dims after `dim`
  std::vector<int64_t> out_shape;  // the full shape with `dim` cut to `length`

  int64_t chunk_elems() const { return length * inner; }
  // First element (in the full tensor) of chunk o < outer.
  int64_t chunk_begin(int64_t o) const { return (o * dim_size + start) * inner; }
};

// "[4, 8) along dim 1" for messages.
std::string slice_string(int dim, int64_t start, int64_t length);

// Checks a slice request against the stored tensor and returns its geometry. `what` names the
// tensor and its file ("tensor 'x' in /path"); every error starts with it and names the slice and
// the shape. full_shape must equal stored_shape; dim must be 0 or 1 and below the rank; start >= 0,
// length >= 1, start + length <= size(dim).
SliceGeometry check_slice(const std::string& what, const std::vector<int64_t>& stored_shape,
                          const std::vector<int64_t>& full_shape, int dim, int64_t start, int64_t length);

// Calls convert(first_element, count, dst) for every chunk of the slice, dst advancing through
// `out` (g.outer * g.chunk_elems() floats); chunks run in parallel when there are many.
void convert_slice_chunks(const SliceGeometry& g, float* out,
                          const std::function<void(int64_t first, int64_t count, float* dst)>& convert);

// Copies the slice's chunks of a tensor stored as `dtype` at `base` into `out` unchanged (the
// stored-format path: whole quantisation blocks, which the caller has checked).
void copy_slice_chunks(const SliceGeometry& g, DType dtype, const uint8_t* base, void* out);

}  // namespace minivllm
