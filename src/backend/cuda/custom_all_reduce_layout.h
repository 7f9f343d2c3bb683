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
constexpr size_t custom_ar_lamport_bytes(size_t max_bytes, int world, bool lamport) {
  return lamport ? 3 * static_cast<size_t>(world) * max_bytes : 0;
}
// Then the stamped gather's two halves of world slots, each slot a 64-bit (word, epoch) pair per
// 32-bit word of kStampedMaxBytes; zero-filled (epoch 0 is never a call's).
constexpr size_t kCustomArStampedSlotBytes = 2 * CustomAllReduce::kStampedMaxBytes;
constexpr size_t custom_ar_stamped_base(size_t max_bytes, int world, bool lamport) {
  return custom_ar_lamport_base(max_bytes, world) + custom_ar_lamport_bytes(max_bytes, world, lamport);
}
constexpr size_t custom_ar_buffer_bytes(size_t max_bytes, int world, bool lamport) {
  return custom_ar_stamped_base(max_bytes, world, lamport) + 2 * static_cast<size_t>(world) * kCustomArStampedSlotBytes;
}

}  // namespace minivllm::cuda
