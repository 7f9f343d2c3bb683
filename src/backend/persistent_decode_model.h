// What the persistent decode kernel (issue 50) reads of a dense model: every layer's weights and
// the shapes, as the model holds them. The model fills it once; the backend checks it, allocates
// its scratch and keeps what it needs in `scratch` (Backend::prepare_persistent_decode), then runs
// every layer of a small decode batch in one launch (Backend::persistent_decode).
#pragma once

#include <cstdint>
#include <vector>

#include "common/activation.h"
#include "common/tensor.h"

namespace minivllm {

// Trace slots a CTA's row holds (PersistentDecodeModel::trace): one stamp at the start, 12 a layer
// for up to 96 layers, and 16 at the end for one attention item's parts.
constexpr int64_t kPersistentTraceEvents = 1 + 12 * 96 + 16;

struct PersistentDecodeLayer {
  Tensor attn_norm, ffn_norm;  // [H]
  Tensor q_norm, k_norm;       // [hd], or empty (no q/k norms)
  Tensor qkv;                  // [(nq + 2 nkv) hd, H]: q rows, then k, then v
  Tensor o;                    // [H, nq hd]
  Tensor gate_up;              // [2 I, H]: gate rows, then up
  Tensor down;                 // [H, I]
};

struct PersistentDecodeModel {
  std::vector<PersistentDecodeLayer> layers;
  Tensor cos_sin;  // f32 [max_positions, head_dim]: the rope table (rotary over the whole head)
  int64_t hidden = 0, inter = 0;
  int num_q_heads = 0, num_kv_heads = 0, head_dim = 0;
  float eps = 0, scale = 0;  // RMSNorm epsilon; attention's softmax scale
  Activation activation = Activation::kSilu;
  // Profiling, optional: u64 [CTAs, kPersistentTraceEvents], each CTA's clock (ns) at each phase
  // boundary of the step (the CUDA kernel's consumer phases), or empty.
  Tensor trace;
  // Set by prepare_persistent_decode: the backend's scratch, and the largest batch it takes.
  Tensor scratch;
  int max_batch = 0;
};

}  // namespace minivllm
