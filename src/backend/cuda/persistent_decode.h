// The persistent decode kernel's launch parameters (persistent_decode.cu; the backend op in
// cuda_persistent.cc). Every pointer is device memory; the layers' weights are bf16 row-major.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace minivllm::cuda {

constexpr int kPdMaxLayers = 96;        // the layer table travels in the kernel's parameters
constexpr int kPdMaxBatch = 8;          // sequences: the mma's n (x is the A operand, 8 rows of 16)
constexpr int kPdConsumerWarps = 8;     // plus one producer warp
constexpr int kPdTileRows = 8;          // weight rows of one ring tile
constexpr int kPdMaxChunk = 1024;       // weight columns of one ring tile, at most
constexpr int kPdMinRingSlots = 4;      // fewer tiles in flight than this and the ring starves

struct PdLayer {
  const void* attn_norm;  // bf16 [H]
  const void* ffn_norm;   // bf16 [H]
  const void* q_norm;     // bf16 [hd] or null
  const void* k_norm;
  const void* qkv;        // [(nq + 2 nkv) hd, H]
  const void* o;          // [H, nq hd]
  const void* gate_up;    // [2 I, H]
  const void* down;       // [H, I]
  void* k_cache;          // bf16 [blocks, nkv, block_size, hd]
  void* v_cache;
};

struct PdParams {
  int num_layers = 0, batch = 0;
  int hidden = 0, inter = 0, num_q_heads = 0, num_kv_heads = 0, head_dim = 0;
  int block_size = 0, max_blocks = 0, activation = 0;
  int ring_slots = 0;
  int prefetch_kv = 1;  // attention items fetch their key and value rows into L2 first
  int chunk_hidden = 0, chunk_attn = 0, chunk_inter = 0;  // ring tile widths of the K = H, nq hd, I linears
  float eps = 0, scale = 0;
  const int32_t* positions = nullptr;
  const int32_t* context_lens = nullptr;
  const int32_t* slot_mapping = nullptr;
  const int32_t* block_tables = nullptr;  // [batch, max_blocks]
  const float* cos_sin = nullptr;         // [max_pos, hd]: a position's cos of each pair, then its sin
  float* residual = nullptr;              // [batch, H], in and out
  float* qkv = nullptr;                   // scratch [batch, (nq + 2 nkv) hd]
  void* attn_out = nullptr;               // bf16 scratch [batch, nq hd]
  void* act_out = nullptr;                // bf16 scratch [batch, I]
  unsigned* sync = nullptr;               // [2]: grid barrier arrivals, CTAs done; zero between launches
  unsigned* head_ready = nullptr;         // [layers, nq + 2 nkv]: qkv tiles done per head; zero between launches
  unsigned long long* trace = nullptr;    // profiling: [grid, trace_events] clock stamps, or null
  int trace_events = 0;
  PdLayer layers[kPdMaxLayers];
};

// The widest tile of K columns (a multiple of 128 dividing k, at most kPdMaxChunk), or 0 when k is
// not a multiple of 128.
int pd_chunk(int64_t k);
// Shared memory of a launch with `ring_slots` tiles in flight.
size_t pd_smem_bytes(int batch, int64_t widest_k, int head_dim, int group, int ring_slots);
// The ring slots that fit next to the rest (0 when fewer than kPdMinRingSlots would).
int pd_ring_slots(int batch, int64_t widest_k, int head_dim, int group);
// Whether a kernel is built for this head_dim and GQA group.
bool pd_supports(int head_dim, int group);
// One cooperative launch of grid CTAs (one per SM), graph-capturable.
void launch_persistent_decode(const PdParams& p, int grid, cudaStream_t stream);

}  // namespace minivllm::cuda
