// A minimal GGUF v3 writer for tests: metadata of any type and raw tensor bytes, written exactly as
// the format document lays them out, so the reader is checked against an independent encoder.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace minivllm::testing {

class GgufTestWriter {
 public:
  enum Type : uint32_t { U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7, STR = 8, ARR = 9,
                         U64 = 10, I64 = 11, F64 = 12 };

  template <typename T>
  void add_scalar(const std::string& key, Type type, T value) {
    begin_kv(key, type);
    put(&kv_, value);
  }
  void add_string(const std::string& key, const std::string& value) {
    begin_kv(key, STR);
    put_string(&kv_, value);
  }
  void add_strings(const std::string& key, const std::vector<std::string>& values) {
    begin_kv(key, ARR);
    put(&kv_, uint32_t{STR});
    put(&kv_, uint64_t{values.size()});
    for (const auto& s : values) put_string(&kv_, s);
  }
  template <typename T>
  void add_array(const std::string& key, Type elem_type, const std::vector<T>& values) {
    begin_kv(key, ARR);
    put(&kv_, uint32_t{elem_type});
    put(&kv_, uint64_t{values.size()});
    for (const T& v : values) put(&kv_, v);
  }
  // An array of arrays of int32.
  void add_nested_i32(const std::string& key, const std::vector<std::vector<int32_t>>& values) {
    begin_kv(key, ARR);
    put(&kv_, uint32_t{ARR});
    put(&kv_, uint64_t{values.size()});
    for (const auto& inner : values) {
      put(&kv_, uint32_t{I32});
      put(&kv_, uint64_t{inner.size()});
      for (int32_t v : inner) put(&kv_, v);
    }
  }
  void add_tensor(const std::string& name, const std::vector<uint64_t>& ne, uint32_t ggml_type,
                  const std::vector<uint8_t>& bytes) {
    tensors_.push_back({name, ne, ggml_type, bytes, false, 0});
  }
  // A tensor whose data offset (relative to the data section) is given as is, even unaligned or
  // overlapping another's; later tensors without one continue after the furthest end so far.
  void add_tensor_at(const std::string& name, const std::vector<uint64_t>& ne, uint32_t ggml_type,
                     const std::vector<uint8_t>& bytes, uint64_t offset) {
    tensors_.push_back({name, ne, ggml_type, bytes, true, offset});
  }

  std::vector<uint8_t> build(uint64_t alignment = 32) const {
    std::vector<uint8_t> out;
    put(&out, uint32_t{0x46554747});  // "GGUF"
    put(&out, uint32_t{3});
    put(&out, uint64_t{tensors_.size()});
    put(&out, uint64_t{n_kv_});
    out.insert(out.end(), kv_.begin(), kv_.end());
    uint64_t next = 0, end = 0;
    std::vector<uint64_t> offsets;
    for (const auto& t : tensors_) {
      const uint64_t offset = t.explicit_offset ? t.offset : next;
      put_string(&out, t.name);
      put(&out, uint32_t(t.ne.size()));
      for (uint64_t d : t.ne) put(&out, d);
      put(&out, t.type);
      put(&out, offset);
      offsets.push_back(offset);
      end = std::max<uint64_t>(end, offset + t.bytes.size());
      next = (end + alignment - 1) / alignment * alignment;
    }
    out.resize((out.size() + alignment - 1) / alignment * alignment, 0);
    const size_t data_start = out.size();
    out.resize(data_start + end, 0);
    for (size_t i = 0; i < tensors_.size(); ++i) {
      if (!tensors_[i].bytes.empty()) {
        std::memcpy(out.data() + data_start + offsets[i], tensors_[i].bytes.data(), tensors_[i].bytes.size());
      }
    }
    return out;
  }

 private:
  struct TensorEntry {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t type;
    std::vector<uint8_t> bytes;
    bool explicit_offset;
    uint64_t offset;
  };
  template <typename T>
  static void put(std::vector<uint8_t>* out, T v) {
    const size_t at = out->size();
    out->resize(at + sizeof(T));
    std::memcpy(out->data() + at, &v, sizeof(T));
  }
  static void put_string(std::vector<uint8_t>* out, const std::string& s) {
    put(out, uint64_t{s.size()});
    out->insert(out->end(), s.begin(), s.end());
  }
  void begin_kv(const std::string& key, Type type) {
    ++n_kv_;
    put_string(&kv_, key);
    put(&kv_, uint32_t{type});
  }

  std::vector<uint8_t> kv_;
  uint64_t n_kv_ = 0;
  std::vector<TensorEntry> tensors_;
};

}  // namespace minivllm::testing
