// MT19937 as CPython's Modules/_randommodule.c writes it (init_genrand, init_by_array,
// genrand_uint32) plus the pieces of Lib/random.py that the workload uses.
#include "cli/py_random.h"

#include <algorithm>
#include <bit>
#include <cstdlib>

#include "common/check.h"

namespace minivllm {

PyRandom::PyRandom(int64_t seed_value) { seed(seed_value); }

void PyRandom::init_genrand(uint32_t s) {
  mt_[0] = s;
  for (int i = 1; i < kN; ++i) {
    mt_[i] = 1812433253u * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) + static_cast<uint32_t>(i);
  }
  mti_ = kN;
}

void PyRandom::init_by_array(const std::vector<uint32_t>& key) {
  init_genrand(19650218u);
  const size_t len = key.size();
  size_t i = 1, j = 0;
  for (size_t k = std::max<size_t>(kN, len); k > 0; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525u)) + key[j] + static_cast<uint32_t>(j);
    ++i;
    ++j;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
    if (j >= len) j = 0;
  }
  for (size_t k = kN - 1; k > 0; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941u)) - static_cast<uint32_t>(i);
    ++i;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
  }
  mt_[0] = 0x80000000u;  // MSB is 1, assuring a non-zero initial array
}

void PyRandom::seed(int64_t n) {
  // |n| without overflow for INT64_MIN.
  uint64_t a = n < 0 ? ~static_cast<uint64_t>(n) + 1 : static_cast<uint64_t>(n);
  std::vector<uint32_t> key;
  while (a != 0) {
    key.push_back(static_cast<uint32_t>(a & 0xffffffffu));
    a >>= 32;
  }
  if (key.empty()) key.push_back(0);
  init_by_array(key);
}

uint32_t PyRandom::genrand_uint32() {
  static constexpr uint32_t kMatrixA = 0x9908b0dfu, kUpper = 0x80000000u, kLower = 0x7fffffffu;
  static constexpr int kM = 397;
  if (mti_ >= kN) {
    int kk = 0;
    for (; kk < kN - kM; ++kk) {
      const uint32_t y = (mt_[kk] & kUpper) | (mt_[kk + 1] & kLower);
      mt_[kk] = mt_[kk + kM] ^ (y >> 1) ^ ((y & 1u) ? kMatrixA : 0u);
    }
    for (; kk < kN - 1; ++kk) {
      const uint32_t y = (mt_[kk] & kUpper) | (mt_[kk + 1] & kLower);
      mt_[kk] = mt_[kk + (kM - kN)] ^ (y >> 1) ^ ((y & 1u) ? kMatrixA : 0u);
    }
    const uint32_t y = (mt_[kN - 1] & kUpper) | (mt_[0] & kLower);
    mt_[kN - 1] = mt_[kM - 1] ^ (y >> 1) ^ ((y & 1u) ? kMatrixA : 0u);
    mti_ = 0;
  }
  uint32_t y = mt_[mti_++];
  y ^= (y >> 11);
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= (y >> 18);
  return y;
}

uint64_t PyRandom::getrandbits(int k) {
  MINIVLLM_CHECK(k >= 0 && k <= 64) << "getrandbits takes 0..64 bits here, got " << k;
  if (k == 0) return 0;
  if (k <= 32) return genrand_uint32() >> (32 - k);
  // CPython fills 32-bit words from the least significant one; the last word keeps its top bits.
  const uint64_t low = genrand_uint32();
  const uint64_t high = genrand_uint32() >> (64 - k);
  return low | (high << 32);
}

uint64_t PyRandom::randbelow(uint64_t n) {
  MINIVLLM_CHECK(n >= 1) << "randbelow needs n >= 1, got " << n;
  const int k = std::bit_width(n);
  uint64_t r = getrandbits(k);
  while (r >= n) r = getrandbits(k);
  return r;
}

int64_t PyRandom::randint(int64_t a, int64_t b) {
  MINIVLLM_CHECK(a <= b) << "randint needs a <= b, got (" << a << ", " << b << ")";
  const uint64_t width = static_cast<uint64_t>(b) - static_cast<uint64_t>(a) + 1;
  return a + static_cast<int64_t>(randbelow(width));
}

}  // namespace minivllm
