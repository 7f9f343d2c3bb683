// encode/decode are const and shared between request threads (the BPE cache is locked inside):
// many threads encoding the reference texts at once must all get the reference ids.
#include <gtest/gtest.h>

#include <thread>

#include "golden_data.h"

namespace minivllm::test {
namespace {

TEST(TokenizerThreads, ConcurrentEncodeMatchesGoldens) {
  const Tokenizer& t = qwen3();
  const auto& texts = goldens().at("texts");
  std::vector<std::thread> threads;
  std::vector<int> failures(8, 0);
  for (int k = 0; k < 8; ++k) {
    threads.emplace_back([&, k] {
      for (int round = 0; round < 50; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          const size_t j = (i + k * 5) % texts.size();
          if (t.encode(texts[j].get<std::string>(), false) != golden_ids("qwen3", "ids", j)) ++failures[k];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int k = 0; k < 8; ++k) EXPECT_EQ(failures[k], 0) << "thread " << k;
}

}  // namespace
}  // namespace minivllm::test
