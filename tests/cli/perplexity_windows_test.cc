// perplexity_windows (src/cli/perplexity.h): which tokens each window sees and scores.
#include <gtest/gtest.h>

#include <vector>

#include "cli/perplexity.h"
#include "common/check.h"

namespace minivllm::cli {
namespace {

struct Expected {
  int64_t begin, end, first_scored;
};

void expect_windows(int64_t n, int64_t window, int64_t stride, const std::vector<Expected>& want) {
  const std::vector<PerplexityWindow> got = perplexity_windows(n, window, stride);
  ASSERT_EQ(got.size(), want.size()) << "n " << n << " window " << window << " stride " << stride;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].begin, want[i].begin) << "window " << i;
    EXPECT_EQ(got[i].end, want[i].end) << "window " << i;
    EXPECT_EQ(got[i].first_scored, want[i].first_scored) << "window " << i;
  }
}

TEST(PerplexityWindows, DisjointWindowsLeaveEachWindowsFirstTokenAsContext) {
  expect_windows(10, 4, 4, {{0, 4, 1}, {4, 8, 5}, {8, 10, 9}});
}

TEST(PerplexityWindows, OverlappingWindowsScoreOnlyWhatIsNew) {
  expect_windows(10, 4, 2, {{0, 4, 1}, {2, 6, 4}, {4, 8, 6}, {6, 10, 8}});
  // The last window reaches the end: no further window starts.
  expect_windows(9, 4, 2, {{0, 4, 1}, {2, 6, 4}, {4, 8, 6}, {6, 9, 8}});
}

TEST(PerplexityWindows, ATextShorterThanTheWindowIsOneWindow) { expect_windows(3, 8, 4, {{0, 3, 1}}); }

// For every shape: each token is scored at most once, with context before it in its window; all
// but the first are scored when the windows overlap.
TEST(PerplexityWindows, EveryTokenOnceWithContext) {
  for (int64_t n = 2; n <= 40; ++n) {
    for (int64_t window = 2; window <= 12; ++window) {
      for (int64_t stride = 1; stride <= window; ++stride) {
        std::vector<int> times(static_cast<size_t>(n), 0);
        for (const PerplexityWindow& w : perplexity_windows(n, window, stride)) {
          ASSERT_GT(w.first_scored, w.begin);
          ASSERT_LE(w.end - w.begin, window);
          for (int64_t p = w.first_scored; p < w.end; ++p) ++times[static_cast<size_t>(p)];
        }
        EXPECT_EQ(times[0], 0);
        for (int64_t p = 1; p < n; ++p) {
          ASSERT_LE(times[static_cast<size_t>(p)], 1) << n << " " << window << " " << stride << " token " << p;
          if (stride < window) {
            ASSERT_EQ(times[static_cast<size_t>(p)], 1) << n << " " << window << " " << stride;
          }
        }
      }
    }
  }
}

TEST(PerplexityWindows, BadArgumentsAreNamed) {
  auto message = [](int64_t n, int64_t window, int64_t stride) {
    try {
      perplexity_windows(n, window, stride);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(1, 4, 2).find("at least 2 tokens"), std::string::npos);
  EXPECT_NE(message(10, 1, 1).find("window must hold at least 2"), std::string::npos);
  EXPECT_NE(message(10, 4, 0).find("stride must be in [1, window = 4]"), std::string::npos);
  EXPECT_NE(message(10, 4, 5).find("stride must be in [1, window = 4]"), std::string::npos);
}

}  // namespace
}  // namespace minivllm::cli
