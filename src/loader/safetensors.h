// Safetensors: one memory-mapped .safetensors file (8-byte little-endian header length, a JSON
// header {name: {dtype, shape, data_offsets}}, then the raw data), a directory of them as a
// WeightSource (see weight_source.h), and a writer for tests and tools.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/tensor.h"
#include "loader/mapped_file.h"
#include "loader/weight_source.h"

namespace minivllm {

struct SafetensorsTensorInfo {
  std::string name;
  std::string dtype_name;  // as in the header, e.g. "BF16"
  bool dtype_supported = false;
  DType dtype = DType::kF32;  // valid when dtype_supported (BF16, F16, F32, F8_E4M3)
  std::vector<int64_t> shape;
  size_t begin = 0;  // absolute byte offsets in the file
  size_t end = 0;
};

class SafetensorsFile {
 public:
  // Parses and checks the header; throws an Error naming the file (and the tensor) when the header
  // is corrupt or a tensor's data lies beyond the end of the file.
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return file_->path(); }
  bool has(const std::string& name) const { return tensors_.count(name) > 0; }
  const SafetensorsTensorInfo& info(const std::string& name) const;  // throws naming the tensor and file
  std::vector<std::string> names() const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // fp32 copy of a BF16/F16/F32 tensor; throws naming the tensor for other dtypes (F8_E4M3 too:
  // its values need scales, loader/quantized_weights.h) or a shape mismatch.
  Tensor get_f32(const std::string& name, const std::vector<int64_t>& expected_shape = {}) const;
  // Elements [start, start + length) along `dim` (0 or 1) of the tensor of `full_shape`, as fp32;
  // only the slice is converted. Throws naming the tensor, the file, the slice and the shape.
  Tensor get_f32_slice(const std::string& name, const std::vector<int64_t>& full_shape, int dim, int64_t start,
                       int64_t length) const;
  // The same slice in the stored dtype (BF16, F16, F32 or F8_E4M3: unscaled codes), copied as is.
  Tensor get_stored_slice(const std::string& name, const std::vector<int64_t>& full_shape, int dim, int64_t start,
                          int64_t length) const;
  // The bytes of a tensor of dtype `dtype_name` (any the format defines, U8 included) as mapped,
  // with its shape; throws naming the tensor, the file and both dtypes when it has another.
  RawTensor raw(const std::string& name, const std::string& dtype_name) const;

 private:
  Tensor slice(const std::string& name, const std::vector<int64_t>& full_shape, int dim, int64_t start,
               int64_t length, bool stored) const;
  void parse_header();
  void add_fused_expert_views();  // transformers 5's 3-D experts under their per-expert names
  std::shared_ptr<MappedFile> file_;
  std::map<std::string, SafetensorsTensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Writes host tensors (F32, F16, BF16 or F8_E4M3, each in its own dtype) to `path`, names sorted, header
// padded to 8 bytes as the reference implementation does.
void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// "[2, 3]" for messages.
std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace minivllm
