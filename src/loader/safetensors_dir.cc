// open_safetensors_dir: a checkpoint directory (one model.safetensors, or an index with shards) as
// a WeightSource.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/check.h"
#include "loader/safetensors.h"
#include "loader/tensor_slice.h"
#include "loader/weight_source.h"

namespace minivllm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class SafetensorsWeightSource : public WeightSource {
 public:
  explicit SafetensorsWeightSource(std::string dir) : dir_(std::move(dir)) {}

  void add_file(std::unique_ptr<SafetensorsFile> file) {
    const size_t index = files_.size();
    for (const std::string& name : file->names()) where_[name] = index;
    files_.push_back(std::move(file));
  }
  // The index names the shard of every tensor; trust it over a tensor's presence in other shards.
  void route(const std::string& name, size_t file_index) { where_[name] = file_index; }
  const SafetensorsFile& file(size_t i) const { return *files_[i]; }

  bool has(const std::string& name) const override { return where_.count(name) > 0; }
  Tensor get_f32(const std::string& name, const std::vector<int64_t>& expected_shape) const override {
    auto it = where_.find(name);
    MINIVLLM_CHECK(it != where_.end()) << "tensor '" << name << "' not found in " << dir_;
    return files_[it->second]->get_f32(name, expected_shape);
  }
  Tensor get_f32_slice(const std::string& name, const std::vector<int64_t>& full_shape, int dim, int64_t start,
                       int64_t length) const override {
    auto it = where_.find(name);
    MINIVLLM_CHECK(it != where_.end()) << "tensor '" << name << "' not found in " << dir_ << " (slice "
                                       << slice_string(dim, start, length) << ")";
    return files_[it->second]->get_f32_slice(name, full_shape, dim, start, length);
  }
  DType stored_dtype(const std::string& name) const override {
    auto it = where_.find(name);
    MINIVLLM_CHECK(it != where_.end()) << "tensor '" << name << "' not found in " << dir_;
    const SafetensorsTensorInfo& t = files_[it->second]->info(name);
    return t.dtype_supported ? t.dtype : DType::kF32;  // unsupported: get_f32_slice names the problem
  }
  Tensor get_stored_slice(const std::string& name, const std::vector<int64_t>& full_shape, int dim, int64_t start,
                          int64_t length) const override {
    auto it = where_.find(name);
    MINIVLLM_CHECK(it != where_.end()) << "tensor '" << name << "' not found in " << dir_ << " (slice "
                                       << slice_string(dim, start, length) << ")";
    return files_[it->second]->get_stored_slice(name, full_shape, dim, start, length);
  }
  RawTensor raw_tensor(const std::string& name, const std::string& dtype_name) const override {
    auto it = where_.find(name);
    MINIVLLM_CHECK(it != where_.end()) << "tensor '" << name << "' not found in " << dir_;
    return files_[it->second]->raw(name, dtype_name);
  }
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    out.reserve(where_.size());
    for (const auto& kv : where_) out.push_back(kv.first);
    return out;
  }
  std::string describe() const override { return dir_; }

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, size_t> where_;
};

std::unique_ptr<WeightSource> open_sharded(const std::string& dir, const std::string& index_path) {
  std::ifstream in(index_path, std::ios::binary);
  MINIVLLM_CHECK(in) << "cannot open " << index_path;
  json index;
  try {
    index = json::parse(in);
  } catch (const json::exception& e) {
    MINIVLLM_FAIL() << index_path << ": malformed JSON: " << e.what();
  }
  MINIVLLM_CHECK(index.is_object() && index.contains("weight_map") && index["weight_map"].is_object())
      << index_path << ": missing key weight_map";
  auto source = std::make_unique<SafetensorsWeightSource>(dir);
  std::map<std::string, size_t> shard_index;
  for (const auto& [name, shard] : index["weight_map"].items()) {
    MINIVLLM_CHECK(shard.is_string()) << index_path << ": weight_map entry of '" << name << "' is not a file name";
    const std::string shard_name = shard.get<std::string>();
    auto it = shard_index.find(shard_name);
    if (it == shard_index.end()) {
      const std::string shard_path = (fs::path(dir) / shard_name).string();
      MINIVLLM_CHECK(fs::exists(shard_path)) << index_path << ": shard " << shard_path << " (of tensor '" << name
                                             << "') does not exist";
      it = shard_index.emplace(shard_name, shard_index.size()).first;
      source->add_file(std::make_unique<SafetensorsFile>(shard_path));
    }
    MINIVLLM_CHECK(source->file(it->second).has(name))
        << index_path << " maps tensor '" << name << "' to " << source->file(it->second).path()
        << ", which does not contain it";
    source->route(name, it->second);
  }
  return source;
}

