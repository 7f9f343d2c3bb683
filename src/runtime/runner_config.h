// The runtime's share of the engine config (seeds: the ModelRunner's keys).
#pragma once

#include <cstdint>
#include <string>

namespace minivllm {

enum class BackendKind { kAuto, kCpu, kCuda };

struct RunnerConfig {
  BackendKind backend = BackendKind::kAuto;
  int device_index = 0;
  int num_threads = 0;  // CPU threads, 0 = all cores
  int max_num_seqs = 512;
  int max_num_batched_tokens = 16384;
  int max_model_length = 4096;
  int block_size = 256;
  int num_kvcache_blocks = -1;  // -1: sized from memory
  float gpu_memory_utilization = 0.9f;
  bool enforce_eager = false;
  int world_size = 1;  // tensor-parallel ranks: rank r runs on device device_index + r
};

}  // namespace minivllm
