// The q/k row permutation between HF's half-split rotary layout and GGUF's interleaved one.
#include <gtest/gtest.h>

#include <random>

#include "common/check.h"
#include "loader/rope_rows.h"

namespace minivllm {
namespace {

// convert_hf_to_gguf.py's permute(w, n_head) = w.reshape(n_head, 2, D/2, ...).swapaxes(1, 2), i.e.
// gguf[h*D + 2*j + i] = hf[h*D + i*D/2 + j], and its inverse, over whole heads (loader/rope_rows.h).
Tensor permute_rope_rows(const Tensor& hf, int64_t n_head) { return move_rope_rows(hf, n_head, true); }
Tensor unpermute_rope_rows(const Tensor& gguf, int64_t n_head) { return move_rope_rows(gguf, n_head, false); }

Tensor rows_tensor(int64_t rows, int64_t cols) {  // element [r][c] = r * 1000 + c
  Tensor t = host_tensor(DType::kF32, {rows, cols});
  for (int64_t i = 0; i < rows * cols; ++i) t.ptr<float>()[i] = static_cast<float>((i / cols) * 1000 + i % cols);
  return t;
}

std::vector<int64_t> row_order(const Tensor& t) {
  std::vector<int64_t> out;
  for (int64_t r = 0; r < t.size(0); ++r) out.push_back(static_cast<int64_t>(t.ptr<float>()[r * t.size(1)]) / 1000);
  return out;
}

TEST(RopePermute, MatchesConvertScriptOnSmallCases) {
  // numpy: w.reshape(n_head, 2, D/2, cols).swapaxes(1, 2).reshape(rows, cols), row order worked out by hand.
  EXPECT_EQ(row_order(permute_rope_rows(rows_tensor(4, 3), 1)), (std::vector<int64_t>{0, 2, 1, 3}));
  EXPECT_EQ(row_order(permute_rope_rows(rows_tensor(8, 2), 2)), (std::vector<int64_t>{0, 2, 1, 3, 4, 6, 5, 7}));
  EXPECT_EQ(row_order(permute_rope_rows(rows_tensor(8, 2), 1)), (std::vector<int64_t>{0, 4, 1, 5, 2, 6, 3, 7}));
  // and back: GGUF row order [0, 4, 1, 5, ...] unpermutes to HF order.
  EXPECT_EQ(row_order(unpermute_rope_rows(permute_rope_rows(rows_tensor(8, 2), 1), 1)),
            (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(row_order(unpermute_rope_rows(rows_tensor(8, 1), 1)), (std::vector<int64_t>{0, 2, 4, 6, 1, 3, 5, 7}));
}

// GLM-4's partial rotary: only each head's first `rotary` rows are paired (its q/k rows, the GGUF's
// glm4 rows as llama.cpp keeps them); the rest of the head stays put.
TEST(RopePermute, PartialRotaryMovesOnlyTheRotaryRows) {
  // Two heads of 8 rows, 4 rotating: interleaved [0 1 2 3 | 4 5 6 7] -> half-split [0 2 1 3 | 4 5 6 7].
  EXPECT_EQ(row_order(move_rope_rows(rows_tensor(16, 2), 2, false, 4)),
            (std::vector<int64_t>{0, 2, 1, 3, 4, 5, 6, 7, 8, 10, 9, 11, 12, 13, 14, 15}));
  EXPECT_EQ(row_order(move_rope_rows(move_rope_rows(rows_tensor(16, 3), 2, true, 4), 2, false, 4)),
            (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}));
  // A 1-D tensor (a bias) moves like the rows of a matrix; rotary 0 is the whole head.
  Tensor bias = host_tensor(DType::kF32, {8});
  for (int64_t i = 0; i < 8; ++i) bias.ptr<float>()[i] = static_cast<float>(i);
  const Tensor moved = move_rope_rows(bias, 1, false, 0);
  std::vector<float> got(moved.ptr<float>(), moved.ptr<float>() + 8);
  EXPECT_EQ(got, (std::vector<float>{0, 2, 4, 6, 1, 3, 5, 7}));
  EXPECT_THROW(move_rope_rows(rows_tensor(16, 1), 2, false, 10), Error);  // more rotary rows than a head's
  EXPECT_THROW(move_rope_rows(rows_tensor(16, 1), 2, false, 3), Error);   // odd
}

TEST(RopePermute, RoundTripIsIdentityOnRandomMatrices) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist;
  for (auto [n_head, head_dim, cols] : {std::tuple{9, 64, 576}, {3, 64, 576}, {32, 128, 17}, {1, 2, 1}}) {
    const int64_t rows = int64_t{n_head} * head_dim;
    Tensor w = host_tensor(DType::kF32, {rows, cols});
    for (int64_t i = 0; i < w.numel(); ++i) w.ptr<float>()[i] = dist(rng);
    const Tensor permuted = permute_rope_rows(w, n_head);
    const Tensor back = unpermute_rope_rows(permuted, n_head);
    bool moved = false;
    for (int64_t i = 0; i < w.numel(); ++i) {
      ASSERT_EQ(back.ptr<float>()[i], w.ptr<float>()[i]) << "element " << i;
      moved |= permuted.ptr<float>()[i] != w.ptr<float>()[i];
    }
    EXPECT_EQ(moved, head_dim > 2) << "a head of 2 rows is the same in both layouts";
  }
}

TEST(RopePermute, RejectsRowsThatDoNotSplitIntoHeads) {
  EXPECT_THROW(unpermute_rope_rows(rows_tensor(12, 2), 8), Error);
  EXPECT_THROW(unpermute_rope_rows(rows_tensor(9, 2), 3), Error);  // odd head size
}

}  // namespace
}  // namespace minivllm
