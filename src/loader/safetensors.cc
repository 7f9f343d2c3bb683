// Reading one .safetensors file: header parsing with checks that name the file and tensor.
#include "loader/safetensors.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/check.h"
#include "loader/parallel_convert.h"
#include "loader/tensor_slice.h"

namespace minivllm {
namespace {

using nlohmann::json;

// Element sizes of every dtype the format defines, so offsets can be checked even for tensors
// we will never convert.
size_t safetensors_elem_size(const std::string& dtype) {
  static const std::map<std::string, size_t> kSizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
      {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"F64", 8},     {"I64", 8}, {"U64", 8}};
  auto it = kSizes.find(dtype);
  return it == kSizes.end() ? 0 : it->second;
}

bool parse_supported_dtype(const std::string& s, DType* out) {
  if (s == "BF16") *out = DType::kBF16;
  else if (s == "F16") *out = DType::kF16;
  else if (s == "F32") *out = DType::kF32;
  else if (s == "F8_E4M3") *out = DType::kF8E4M3;
  else return false;
  return true;
}

// Shapes are checked at parse time (non-negative, element count and byte size within range), so
// the product cannot overflow for a parsed tensor; the check guards any other caller.
int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    MINIVLLM_CHECK(d >= 0 && !__builtin_mul_overflow(n, d, &n))
        << "element count of shape " << shape_string(shape) << " overflows int64";
  }
  return n;
}

// The fp32 readers take BF16, F16 and F32. FP8 codes mean nothing without their scales, which only
// config.json's quantization_config locates: those tensors are read in their stored form by the
// dequantizing source (loader/quantized_weights.h), and refused here.
void check_convertible(const SafetensorsTensorInfo& t, const std::string& path) {
  MINIVLLM_CHECK(t.dtype_supported) << "tensor '" << t.name << "' in " << path << " has dtype " << t.dtype_name
                                    << "; only BF16, F16, F32 and F8_E4M3 (with scales) are supported";
  MINIVLLM_CHECK(t.dtype != DType::kF8E4M3)
      << "tensor '" << t.name << "' in " << path
      << " has dtype F8_E4M3, whose values need their scales: config.json's quantization_config "
         "(quant_method fp8 or compressed-tensors) says where they are, and it has none";
}

}  // namespace

std::string shape_string(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(std::make_shared<MappedFile>(path)) {
  parse_header();
}

void SafetensorsFile::parse_header() {
  const std::string& p = file_->path();
  const size_t size = file_->size();
  MINIVLLM_CHECK_GE(size, size_t{8}) << p << ": corrupt safetensors header: file of " << size << " bytes";
  uint64_t header_len = 0;
  std::memcpy(&header_len, file_->data(), 8);  // little-endian on every host we build for
  MINIVLLM_CHECK(header_len <= size - 8)
      << p << ": corrupt safetensors header: header length " << header_len << " exceeds the file size " << size;
  const char* text = reinterpret_cast<const char*>(file_->data() + 8);
  json header;
  try {
    header = json::parse(text, text + header_len);
  } catch (const json::exception& e) {
    MINIVLLM_FAIL() << p << ": corrupt safetensors header (invalid JSON): " << e.what();
  }
  MINIVLLM_CHECK(header.is_object()) << p << ": corrupt safetensors header: not a JSON object";
  const size_t data_start = 8 + header_len;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      MINIVLLM_CHECK(entry.is_object()) << p << ": corrupt safetensors header: __metadata__ is not an object";
      for (const auto& [k, v] : entry.items()) metadata_[k] = v.is_string() ? v.get<std::string>() : v.dump();
      continue;
    }
    MINIVLLM_CHECK(entry.is_object() && entry.contains("dtype") && entry["dtype"].is_string() &&
                   entry.contains("shape") && entry["shape"].is_array() && entry.contains("data_offsets") &&
                   entry["data_offsets"].is_array() && entry["data_offsets"].size() == 2)
        << p << ": corrupt safetensors header: entry of tensor '" << name << "' needs dtype, shape, data_offsets";
    SafetensorsTensorInfo info;
    info.name = name;
    info.dtype_name = entry["dtype"].get<std::string>();
    info.dtype_supported = parse_supported_dtype(info.dtype_name, &info.dtype);
    int64_t numel = 1;
    for (const json& d : entry["shape"]) {
      MINIVLLM_CHECK(d.is_number_unsigned() && d.get<uint64_t>() <= uint64_t{INT64_MAX})
          << p << ": corrupt safetensors header: tensor '" << name << "' has shape " << entry["shape"].dump();
      info.shape.push_back(d.get<int64_t>());
      MINIVLLM_CHECK(!__builtin_mul_overflow(numel, info.shape.back(), &numel))
          << p << ": corrupt safetensors header: tensor '" << name << "': element count of shape "
          << entry["shape"].dump() << " overflows int64";
    }
    const json& offs = entry["data_offsets"];
    MINIVLLM_CHECK(offs[0].is_number_unsigned() && offs[1].is_number_unsigned() &&
                   offs[0].get<uint64_t>() <= offs[1].get<uint64_t>())
        << p << ": corrupt safetensors header: tensor '" << name << "' has data_offsets " << offs.dump();
    const uint64_t begin = offs[0].get<uint64_t>(), end = offs[1].get<uint64_t>();
    const size_t elem = safetensors_elem_size(info.dtype_name);
    uint64_t nbytes = 0;
    MINIVLLM_CHECK(!__builtin_mul_overflow(static_cast<uint64_t>(numel), uint64_t{elem}, &nbytes))
        << p << ": corrupt safetensors header: tensor '" << name << "' (" << info.dtype_name
        << shape_string(info.shape) << "): byte size overflows";
    MINIVLLM_CHECK(elem == 0 || end - begin == nbytes)
        << p << ": corrupt safetensors header: tensor '" << name << "' (" << info.dtype_name << shape_string(info.shape)
        << ") has " << end - begin << " data bytes";
    MINIVLLM_CHECK(end <= size - data_start)
        << p << ": truncated file: tensor '" << name << "' data ends at byte " << data_start + end
        << " but the file has " << size << " bytes";
    info.begin = data_start + begin;
    info.end = data_start + end;
    tensors_.emplace(name, std::move(info));
  }
  // No two tensors may share bytes (empty ones hold none).
  std::vector<const SafetensorsTensorInfo*> by_offset;
  for (const auto& kv : tensors_) {
    if (kv.second.end > kv.second.begin) by_offset.push_back(&kv.second);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const SafetensorsTensorInfo* a, const SafetensorsTensorInfo* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const SafetensorsTensorInfo& a = *by_offset[i - 1];
    const SafetensorsTensorInfo& b = *by_offset[i];
    MINIVLLM_CHECK(a.end <= b.begin) << p << ": corrupt safetensors header: the data of tensors '" << a.name
                                     << "' (data_offsets [" << a.begin - data_start << ", " << a.end - data_start
                                     << "]) and '" << b.name << "' (data_offsets [" << b.begin - data_start << ", "
                                     << b.end - data_start << "]) overlap";
  }
  add_fused_expert_views();
}

