// GGUF parsing (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md): every read is
// bounds-checked, so a truncated or corrupt file gives an Error naming it instead of a crash.
#include "loader/gguf_file.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "common/check.h"
#include "loader/gguf_dequant.h"
#include "loader/safetensors.h"

namespace minivllm {
namespace {

// Little-endian reads from the mapped bytes with a running offset.
class Cursor {
 public:
  explicit Cursor(const MappedFile& f) : f_(f) {}
  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, f_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string read_string(const char* what) {
    const uint64_t len = read<uint64_t>(what);
    need(len, what);
    std::string s(reinterpret_cast<const char*>(f_.data() + pos_), len);
    pos_ += len;
    return s;
  }
  // Each element of an array takes at least one byte: a larger count is a corrupt or truncated
  // file, not a reason to allocate gigabytes.
  void check_count(uint64_t n, const char* what) const { need(n, what); }
  size_t pos() const { return pos_; }

 private:
  void need(uint64_t n, const char* what) const {
    MINIVLLM_CHECK(n <= f_.size() && pos_ <= f_.size() - n)
        << f_.path() << ": truncated GGUF file: " << what << " at byte " << pos_ << " needs " << n
        << " bytes but the file has " << f_.size();
  }
  const MappedFile& f_;
  size_t pos_ = 0;
};

bool is_integer_type(GgufValueType t) {
  return t != GgufValueType::kFloat32 && t != GgufValueType::kFloat64 && t != GgufValueType::kString &&
         t != GgufValueType::kArray;
}

int64_t read_integer(Cursor& c, GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8: return c.read<uint8_t>("u8 value");
    case GgufValueType::kInt8: return c.read<int8_t>("i8 value");
    case GgufValueType::kUint16: return c.read<uint16_t>("u16 value");
    case GgufValueType::kInt16: return c.read<int16_t>("i16 value");
    case GgufValueType::kUint32: return c.read<uint32_t>("u32 value");
    case GgufValueType::kInt32: return c.read<int32_t>("i32 value");
    case GgufValueType::kUint64: return static_cast<int64_t>(c.read<uint64_t>("u64 value"));
    case GgufValueType::kInt64: return c.read<int64_t>("i64 value");
    case GgufValueType::kBool: return c.read<uint8_t>("bool value") != 0;
    default: return 0;
  }
}

double read_float(Cursor& c, GgufValueType t) {
  return t == GgufValueType::kFloat32 ? c.read<float>("f32 value") : c.read<double>("f64 value");
}

GgufValueType read_type(Cursor& c, const std::string& key, const std::string& path) {
  const uint32_t t = c.read<uint32_t>("value type");
  MINIVLLM_CHECK_LE(t, 12u) << path << ": corrupt GGUF: key " << key << " has unknown value type " << t;
  return static_cast<GgufValueType>(t);
}

GgufValue read_value(Cursor& c, GgufValueType type, const std::string& key, const std::string& path, int depth) {
  GgufValue v;
  v.type = type;
  if (type == GgufValueType::kString) {
    v.str = c.read_string("string value");
  } else if (type == GgufValueType::kFloat32 || type == GgufValueType::kFloat64) {
    v.number = read_float(c, type);
  } else if (type != GgufValueType::kArray) {
    v.integer = read_integer(c, type);
    v.number = static_cast<double>(v.integer);
  } else {
    MINIVLLM_CHECK_LT(depth, 8) << path << ": corrupt GGUF: arrays nested too deep under key " << key;
    v.elem_type = read_type(c, key, path);
    const uint64_t n = c.read<uint64_t>("array length");
    c.check_count(n, "array elements");
    for (uint64_t i = 0; i < n; ++i) {
      if (v.elem_type == GgufValueType::kString) v.strings.push_back(c.read_string("string array element"));
      else if (v.elem_type == GgufValueType::kArray) v.arrays.push_back(read_value(c, v.elem_type, key, path, depth + 1));
      else if (is_integer_type(v.elem_type)) v.ints.push_back(read_integer(c, v.elem_type));
      else v.floats.push_back(read_float(c, v.elem_type));
    }
  }
  return v;
}

}  // namespace

const char* gguf_value_type_name(GgufValueType t) {
  static const char* const kNames[] = {"uint8", "int8",  "uint16", "int16",  "uint32", "int32",  "float32",
                                       "bool",  "string", "array", "uint64", "int64",  "float64"};
  const auto i = static_cast<uint32_t>(t);
  return i < 13 ? kNames[i] : "unknown";
}

bool GgufValue::is_integer() const { return is_integer_type(type); }

size_t GgufValue::array_size() const { return ints.size() + floats.size() + strings.size() + arrays.size(); }

int64_t GgufTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : ne) {
    MINIVLLM_CHECK(d >= 0 && !__builtin_mul_overflow(n, d, &n))
        << "GGUF tensor '" << name << "': element count of ne " << shape_string(ne) << " overflows int64";
  }
  return n;
}

GgufFile::GgufFile(const std::string& path) : file_(std::make_shared<MappedFile>(path)) { parse(); }

