// config.json's quantization_config -> WeightQuantization. The keys follow vLLM's Fp8Config
// ("fp8") and compressed-tensors' QuantizationConfig / QuantizationArgs ("compressed-tensors").
#include "loader/quantization_config.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "common/check.h"

namespace minivllm {
namespace {

using nlohmann::json;

const json* member(const json& obj, const char* key) {
  return obj.contains(key) && !obj.at(key).is_null() ? &obj.at(key) : nullptr;
}

std::string string_or(const json& obj, const char* key, const std::string& fallback, const std::string& where) {
  const json* v = member(obj, key);
  if (v == nullptr) return fallback;
  MINIVLLM_CHECK(v->is_string()) << where << ": key " << key << " must be a string, got " << v->dump();
  return v->get<std::string>();
}

std::vector<std::string> string_list(const json& obj, const char* key, const std::string& where) {
  std::vector<std::string> out;
  const json* v = member(obj, key);
  if (v == nullptr) return out;
  MINIVLLM_CHECK(v->is_array()) << where << ": key " << key << " must be a list of module names, got " << v->dump();
  for (const json& s : *v) {
    MINIVLLM_CHECK(s.is_string()) << where << ": key " << key << " must hold strings, got " << v->dump();
    out.push_back(s.get<std::string>());
  }
  return out;
}

// [rows, cols] of positive integers.
void read_block(const json& v, const char* key, const std::string& where, WeightQuantization* q) {
  MINIVLLM_CHECK(v.is_array() && v.size() == 2 && v[0].is_number_integer() && v[1].is_number_integer() &&
                 v[0].get<int64_t>() > 0 && v[1].get<int64_t>() > 0)
      << where << ": key " << key << " must be [rows, cols] of positive integers, got " << v.dump();
  q->block_rows = v[0].get<int64_t>();
  q->block_cols = v[1].get<int64_t>();
}

// quant_method "fp8": with weight_block_size, e4m3 weights and one weight_scale_inv (a multiplier,
// despite its name) per block, dynamic activations; without, one weight_scale per tensor.
WeightQuantization parse_fp8(const json& qc, const std::string& where) {
  WeightQuantization q;
  q.method = QuantMethod::kFp8;
  q.method_name = "fp8";
  const std::string fmt = string_or(qc, "fmt", "e4m3", where);
  MINIVLLM_CHECK(fmt == "e4m3") << where << ": unsupported fmt \"" << fmt << "\" (minivllm reads e4m3 FP8 weights)";
  const std::string scheme = string_or(qc, "activation_scheme", "dynamic", where);
  MINIVLLM_CHECK(scheme == "dynamic" || scheme == "static")
      << where << ": unsupported activation_scheme \"" << scheme << "\" (dynamic or static)";
  q.static_input_scale = scheme == "static";
  if (const json* block = member(qc, "weight_block_size")) {
    read_block(*block, "weight_block_size", where, &q);
    q.scale_suffix = "weight_scale_inv";
    MINIVLLM_CHECK(!q.static_input_scale)
        << where << ": unsupported activation_scheme \"static\" with weight_block_size (block-scaled FP8 "
        << "checkpoints quantize activations dynamically)";
  } else {
    q.scale_suffix = "weight_scale";  // per tensor: block {0, 0}
  }
  for (const char* key : {"ignored_layers", "modules_to_not_convert"}) {
    for (std::string& m : string_list(qc, key, where)) q.ignore.push_back(std::move(m));
  }
  return q;
}

// One group's `weights` arguments: FP8 (type float, 8 bits, symmetric, static), per channel,
// tensor or block.
void read_ct_weights(const json& w, const std::string& where, WeightQuantization* q) {
  MINIVLLM_CHECK(w.is_object()) << where << ": weights must be an object, got " << w.dump();
  const std::string type = string_or(w, "type", "int", where);
  const json* bits = member(w, "num_bits");
  MINIVLLM_CHECK(type == "float" && bits != nullptr && *bits == 8)
      << where << ": unsupported weights " << w.dump()
      << " (minivllm reads compressed-tensors FP8 weights: type float, num_bits 8)";
  const json* symmetric = member(w, "symmetric");
  MINIVLLM_CHECK(symmetric == nullptr || *symmetric == true) << where << ": unsupported asymmetric FP8 weights";
  const json* dynamic = member(w, "dynamic");
  MINIVLLM_CHECK(dynamic == nullptr || *dynamic == false) << where << ": unsupported dynamic weight scales";
  const std::string strategy = string_or(w, "strategy", "tensor", where);
  if (strategy == "channel") {
    q->block_rows = 1;
    q->block_cols = 0;
  } else if (strategy == "tensor") {
    q->block_rows = 0;
    q->block_cols = 0;
  } else if (strategy == "block") {
    const json* block = member(w, "block_structure");
    MINIVLLM_CHECK(block != nullptr) << where << ": weights strategy \"block\" without block_structure";
    read_block(*block, "block_structure", where, q);
  } else {
    MINIVLLM_FAIL() << where << ": unsupported weights strategy \"" << strategy
                    << "\" (FP8 weights per channel, tensor or block)";
  }
}

// input_activations: none (weights only), FP8 dynamic (per token or group) or static (input_scale).
void read_ct_activations(const json* a, const std::string& where, WeightQuantization* q) {
  if (a == nullptr) return;
  MINIVLLM_CHECK(a->is_object()) << where << ": input_activations must be an object, got " << a->dump();
  const std::string type = string_or(*a, "type", "int", where);
  const json* bits = member(*a, "num_bits");
  MINIVLLM_CHECK(type == "float" && bits != nullptr && *bits == 8)
      << where << ": unsupported input_activations " << a->dump() << " (FP8 activations only: type float, num_bits 8)";
  const json* dynamic = member(*a, "dynamic");
  MINIVLLM_CHECK(dynamic == nullptr || dynamic->is_boolean())
      << where << ": unsupported input_activations dynamic " << dynamic->dump() << " (true or false)";
  q->static_input_scale = dynamic == nullptr || !dynamic->get<bool>();
}

WeightQuantization parse_compressed_tensors(const json& qc, const std::string& where) {
  WeightQuantization q;
  q.method = QuantMethod::kCompressedTensors;
  q.method_name = "compressed-tensors";
  const std::string format = string_or(qc, "format", "", where);
  MINIVLLM_CHECK(format == "float-quantized") << where << ": unsupported compressed-tensors format \"" << format
                                              << "\" (minivllm reads FP8 checkpoints: format float-quantized)";
  MINIVLLM_CHECK(member(qc, "kv_cache_scheme") == nullptr)
      << where << ": unsupported kv_cache_scheme " << qc.at("kv_cache_scheme").dump()
      << " (the KV cache's quantization is the engine's kv_cache_dtype key)";
  const json* groups = member(qc, "config_groups");
  MINIVLLM_CHECK(groups != nullptr && groups->is_object() && !groups->empty())
      << where << ": compressed-tensors quantization_config needs config_groups";
  bool first = true;
  for (const auto& [name, g] : groups->items()) {
    const std::string gwhere = where + ": config_groups." + name;
    MINIVLLM_CHECK(g.is_object()) << gwhere << " must be an object";
    const json* w = member(g, "weights");
    MINIVLLM_CHECK(w != nullptr) << gwhere << " has no weights";
    WeightQuantization gq = q;
    read_ct_weights(*w, gwhere, &gq);
    read_ct_activations(member(g, "input_activations"), gwhere, &gq);
    MINIVLLM_CHECK(member(g, "output_activations") == nullptr)
        << gwhere << ": unsupported output_activations " << g.at("output_activations").dump();
    // One scheme for every group: the loader finds a weight's scale by name, not by group.
    MINIVLLM_CHECK(first || (gq.block_rows == q.block_rows && gq.block_cols == q.block_cols &&
                             gq.static_input_scale == q.static_input_scale))
        << gwhere << ": config groups with different FP8 schemes are not supported (" << gq.describe() << " vs "
        << q.describe() << ")";
    q = gq;
    first = false;
  }
  q.scale_suffix = "weight_scale";
  q.ignore = string_list(qc, "ignore", where);
  return q;
}

}  // namespace

std::string WeightQuantization::describe() const {
  if (method == QuantMethod::kMxfp4) return "mxfp4 (the experts' MXFP4 blocks, kept)";
  if (!quantized()) return "none";
  std::ostringstream os;
  os << method_name << " (e4m3 weights, ";
  if (block_rows == 0 && block_cols == 0) {
    os << "a scale per tensor";
  } else if (block_rows == 1 && block_cols == 0) {
    os << "a scale per output channel";
  } else {
    os << block_rows << "x" << block_cols << " blocks";
  }
  os << ", " << (static_input_scale ? "static" : "dynamic") << " activations)";
  return os.str();
}

WeightQuantization parse_quantization_config(const json& qc, const std::string& path) {
  MINIVLLM_CHECK(qc.is_object()) << path << ": key quantization_config must be an object, got " << qc.dump();
  const std::string method = string_or(qc, "quant_method", "", path);
  const std::string where = path + ": quantization_config";
  if (method == "fp8") return parse_fp8(qc, where);
  if (method == "compressed-tensors") return parse_compressed_tensors(qc, where);
  if (method == "mxfp4") {
    WeightQuantization q;
    q.method = QuantMethod::kMxfp4;
    q.method_name = method;
    q.ignore = string_list(qc, "modules_to_not_convert", where);
    return q;
  }
  MINIVLLM_FAIL() << path << ": unsupported quantization_config quant_method \"" << method
                  << "\" (minivllm reads FP8 checkpoints: quant_method fp8 or compressed-tensors; and gpt-oss's mxfp4)";
}

}  // namespace minivllm
