// The layout of one rank's CustomAllReduce buffer, shared by the host side and the kernel:
// [half 0: max_bytes][half 1: max_bytes][flags: uint32 [kMaxBlocks][kMaxRanks]].
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cuda/custom_all_reduce.h"

namespace minivllm::cuda {

constexpr size_t kCustomArFlagBytes = sizeof(uint32_t) * CustomAllReduce::kMaxBlocks * CustomAllReduce::kMaxRanks;
constexpr size_t custom_ar_buffer_bytes(size_t max_bytes) { return 2 * max_bytes + kCustomArFlagBytes; }

}  // namespace minivllm::cuda
