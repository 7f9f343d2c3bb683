// The GGUF WeightSource: name mapping, shape checks, dequantization and the rotary row unpermute.
#include "loader/gguf_weights.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>

#include "common/check.h"
#include "loader/gguf.h"
#include "loader/gguf_dequant.h"
#include "loader/rope_rows.h"
#include "loader/safetensors.h"
#include "loader/tensor_slice.h"

namespace minivllm {
namespace {

// A GGUF tensor's HF name through the registry row's two name tables, its role and layer; names
// the row does not map (e.g. rope_freqs.weight) stay as they are, with no role. An expert role's
// tensor holds every expert of its layer: no one HF name (hf is empty; the source names each).
struct HfName {
  std::string hf;
  WeightRole role = WeightRole::kCount;
  int64_t layer = -1;
  bool bias = false;  // an expert role's: the experts' biases ([E, rows]), not their weights
};
HfName to_hf_name(const ArchitectureSpec& arch, const std::string& gguf_name) {
  int64_t layer = -1;
  if (gguf_name.starts_with("blk.")) {
    const size_t end = gguf_name.find('.', 4);
    const std::string digits = gguf_name.substr(4, end == std::string::npos ? 0 : end - 4);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return {gguf_name};
    layer = std::stoll(digits);
  }
  for (int i = 0; i < kNumWeightRoles; ++i) {
    const auto role = static_cast<WeightRole>(i);
    if (is_layer_role(role) != (layer >= 0)) continue;
    for (const char* kind : {"weight", "bias"}) {
      if (weight_name(arch, WeightFormat::kGguf, role, layer, kind) != gguf_name) continue;
      if (is_expert_role(role)) return {"", role, layer, std::string_view(kind) == "bias"};
      // llama.cpp's exp_probs_b.bias is the router's e_score_correction_bias; attn_sinks.weight gpt-oss's sinks.
      const char* hf_kind = role == WeightRole::kMoeScoreBias ? "e_score_correction_bias"
                            : role == WeightRole::kAttnSinks  ? "sinks"
                                                              : kind;
      return {weight_name(arch, WeightFormat::kHuggingFace, role, layer, hf_kind), role, layer};
    }
  }
  // A fused tensor (phi3's attn_qkv) takes the HF fused module's name, which fused_weights.h splits.
  if (arch.hf_fused != nullptr && layer >= 0) {
    auto at_layer = [&](const char* pattern) {
      std::string name(pattern);
      return name.replace(name.find("{L}"), 3, std::to_string(layer)) + ".weight";
    };
    for (const FusedWeight& f : *arch.hf_fused) {
      if (f.gguf_module != nullptr && at_layer(f.gguf_module) == gguf_name) return {at_layer(f.module)};
    }
  }
  return {gguf_name};
}

class GgufWeightSource : public WeightSource {
 public:
  GgufWeightSource(std::shared_ptr<const GgufFile> file, const ModelConfig& config) : file_(std::move(file)) {
    // Rows are unpermuted by role (make_gguf_weight_source); a fused q/k/v tensor would need it per part.
    MINIVLLM_CHECK(!config.traits().gguf_rope_permuted || !gguf_fuses(*config.arch, "blk.{L}.attn_qkv"))
        << config.arch_name << ": a rope-permuted architecture with fused GGUF q/k/v is not implemented";
    for (const GgufTensorInfo& t : file_->tensors()) {
      const auto [hf, role, layer, bias] = to_hf_name(*config.arch, t.name);
      if (is_expert_role(role)) {
        add_experts(t, role, layer, bias, config);
        continue;
      }
      entries_[hf] = Entry{&t};
    }
  }

