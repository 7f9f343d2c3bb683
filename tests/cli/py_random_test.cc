// PyRandom against CPython 3.11's random module (values printed by python3 on this machine) and
// the bench workload's totals, which tools/make_bench_workload.py also checks.
#include "cli/bench_workload.h"
#include "cli/py_random.h"

#include <gtest/gtest.h>

namespace minivllm {
namespace {

TEST(PyRandom, FirstRandintsAfterSeedZero) {
  // python3 -c "import random; random.seed(0); print([random.randint(100,1024) for _ in range(5)])"
  PyRandom rng(0);
  const std::vector<int64_t> expected = {964, 494, 876, 1011, 530};
  for (int64_t e : expected) EXPECT_EQ(rng.randint(100, 1024), e);
}

TEST(PyRandom, GetrandbitsAfterSeedZero) {
  // random.seed(0); getrandbits(32) x3 -> 3626764237 1654615998 3255389356; then seed(0),
  // getrandbits(32), getrandbits(64), getrandbits(1) -> 3626764237 13981790821421117374 1.
  PyRandom rng(0);
  EXPECT_EQ(rng.getrandbits(32), 3626764237u);
  EXPECT_EQ(rng.getrandbits(32), 1654615998u);
  EXPECT_EQ(rng.getrandbits(32), 3255389356u);
  rng.seed(0);
  EXPECT_EQ(rng.getrandbits(32), 3626764237u);
  EXPECT_EQ(rng.getrandbits(64), 13981790821421117374ull);
  EXPECT_EQ(rng.getrandbits(1), 1u);
}

TEST(PyRandom, OtherSeeds) {
  // random.seed(42): [randint(0, 10000) for _ in range(3)] -> [1824, 409, 4506];
  // random.seed(-42) is seed(42); random.seed(2**40 + 7): randint(1, 6) -> 5.
  PyRandom rng(42);
  EXPECT_EQ(rng.randint(0, 10000), 1824);
  EXPECT_EQ(rng.randint(0, 10000), 409);
  EXPECT_EQ(rng.randint(0, 10000), 4506);
  rng.seed(-42);
  EXPECT_EQ(rng.randint(0, 10000), 1824);
  rng.seed((int64_t{1} << 40) + 7);
  EXPECT_EQ(rng.randint(1, 6), 5);
}

TEST(BenchWorkload, SeedsWorkloadMatchesBenchPy) {
  const cli::BenchWorkload w = cli::make_seeds_workload(256);
  ASSERT_EQ(w.prompt_token_ids.size(), 256u);
  ASSERT_EQ(w.max_tokens.size(), 256u);
  EXPECT_EQ(w.num_prompt_tokens(), 142827);
  EXPECT_EQ(w.num_output_tokens(), 133966);
  // From python3: len(p[0]) 964, p[0][:5], max_tokens[:3], p[255][-3:].
  EXPECT_EQ(w.prompt_token_ids[0].size(), 964u);
  EXPECT_EQ(std::vector<int32_t>(w.prompt_token_ids[0].begin(), w.prompt_token_ids[0].begin() + 5),
            (std::vector<int32_t>{6311, 6890, 663, 4242, 8376}));
  EXPECT_EQ(std::vector<int>(w.max_tokens.begin(), w.max_tokens.begin() + 3), (std::vector<int>{845, 312, 607}));
  EXPECT_EQ(std::vector<int32_t>(w.prompt_token_ids[255].end() - 3, w.prompt_token_ids[255].end()),
            (std::vector<int32_t>{6642, 9046, 1958}));
}

TEST(BenchWorkload, TruncateKeepsTheFirstSequences) {
  cli::BenchWorkload w = cli::make_seeds_workload(256);
  w.truncate(4);
  // sum(map(len, p[:4])) = 2680, sum(m[:4]) = 2607 with the 256-sequence draw.
  EXPECT_EQ(w.num_prompt_tokens(), 2680);
  EXPECT_EQ(w.num_output_tokens(), 2607);
}

}  // namespace
}  // namespace minivllm
