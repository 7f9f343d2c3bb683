// Fuzzes the safetensors reader: the input bytes are a .safetensors file (8-byte header length,
// JSON header, data). Parses and checks the header, then converts the small tensors whole and in
// row / column slices, as the weight loader does.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "loader/safetensors.h"

namespace {

using minivllm::fuzz::expect_ok_or_error;

constexpr int64_t kMaxConvertElements = 1 << 16;

// The tensor's element count when every dim is >= 0 and the product stays small; -1 otherwise.
int64_t small_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d != 0 && n > kMaxConvertElements / d)) return -1;
    n *= d;
  }
  return n;
}

void touch_tensor(const minivllm::SafetensorsFile& f, const std::string& name) {
  const minivllm::SafetensorsTensorInfo& info = f.info(name);
  if (info.name != name || info.begin > info.end) __builtin_trap();
  (void)minivllm::shape_string(info.shape);
  if (small_numel(info.shape) < 0) return;
  expect_ok_or_error([&] { (void)f.get_f32(name); });
  expect_ok_or_error([&] { (void)f.get_f32(name, info.shape); });
  expect_ok_or_error([&] { (void)f.get_f32(name, {1, 2, 3}); });
  for (int dim = 0; dim < 2; ++dim) {
    if (static_cast<size_t>(dim) >= info.shape.size()) break;
    const int64_t size = info.shape[dim];
    expect_ok_or_error([&] { (void)f.get_f32_slice(name, info.shape, dim, size / 3, size / 2 > 0 ? size / 2 : 1); });
    expect_ok_or_error([&] { (void)f.get_f32_slice(name, info.shape, dim, 0, size); });
    expect_ok_or_error([&] { (void)f.get_f32_slice(name, info.shape, dim, size, 1); });  // past the end
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static minivllm::fuzz::MemFile file("safetensors_fuzz");
  const std::string& path = file.write(data, size);
  expect_ok_or_error([&] {
    minivllm::SafetensorsFile f(path);
    for (const auto& [k, v] : f.metadata()) (void)(k.size() + v.size());
    for (const std::string& name : f.names()) {
      if (!f.has(name)) __builtin_trap();
      expect_ok_or_error([&] { touch_tensor(f, name); });
    }
    expect_ok_or_error([&] { (void)f.info("no such tensor \x01"); });
  });
  return 0;
}
