// PyRandom: CPython's `random` module, bit for bit, for the calls the benchmark workload makes
// (seed with an int, getrandbits, randint). nano-vllm's bench.py draws its workload from Python's
// random.seed(0); reproducing the generator exactly gives the same prompts and output lengths.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace minivllm {

class PyRandom {
 public:
  // random.seed(n) for an int n: the key is |n| as 32-bit words, least significant first
  // (for 0 a single word 0), fed to MT19937's init_by_array.
  explicit PyRandom(int64_t seed = 0);
  void seed(int64_t n);

  // random.getrandbits(k), 0 <= k <= 64.
  uint64_t getrandbits(int k);
  // random._randbelow(n): rejection sampling on getrandbits(n.bit_length()); n >= 1.
  uint64_t randbelow(uint64_t n);
  // random.randint(a, b): a + _randbelow(b - a + 1); a <= b.
  int64_t randint(int64_t a, int64_t b);

 private:
  uint32_t genrand_uint32();
  void init_genrand(uint32_t s);
  void init_by_array(const std::vector<uint32_t>& key);

  static constexpr int kN = 624;
  std::array<uint32_t, kN> mt_{};
  int mti_ = kN + 1;
};

}  // namespace minivllm