void GgufFile::parse() {
  const std::string& p = file_->path();
  Cursor c(*file_);
  const uint32_t magic = c.read<uint32_t>("magic");
  MINIVLLM_CHECK(magic == 0x46554747u) << p << ": not a GGUF file (bad magic)";  // "GGUF" little-endian
  version_ = c.read<uint32_t>("version");
  MINIVLLM_CHECK(version_ == 2 || version_ == 3) << p << ": unsupported GGUF version " << version_ << " (2 or 3)";
  const uint64_t n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t n_kv = c.read<uint64_t>("metadata count");
  c.check_count(n_kv, "metadata");
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.read_string("metadata key");
    const GgufValueType type = read_type(c, key, p);
    metadata_[key] = read_value(c, type, key, p, 0);
  }
  if (const GgufValue* a = find("general.alignment")) {
    MINIVLLM_CHECK(a->is_integer() && a->integer > 0 && (a->integer & (a->integer - 1)) == 0)
        << p << ": general.alignment must be a power of two, got " << a->integer;
    alignment_ = static_cast<size_t>(a->integer);
  }
  c.check_count(n_tensors, "tensor infos");
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    t.name = c.read_string("tensor name");
    const uint32_t n_dims = c.read<uint32_t>("tensor rank");
    MINIVLLM_CHECK(n_dims >= 1 && n_dims <= 4) << p << ": tensor '" << t.name << "' has rank " << n_dims;
    int64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t dim = c.read<uint64_t>("tensor dims");
      t.ne.push_back(static_cast<int64_t>(dim));
      MINIVLLM_CHECK(dim <= uint64_t{INT64_MAX} && !__builtin_mul_overflow(numel, t.ne.back(), &numel))
          << p << ": tensor '" << t.name << "': element count overflows int64 at dimension " << d << " = " << dim;
    }
    t.type = c.read<uint32_t>("tensor type");
    t.offset = c.read<uint64_t>("tensor offset");
    if (ggml_type_supported(t.type)) {
      const int64_t block = ggml_block_size(t.type);
      MINIVLLM_CHECK_EQ(t.ne[0] % block, 0)
          << p << ": tensor '" << t.name << "' of type " << ggml_type_name(t.type) << " has a row of " << t.ne[0]
          << " elements, not a multiple of the block size";
      const size_t block_bytes = ggml_type_nbytes(t.type, block);
      MINIVLLM_CHECK(!__builtin_mul_overflow(static_cast<size_t>(numel / block), block_bytes, &t.nbytes))
          << p << ": tensor '" << t.name << "' of type " << ggml_type_name(t.type) << ": byte size of " << numel
          << " elements overflows";
    }
    MINIVLLM_CHECK(t.offset % alignment_ == 0)
        << p << ": tensor '" << t.name << "' data offset " << t.offset << " is not a multiple of general.alignment "
        << alignment_;
    MINIVLLM_CHECK(tensor_index_.count(t.name) == 0) << p << ": corrupt GGUF: tensor '" << t.name << "' appears twice";
    tensor_index_[t.name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }
  data_offset_ = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  for (const GgufTensorInfo& t : tensors_) {
    MINIVLLM_CHECK(data_offset_ <= file_->size() && t.offset <= file_->size() - data_offset_ &&
                   t.nbytes <= file_->size() - data_offset_ - t.offset)
        << p << ": truncated GGUF file: tensor '" << t.name << "' data ends at byte "
        << data_offset_ + t.offset + t.nbytes << " but the file has " << file_->size();
  }
  // No two tensors may share bytes (sizes are known for the supported types only).
  std::vector<const GgufTensorInfo*> by_offset;
  for (const GgufTensorInfo& t : tensors_) {
    if (t.nbytes > 0) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensorInfo& a = *by_offset[i - 1];
    const GgufTensorInfo& b = *by_offset[i];
    MINIVLLM_CHECK(a.offset + a.nbytes <= b.offset)
        << p << ": corrupt GGUF: the data of tensors '" << a.name << "' (bytes [" << a.offset << ", "
        << a.offset + a.nbytes << ")) and '" << b.name << "' (bytes [" << b.offset << ", " << b.offset + b.nbytes
        << ")) of the data section overlap";
  }
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

int64_t GgufFile::get_int(const std::string& key) const {
  const GgufValue* v = find(key);
  MINIVLLM_CHECK(v) << path() << ": missing GGUF metadata key " << key;
  MINIVLLM_CHECK(v->is_integer()) << path() << ": GGUF key " << key << " has type " << gguf_value_type_name(v->type)
                                  << ", expected an integer";
  return v->integer;
}

int64_t GgufFile::get_int(const std::string& key, int64_t fallback) const {
  return find(key) ? get_int(key) : fallback;
}

double GgufFile::get_float(const std::string& key, double fallback) const {
  const GgufValue* v = find(key);
  if (!v) return fallback;
  MINIVLLM_CHECK(v->is_float() || v->is_integer())
      << path() << ": GGUF key " << key << " has type " << gguf_value_type_name(v->type) << ", expected a number";
  return v->number;
}

std::string GgufFile::get_string(const std::string& key, const std::string& fallback) const {
  const GgufValue* v = find(key);
  if (!v) return fallback;
  MINIVLLM_CHECK(v->type == GgufValueType::kString)
      << path() << ": GGUF key " << key << " has type " << gguf_value_type_name(v->type) << ", expected a string";
  return v->str;
}

bool GgufFile::get_bool(const std::string& key, bool fallback) const {
  const GgufValue* v = find(key);
  if (!v) return fallback;
  MINIVLLM_CHECK(v->is_integer()) << path() << ": GGUF key " << key << " has type " << gguf_value_type_name(v->type)
                                  << ", expected a bool";
  return v->integer != 0;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Tensor GgufFile::get_f32(const GgufTensorInfo& t) const {
  MINIVLLM_CHECK(ggml_type_supported(t.type))
      << path() << ": tensor '" << t.name << "' has unsupported type " << ggml_type_name(t.type) << " (" << t.type
      << "); supported: " << kGgmlSupportedTypes;
  Tensor out = host_tensor(DType::kF32, t.hf_shape());
  ggml_dequantize(t.type, tensor_data(t), out.ptr<float>(), t.numel());
  return out;
}

}  // namespace minivllm
