// write_safetensors: the inverse of SafetensorsFile, for tests and conversion tools.
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/check.h"
#include "loader/safetensors.h"

namespace minivllm {
namespace {

const char* safetensors_dtype(DType t, const std::string& name) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kF8E4M3: return "F8_E4M3";
    default: MINIVLLM_FAIL() << "write_safetensors: tensor '" << name << "' has dtype " << dtype_name(t);
  }
}

}  // namespace

void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t offset = 0;
  for (const auto& [name, t] : tensors) {
    MINIVLLM_CHECK(t.device() == DeviceKind::kCpu && (t.nbytes() == 0 || t.data()))
        << "write_safetensors: tensor '" << name << "' is not a host tensor";
    header[name] = {{"dtype", safetensors_dtype(t.dtype(), name)},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  MINIVLLM_CHECK(out) << "cannot write " << path;
  const uint64_t len = text.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& kv : tensors) out.write(static_cast<const char*>(kv.second.data()), kv.second.nbytes());
  MINIVLLM_CHECK(out.good()) << "error writing " << path;
}

}  // namespace minivllm
