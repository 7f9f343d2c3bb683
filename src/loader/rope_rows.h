// Rotary row layouts of q/k weights. The engine's kernels rotate dims (j, j + r/2) of each head's
// first r (transformers' rotate_half: Llama, Qwen). llama.cpp's converter permutes Llama's rows
// into adjacent pairs (2j, 2j + 1), and GLM-4 rotates adjacent pairs in its own checkpoints: the
// loaders move such rows back at load, so that every family runs the one rope.
#pragma once

#include <cstdint>
#include <memory>

#include "common/tensor.h"
#include "loader/weight_source.h"

namespace minivllm {

// A [rows, ...] q or k weight (or bias, or per-row scale) of n_head heads of D = rows / n_head rows,
// whose first `rotary` rows a head (0: all D) rotate: interleaved[h*D + 2j + i] = half_split[h*D +
// i*r/2 + j] for i in {0, 1}, j < r/2; a head's rows from r on stay where they are.
// to_interleaved: half-split -> interleaved (convert_hf_to_gguf.py's permute), else its inverse.
// Rows are moved whole, so any dtype works (a quantised row is a run of whole blocks).
Tensor move_rope_rows(const Tensor& w, int64_t n_head, bool to_interleaved, int64_t rotary = 0);

// `source` with its q_proj / k_proj weights and biases (rows rotating adjacent pairs) served
// half-split, whole or as shards of whole heads: a Hugging Face checkpoint of a row with
// hf_rope_interleaved (GLM-4, ERNIE 4.5), and the GGUF of a row with gguf_rope_permuted.
std::unique_ptr<WeightSource> unpermute_interleaved_rope(std::unique_ptr<WeightSource> source, const ModelConfig& config);

}  // namespace minivllm
