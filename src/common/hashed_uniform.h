// The values of dummy weights (loader/dummy_weights.h): element i of a tensor is a uniform draw
// hashed from (the tensor's key, i), so any part of the tensor can be made alone, on the host or on
// a device, and every part of it agrees with the whole. Bit-identical on both: the hash is integer
// work, and the scaling is exact up to one final rounding (below).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define MINIVLLM_HOST_DEVICE __host__ __device__
#else
#define MINIVLLM_HOST_DEVICE
#endif

namespace minivllm {

struct HashedUniform {
  uint64_t key = 0;  // the seed mixed with the tensor's name
  float low = 0.0f;  // values in [low, low + step * 2^24)
  float step = 0.0f;
};

// Dummy FP8 weights (an FP8 checkpoint's config): element i is stored as the e4m3 code of
// hashed_uniform_value(values, i) / scale (rounded to nearest, saturating), one scale for every
// block of block_rows x block_cols (0: the whole dimension), as the config's format lays them out.
struct HashedFp8 {
  HashedUniform values;
  float scale = 0.0f;
  int64_t block_rows = 0;
  int64_t block_cols = 0;
};

// SplitMix64's finaliser: a bijection of 64-bit words whose outputs look independent for
// consecutive inputs, so element i needs no state from element i - 1.
MINIVLLM_HOST_DEVICE inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// In double: step * u (24 x 24 bits) is exact there, so a fused multiply-add, which a compiler may
// or may not form on either side, cannot change the one rounding that follows.
MINIVLLM_HOST_DEVICE inline float hashed_uniform_value(const HashedUniform& h, uint64_t index) {
  const double u = static_cast<double>(mix64(h.key + index) >> 40);  // 24 uniform bits
  return static_cast<float>(static_cast<double>(h.low) + static_cast<double>(h.step) * u);
}

}  // namespace minivllm