  bool has(const std::string& name) const override { return entries_.count(name) > 0; }
  Tensor get_f32(const std::string& name, const std::vector<int64_t>& expected_shape) const override {
    auto it = entries_.find(name);
    MINIVLLM_CHECK(it != entries_.end()) << "tensor '" << name << "' not found in " << file_->path();
    const GgufTensorInfo& t = *it->second.info;
    const std::vector<int64_t> shape = shape_of(it->second);
    MINIVLLM_CHECK(expected_shape.empty() || expected_shape == shape)
        << "tensor '" << name << "' (GGUF '" << t.name << "'): expected shape " << shape_string(expected_shape)
        << " but " << file_->path() << " has " << shape_string(shape) << " (GGUF ne " << shape_string(t.ne)
        << (it->second.expert >= 0 ? ", expert " + std::to_string(it->second.expert) : "") << ")";
    if (it->second.expert >= 0) return slice(name, shape, 0, 0, shape[0], /*stored=*/false);
    return file_->get_f32(t);
  }
  // Dequantizes only the slice: a row slice is one run of whole rows; a column slice is one run per
  // row, which must start and end on a quantisation block (blocks run along HF's last dim, GGUF's
  // ne[0]).
  Tensor get_f32_slice(const std::string& name, const std::vector<int64_t>& full_shape, int dim, int64_t start,
                       int64_t length) const override {
    return slice(name, full_shape, dim, start, length, /*stored=*/false);
  }
  DType stored_dtype(const std::string& name) const override {
    auto it = entries_.find(name);
    MINIVLLM_CHECK(it != entries_.end()) << "tensor '" << name << "' not found in " << file_->path();
    const uint32_t type = it->second.info->type;
    return ggml_type_supported(type) ? ggml_type_dtype(type) : DType::kF32;  // unsupported: reported by the slice
  }
  // The same slice as stored (blocks copied, not decoded), with the same checks.
  Tensor get_stored_slice(const std::string& name, const std::vector<int64_t>& full_shape, int dim, int64_t start,
                          int64_t length) const override {
    return slice(name, full_shape, dim, start, length, /*stored=*/true);
  }
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    for (const auto& kv : entries_) out.push_back(kv.first);
    return out;
  }
  std::string describe() const override { return file_->path(); }

 private:
  Tensor slice(const std::string& name, const std::vector<int64_t>& full_shape, int dim, int64_t start,
               int64_t length, bool stored) const {
    const std::string slice = slice_string(dim, start, length);
    auto it = entries_.find(name);
    MINIVLLM_CHECK(it != entries_.end()) << "tensor '" << name << "' not found in " << file_->path() << " (slice "
                                         << slice << ")";
    const GgufTensorInfo& t = *it->second.info;
    const int64_t expert = it->second.expert;
    const std::string what = "tensor '" + name + "' (GGUF '" + t.name + "'" +
                             (expert >= 0 ? ", expert " + std::to_string(expert) : "") + ") in " + file_->path();
    MINIVLLM_CHECK(ggml_type_supported(t.type))
        << what << ": slice " << slice << ": unsupported type " << ggml_type_name(t.type) << " (" << t.type
        << "); supported: " << kGgmlSupportedTypes;
    const std::vector<int64_t> shape = shape_of(it->second);
    const SliceGeometry g = check_slice(what, shape, full_shape, dim, start, length);
    const int64_t block = ggml_block_size(t.type);
    const bool block_dim = dim + 1 == static_cast<int>(shape.size());  // blocks run along it
    MINIVLLM_CHECK(block == 1 || !block_dim || (start % block == 0 && length % block == 0))
        << what << ": slice " << slice << " of shape " << shape_string(shape) << ": type " << ggml_type_name(t.type)
        << " stores blocks of " << block << " elements along dim " << dim
        << ", so the slice must start and end on a block boundary (a multiple of " << block << ")";
    const uint32_t type = t.type;
    // An expert's rows are whole quantisation blocks, so its data starts on a block. Its elements are
    // bounded by the file's size, unless a dim is 0: then the others never were (and the expert is empty).
    int64_t per_expert = 0;
    if (expert >= 0 && std::find(shape.begin(), shape.end(), 0) == shape.end()) {
      per_expert = 1;
      for (int64_t d : shape) per_expert *= d;
    }
    const uint8_t* base = file_->tensor_data(t) + (expert >= 0 ? ggml_type_nbytes(type, expert * per_expert) : 0);
    Tensor out;
    if (stored) {
      out = host_tensor(ggml_type_dtype(type), g.out_shape);
      copy_slice_chunks(g, out.dtype(), base, out.data());
    } else {
      out = host_tensor(DType::kF32, g.out_shape);
      convert_slice_chunks(g, out.ptr<float>(), [&](int64_t first, int64_t count, float* dst) {
        ggml_dequantize(type, base + ggml_type_nbytes(type, first), dst, count);
      });
    }
    // The bytes read are copied: their pages need not stay resident (the weights once, not twice).
    const size_t first = ggml_type_nbytes(type, g.chunk_begin(0));
    const size_t last = ggml_type_nbytes(type, g.chunk_begin(g.outer - 1) + g.chunk_elems());
    file_->release(base + first, last - first);
    return out;
  }

