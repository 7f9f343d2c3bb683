// GgufFile: a memory-mapped GGUF (v2/v3) file: header, metadata key/values of every type, tensor
// infos and data offsets. Knows nothing about models; gguf.h builds a model from it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/tensor.h"
#include "loader/mapped_file.h"

namespace minivllm {

enum class GgufValueType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5, kFloat32 = 6,
  kBool = 7, kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11, kFloat64 = 12,
};
const char* gguf_value_type_name(GgufValueType t);

// One metadata value. Scalars live in `integer` (all integer types and bool), `number` (floats;
// integers are copied here too) or `str`; arrays in the vector of their element kind.
struct GgufValue {
  GgufValueType type = GgufValueType::kUint8;
  GgufValueType elem_type = GgufValueType::kUint8;  // arrays only
  int64_t integer = 0;
  double number = 0;
  std::string str;
  std::vector<int64_t> ints;             // arrays of integers or bools
  std::vector<double> floats;            // arrays of floats
  std::vector<std::string> strings;      // arrays of strings
  std::vector<GgufValue> arrays;         // arrays of arrays
  bool is_integer() const;
  bool is_float() const { return type == GgufValueType::kFloat32 || type == GgufValueType::kFloat64; }
  size_t array_size() const;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // GGUF order: fastest-varying first
  uint32_t type = 0;        // ggml type id
  uint64_t offset = 0;      // relative to the data section
  size_t nbytes = 0;        // 0 when the type is unsupported (size unknown to us)
  std::vector<int64_t> hf_shape() const { return {ne.rbegin(), ne.rend()}; }
  int64_t numel() const;
};

class GgufFile {
 public:
  // Throws an Error naming the file for a bad magic, an unknown version, a truncated header or
  // tensor data beyond the end of the file.
  explicit GgufFile(const std::string& path);

  const std::string& path() const { return file_->path(); }
  uint32_t version() const { return version_; }
  size_t alignment() const { return alignment_; }
  size_t data_offset() const { return data_offset_; }

  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const GgufValue* find(const std::string& key) const;
  int64_t get_int(const std::string& key) const;  // throws naming the key and the file
  int64_t get_int(const std::string& key, int64_t fallback) const;
  double get_float(const std::string& key, double fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(const std::string& name) const;
  const uint8_t* tensor_data(const GgufTensorInfo& t) const { return file_->data() + data_offset_ + t.offset; }
  // fp32 copy in HF shape (ne reversed), dequantized; throws naming the tensor for an unsupported type.
  Tensor get_f32(const GgufTensorInfo& t) const;
  // Drops the mapped pages of [p, p + n) from the resident set once a loader has copied them out
  // (MappedFile::release).
  void release(const uint8_t* p, size_t n) const { file_->release(p, n); }

 private:
  void parse();
  std::shared_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  size_t data_offset_ = 0;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace minivllm