// transformers 5 stores a mixture-of-experts layer's experts as two 3-D tensors, where published
// checkpoints (and transformers 4) have one matrix per expert and projection:
//   P.gate_up_proj [E, 2I, H] = for each expert e, [gate_proj; up_proj] (gate first);
//   P.down_proj    [E, H, I]  = each expert's down_proj,
// with P ending in ".mlp.experts". GraniteMoE's published checkpoints stack them alike as
// B.input_linear.weight and B.output_linear.weight (B ending in ".block_sparse_moe"; P is then
// B.experts). Every per-expert matrix is a contiguous run of the 3-D tensor's bytes, so each is
// exposed under its per-expert name (P.<e>.gate_proj.weight, ...) as a view of those bytes, and the
// loader reads either layout alike.
constexpr int64_t kMaxFusedExperts = 65536;  // published MoE models have at most a few hundred

void SafetensorsFile::add_fused_expert_views() {
  std::vector<SafetensorsTensorInfo> views;
  for (const auto& [name, t] : tensors_) {
    const bool granite_in = name.ends_with(".block_sparse_moe.input_linear.weight");
    const bool granite_out = name.ends_with(".block_sparse_moe.output_linear.weight");
    const bool gate_up = granite_in || name.ends_with(".mlp.experts.gate_up_proj");
    const bool down = granite_out || name.ends_with(".mlp.experts.down_proj");
    if ((!gate_up && !down) || t.shape.size() != 3 || !t.dtype_supported) continue;
    // P: "model.layers.N.mlp.experts", or "model.layers.N.block_sparse_moe.experts"
    const std::string prefix = granite_in || granite_out
                                   ? name.substr(0, name.rfind(granite_in ? ".input_linear" : ".output_linear")) + ".experts"
                                   : name.substr(0, name.rfind('.'));
    const std::vector<std::string> parts =
        gate_up ? std::vector<std::string>{"gate_proj", "up_proj"} : std::vector<std::string>{"down_proj"};
    const int64_t experts = t.shape[0], rows = t.shape[1], cols = t.shape[2];
    // A view per expert: bound the count (a header may claim 2^40 experts of empty matrices).
    MINIVLLM_CHECK(experts <= kMaxFusedExperts && rows > 0 && cols > 0)
        << path() << ": tensor '" << name << "' " << shape_string(t.shape) << ": fused experts need 1 to "
        << kMaxFusedExperts << " experts of non-empty matrices";
    MINIVLLM_CHECK(!gate_up || rows % 2 == 0) << path() << ": tensor '" << name << "' " << shape_string(t.shape)
                                              << ": a fused gate_up_proj needs an even row count (gate, then up)";
    const size_t elem = safetensors_elem_size(t.dtype_name);
    const int64_t part_rows = gate_up ? rows / 2 : rows;
    const size_t part_bytes = static_cast<size_t>(part_rows * cols) * elem;
    for (int64_t e = 0; e < experts; ++e) {
      const size_t expert_begin = t.begin + static_cast<size_t>(e * rows * cols) * elem;
      for (size_t i = 0; i < parts.size(); ++i) {
        SafetensorsTensorInfo v = t;
        v.name = prefix + "." + std::to_string(e) + "." + parts[i] + ".weight";
        v.shape = {part_rows, cols};
        v.begin = expert_begin + i * part_bytes;
        v.end = v.begin + part_bytes;
        views.push_back(std::move(v));
      }
    }
  }
  for (SafetensorsTensorInfo& v : views) {
    MINIVLLM_CHECK(tensors_.count(v.name) == 0)
        << path() << ": tensor '" << v.name << "' is stored both on its own and inside its layer's fused experts";
    std::string name = v.name;
    tensors_.emplace(std::move(name), std::move(v));
  }
}

