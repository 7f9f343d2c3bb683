// A small 64-bit hash in the MurmurHash3 style (multiply, rotate, xor, final avalanche). Hash hits are
// always confirmed by comparing tokens, so it only needs to be well mixed, not cryptographic.
#include "engine/block_hash.h"

namespace minivllm {

namespace {
constexpr uint64_t kC1 = 0x87c37b91114253d5ULL;
constexpr uint64_t kC2 = 0x4cf5ad432745937fULL;

uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

uint64_t fmix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

uint64_t mix_in(uint64_t h, uint64_t k) {
  k *= kC1;
  k = rotl(k, 31);
  k *= kC2;
  h ^= k;
  return rotl(h, 27) * 5 + 0x52dce729;
}
}  // namespace

uint64_t hash_block_tokens(std::optional<uint64_t> prefix, const std::vector<int32_t>& token_ids) {
  // Distinct seeds keep "no prefix" apart from any prefix value.
  uint64_t h = prefix ? mix_in(0x9e3779b97f4a7c15ULL, *prefix) : 0x2545f4914f6cdd1dULL;
  for (int32_t token : token_ids) h = mix_in(h, static_cast<uint32_t>(token));
  h ^= static_cast<uint64_t>(token_ids.size());
  return fmix64(h);
}

}  // namespace minivllm