  struct Entry {
    const GgufTensorInfo* info;
    int64_t expert = -1;  // >= 0: this expert's [rows, cols] of the 3-D [E, rows, cols] tensor
  };

  // HF's shape of what the entry names: the tensor's, or one expert's matrix of it.
  static std::vector<int64_t> shape_of(const Entry& e) {
    std::vector<int64_t> shape = e.info->hf_shape();
    if (e.expert >= 0) shape.erase(shape.begin());
    return shape;
  }

  // A layer's experts of one role, stacked [E, rows, cols] (HF order), served under each expert's
  // HF name as the safetensors checkpoints store them; their biases (gpt-oss), [E, rows], likewise.
  void add_experts(const GgufTensorInfo& t, WeightRole role, int64_t layer, bool bias, const ModelConfig& config) {
    const int64_t n = config.moe.num_experts;
    if (bias) {
      MINIVLLM_CHECK(t.ne.size() == 2 && t.ne[1] == n && t.ne[0] > 0)
          << file_->path() << ": tensor '" << t.name << "' (" << weight_role_name(role) << " biases) must hold the "
          << n << " experts of " << config.arch_name << ".expert_count as GGUF ne [rows, " << n << "], got ne "
          << shape_string(t.ne);
      for (int64_t e = 0; e < n; ++e) {
        entries_[module_name(*config.arch, WeightFormat::kHuggingFace, role, layer, e) + ".bias"] = Entry{&t, e};
      }
      return;
    }
    MINIVLLM_CHECK(t.ne.size() == 3 && t.ne[2] == n && t.ne[0] > 0 && t.ne[1] > 0)
        << file_->path() << ": tensor '" << t.name << "' (" << weight_role_name(role) << ") must hold the "
        << n << " experts of " << config.arch_name << ".expert_count as GGUF ne [cols, rows, " << n
        << "] (cols, rows > 0), got ne " << shape_string(t.ne);
    for (int64_t e = 0; e < n; ++e) entries_[expert_weight_name(*config.arch, role, layer, e)] = Entry{&t, e};
  }
  std::shared_ptr<const GgufFile> file_;
  std::map<std::string, Entry> entries_;
};

}  // namespace

std::unique_ptr<WeightSource> make_gguf_weight_source(std::shared_ptr<const GgufFile> file, const ModelConfig& config) {
  std::unique_ptr<WeightSource> source = std::make_unique<GgufWeightSource>(std::move(file), config);
  // llama.cpp's rows rotate adjacent pairs (its converter permutes Llama's; GLM-4's and ERNIE's are so
  // already): moved to the half-split layout, as a Hugging Face checkpoint's are (loader/rope_rows.h).
  return config.traits().gguf_rope_permuted ? unpermute_interleaved_rope(std::move(source), config) : std::move(source);
}

}  // namespace minivllm