const SafetensorsTensorInfo& SafetensorsFile::info(const std::string& name) const {
  auto it = tensors_.find(name);
  MINIVLLM_CHECK(it != tensors_.end()) << "tensor '" << name << "' not found in " << path();
  return it->second;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& kv : tensors_) out.push_back(kv.first);
  return out;
}

Tensor SafetensorsFile::get_f32(const std::string& name, const std::vector<int64_t>& expected_shape) const {
  const SafetensorsTensorInfo& t = info(name);
  check_convertible(t, path());
  MINIVLLM_CHECK(expected_shape.empty() || expected_shape == t.shape)
      << "tensor '" << name << "': expected shape " << shape_string(expected_shape) << " but " << path() << " has "
      << shape_string(t.shape);
  std::vector<int64_t> shape = t.shape.empty() ? std::vector<int64_t>{1} : t.shape;  // scalars become [1]
  MINIVLLM_CHECK_LE(shape.size(), size_t{Tensor::kMaxDims}) << "tensor '" << name << "' in " << path();
  Tensor out = host_tensor(DType::kF32, shape);
  convert_to_f32_parallel(file_->data() + t.begin, t.dtype, out.ptr<float>(), static_cast<size_t>(numel_of(shape)));
  return out;
}

Tensor SafetensorsFile::get_f32_slice(const std::string& name, const std::vector<int64_t>& full_shape, int dim,
                                      int64_t start, int64_t length) const {
  return slice(name, full_shape, dim, start, length, /*stored=*/false);
}

Tensor SafetensorsFile::get_stored_slice(const std::string& name, const std::vector<int64_t>& full_shape, int dim,
                                         int64_t start, int64_t length) const {
  return slice(name, full_shape, dim, start, length, /*stored=*/true);
}

RawTensor SafetensorsFile::raw(const std::string& name, const std::string& dtype_name) const {
  const SafetensorsTensorInfo& t = info(name);
  MINIVLLM_CHECK(t.dtype_name == dtype_name)
      << "tensor '" << name << "' in " << path() << " has dtype " << t.dtype_name << ", expected " << dtype_name;
  return RawTensor{file_->data() + t.begin, t.shape};
}

Tensor SafetensorsFile::slice(const std::string& name, const std::vector<int64_t>& full_shape, int dim,
                              int64_t start, int64_t length, bool stored) const {
  const SafetensorsTensorInfo& t = info(name);
  if (stored) {
    MINIVLLM_CHECK(t.dtype_supported) << "tensor '" << name << "' in " << path() << " has dtype " << t.dtype_name
                                      << "; only BF16, F16, F32 and F8_E4M3 are supported";
  } else {
    check_convertible(t, path());
  }
  const SliceGeometry g =
      check_slice("tensor '" + name + "' in " + path(), t.shape, full_shape, dim, start, length);
  MINIVLLM_CHECK_LE(g.out_shape.size(), size_t{Tensor::kMaxDims}) << "tensor '" << name << "' in " << path();
  const uint8_t* base = file_->data() + t.begin;
  const DType dtype = t.dtype;
  if (stored) {
    Tensor out = host_tensor(dtype, g.out_shape);
    copy_slice_chunks(g, dtype, base, out.data());
    return out;
  }
  Tensor out = host_tensor(DType::kF32, g.out_shape);
  const size_t elem = dtype_size(dtype);
  convert_slice_chunks(g, out.ptr<float>(), [&](int64_t first, int64_t count, float* dst) {
    convert_to_f32_parallel(base + static_cast<size_t>(first) * elem, dtype, dst, static_cast<size_t>(count));
  });
  return out;
}

}  // namespace minivllm
