// WeightSource: a checkpoint's tensors by Hugging Face name, whatever the file format.
// Safetensors (one file or shards) and GGUF both implement it; the model asks for
// "model.layers.3.self_attn.q_proj.weight" and gets an fp32 host tensor in HF layout
// (GGUF's interleaved-RoPE q/k rows are permuted back to the half-split layout).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/hashed_uniform.h"
#include "common/tensor.h"
#include "loader/model_config.h"

namespace minivllm {

// A tensor's bytes as the checkpoint stores them and its shape, for a dtype no reader converts (U8:
// the blocks and exponents of gpt-oss's MXFP4 experts); the bytes live as long as the source.
struct RawTensor {
  const uint8_t* data = nullptr;
  std::vector<int64_t> shape;
};

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual bool has(const std::string& name) const = 0;
  // fp32 host tensor; throws an Error naming the tensor and the file when it is missing,
  // truncated, or not of `expected_shape` (when given).
  virtual Tensor get_f32(const std::string& name, const std::vector<int64_t>& expected_shape = {}) const = 0;
  // Elements [start, start + length) along `dim` (0: rows, 1: columns of a 2-D tensor) of the
  // tensor `name` of `full_shape`, as an fp32 host tensor: a tensor-parallel rank's shard, read
  // straight from the memory map (only the shard is converted; the whole tensor is never built).
  // Errors name the tensor, the file and the slice. GGUF: a column slice must start and end on a
  // quantisation block; a row slice of a rope-permuted q/k tensor must cover whole heads.
  virtual Tensor get_f32_slice(const std::string& name, const std::vector<int64_t>& full_shape, int dim, int64_t start,
                               int64_t length) const = 0;
  // The dtype `name` is stored in (f32 for a source that converts everything); throws like get_f32.
  virtual DType stored_dtype(const std::string& name) const { return DType::kF32; }
  // The same slice in the checkpoint's own format (f32, f16, bf16, or the GGUF block types
  // q8_0 / q4_0 / q4_1, whose blocks run along the last dim): for a backend that computes on the
  // stored format (Backend::keeps_weight_dtype). Same checks and messages as get_f32_slice. The
  // default converts to f32 (a source that stores nothing else).
  virtual Tensor get_stored_slice(const std::string& name, const std::vector<int64_t>& full_shape, int dim,
                                  int64_t start, int64_t length) const {
    return get_f32_slice(name, full_shape, dim, start, length);
  }
  // Where the tensor's values are a hash of their index (dummy weights), the recipe: a backend can
  // make any shard of it in place (Backend::fill_hashed_uniform) instead of converting and copying
  // it from the host. nullopt for a checkpoint's real tensors.
  virtual std::optional<HashedUniform> hashed_uniform(const std::string& name) const { return std::nullopt; }
  // The same for a weight stored as FP8 codes made from such values (dummy weights of an FP8
  // config): a backend can make a shard's codes in place (Backend::fill_hashed_e4m3).
  virtual std::optional<HashedFp8> hashed_fp8(const std::string& name) const { return std::nullopt; }
  // The stored bytes of `name`, whose checkpoint dtype must be `dtype_name` ("U8"), for a source
  // that decodes them itself; throws an Error naming the tensor otherwise (and for a source of
  // converted tensors only, the default).
  virtual RawTensor raw_tensor(const std::string& name, const std::string& dtype_name) const {
    MINIVLLM_FAIL() << "tensor '" << name << "' in " << describe() << ": its " << dtype_name
                    << " bytes cannot be read as stored";
  }
  virtual std::vector<std::string> names() const = 0;
  virtual std::string describe() const = 0;  // the path, for messages
};

// <dir>/model.safetensors or <dir>/model.safetensors.index.json with its shards, memory-mapped. A
// base model's checkpoint (its tensors without the causal LM's "model." prefix, as embedding models
// such as Qwen3-Embedding ship) is served under the prefixed names.
std::unique_ptr<WeightSource> open_safetensors_dir(const std::string& dir);

}  // namespace minivllm
