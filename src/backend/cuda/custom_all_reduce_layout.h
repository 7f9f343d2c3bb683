// The layout of one rank's CustomAllReduce buffer, shared by the host side and the kernel:
// [half 0: world slots of max_bytes][half 1: the same][flags: uint32 [kMaxBlocks][kMaxRanks]].
// Slot q of a half holds what rank q pushed (the pull kernel uses slot 0 of each rank's own).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cuda/custom_all_reduce.h"

namespace minivllm::cuda {

constexpr size_t kCustomArFlagBytes = sizeof(uint32_t) * CustomAllReduce::kMaxBlocks * CustomAllReduce::kMaxRanks;
// Then, with the Lamport kernel, three buffers of world slots (custom_ar_lamport_base on).
constexpr size_t custom_ar_lamport_base(size_t max_bytes, int world) {
  return 2 * static_cast<size_t>(world) * max_bytes + kCustomArFlagBytes;
}
constexpr size_t custom_ar_buffer_bytes(size_t max_bytes, int world, bool lamport) {
  return custom_ar_lamport_base(max_bytes, world) + (lamport ? 3 * static_cast<size_t>(world) * max_bytes : 0);
}

}  // namespace minivllm::cuda