// A base model's checkpoint (transformers' Qwen3Model / LlamaModel saved alone, as embedding models
// such as Qwen3-Embedding ship): its tensors lack the causal LM's "model." prefix. Served under the
// prefixed names the registry asks for; names without the prefix (lm_head.weight) pass through.
class BaseModelNames : public WeightSource {
 public:
  explicit BaseModelNames(std::unique_ptr<WeightSource> inner) : inner_(std::move(inner)) {}

  bool has(const std::string& name) const override { return inner_->has(strip(name)); }
  Tensor get_f32(const std::string& name, const std::vector<int64_t>& expected_shape) const override {
    return inner_->get_f32(strip(name), expected_shape);
  }
  Tensor get_f32_slice(const std::string& name, const std::vector<int64_t>& full_shape, int dim, int64_t start,
                       int64_t length) const override {
    return inner_->get_f32_slice(strip(name), full_shape, dim, start, length);
  }
  DType stored_dtype(const std::string& name) const override { return inner_->stored_dtype(strip(name)); }
  Tensor get_stored_slice(const std::string& name, const std::vector<int64_t>& full_shape, int dim, int64_t start,
                          int64_t length) const override {
    return inner_->get_stored_slice(strip(name), full_shape, dim, start, length);
  }
  RawTensor raw_tensor(const std::string& name, const std::string& dtype_name) const override {
    return inner_->raw_tensor(strip(name), dtype_name);
  }
  std::vector<std::string> names() const override {
    std::vector<std::string> out = inner_->names();
    for (std::string& n : out) n = kPrefix + n;
    return out;
  }
  std::string describe() const override { return inner_->describe(); }

  // No tensor has the prefix, and the embedding is there without it.
  static bool applies(const WeightSource& s) {
    if (!s.has("embed_tokens.weight")) return false;
    for (const std::string& n : s.names()) {
      if (n.rfind(kPrefix, 0) == 0) return false;
    }
    return true;
  }

 private:
  static constexpr const char* kPrefix = "model.";
  static std::string strip(const std::string& name) {
    return name.rfind(kPrefix, 0) == 0 ? name.substr(std::char_traits<char>::length(kPrefix)) : name;
  }
  std::unique_ptr<WeightSource> inner_;
};

std::unique_ptr<WeightSource> with_base_model_names(std::unique_ptr<WeightSource> source) {
  if (!BaseModelNames::applies(*source)) return source;
  return std::make_unique<BaseModelNames>(std::move(source));
}

}  // namespace

std::unique_ptr<WeightSource> open_safetensors_dir(const std::string& dir) {
  MINIVLLM_CHECK(fs::is_directory(dir)) << "model directory not found: " << dir;
  const std::string single = (fs::path(dir) / "model.safetensors").string();
  if (fs::exists(single)) {
    auto source = std::make_unique<SafetensorsWeightSource>(dir);
    source->add_file(std::make_unique<SafetensorsFile>(single));
    return with_base_model_names(std::move(source));
  }
  const std::string index_path = (fs::path(dir) / "model.safetensors.index.json").string();
  MINIVLLM_CHECK(fs::exists(index_path)) << "no model.safetensors or model.safetensors.index.json in " << dir;
  return with_base_model_names(open_sharded(dir, index_path));
}

}  // namespace minivllm
