// StepInput: batch preparation (build_step_input) for prefill, prefix-cached prefill and decode,
// the per-row sampling values, its errors, and the byte image's round trip and malformed inputs.
// Expected values are written out by hand (block ids chosen non-contiguous on purpose).
#include "engine/step_input.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <numeric>

#include "common/check.h"
#include "engine/block_manager.h"
#include "engine/sequence.h"
#include "engine_steps.h"

namespace minivllm {
namespace {

constexpr int kBs = 16;

// [first, last] inclusive, both written as literals at the call site.
std::vector<int32_t> span(int32_t first, int32_t last) {
  std::vector<int32_t> v(static_cast<size_t>(last - first + 1));
  std::iota(v.begin(), v.end(), first);
  return v;
}

std::vector<int32_t> cat(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

SamplingParams seeded(uint64_t seed) {
  SamplingParams p;
  p.seed = seed;
  return p;
}

Sequence make_seq(int64_t id, std::vector<int32_t> tokens, std::vector<int32_t> blocks,
                  SamplingParams params = seeded(1)) {
  Sequence s(id, std::move(tokens), std::move(params), kBs);
  s.block_table = std::move(blocks);
  return s;
}

// The spans the Scheduler sets for a whole-prompt prefill (every uncached token; its counts row
// rebuilt) or a decode (the last token). Chunked spans are tested with build_step_input itself.
StepInput build(const std::vector<Sequence*>& seqs, bool is_prefill, int max_blocks_per_seq, bool draw_samples = true) {
  for (Sequence* s : seqs) {
    s->num_computed_tokens = is_prefill ? s->num_cached_tokens : s->num_tokens() - 1;
    s->num_new_tokens = s->num_tokens() - s->num_computed_tokens;
    s->prefilled = !is_prefill;
  }
  return build_step_input(seqs, is_prefill, max_blocks_per_seq, draw_samples);
}

void expect_same(const StepInput& a, const StepInput& b) {
  EXPECT_EQ(a.is_prefill, b.is_prefill);
  EXPECT_EQ(a.block_size, b.block_size);
  EXPECT_EQ(a.max_blocks_per_seq, b.max_blocks_per_seq);
  EXPECT_EQ(a.max_seqlen_q, b.max_seqlen_q);
  EXPECT_EQ(a.max_seqlen_k, b.max_seqlen_k);
  EXPECT_EQ(a.input_ids, b.input_ids);
  EXPECT_EQ(a.positions, b.positions);
  EXPECT_EQ(a.slot_mapping, b.slot_mapping);
  EXPECT_EQ(a.cu_seqlens_q, b.cu_seqlens_q);
  EXPECT_EQ(a.cu_seqlens_k, b.cu_seqlens_k);
  EXPECT_EQ(a.last_indices, b.last_indices);
  EXPECT_EQ(a.context_lens, b.context_lens);
  EXPECT_EQ(a.block_tables, b.block_tables);
  EXPECT_EQ(a.prompt_logprob_rows, b.prompt_logprob_rows);
  EXPECT_EQ(a.sampling.temperature, b.sampling.temperature);
  EXPECT_EQ(a.sampling.top_k, b.sampling.top_k);
  EXPECT_EQ(a.sampling.top_p, b.sampling.top_p);
  EXPECT_EQ(a.sampling.min_p, b.sampling.min_p);
  EXPECT_EQ(a.sampling.uniform, b.sampling.uniform);
  EXPECT_EQ(a.num_seqs(), b.num_seqs());
  EXPECT_EQ(a.num_tokens(), b.num_tokens());
}

// Three prompts of 5, 20 and 33 tokens: one block, a boundary at 16, and two boundaries.
struct MixedPrefill {
  Sequence a = make_seq(0, span(100, 104), {7});
  Sequence b = make_seq(1, span(200, 219), {3, 9});
  Sequence c = make_seq(2, span(300, 332), {12, 0, 5});
  std::vector<Sequence*> batch() { return {&a, &b, &c}; }
};

TEST(StepInput, PrefillMixedLengths) {
  MixedPrefill m;
  const StepInput s = build(m.batch(), /*is_prefill=*/true, /*max_blocks_per_seq=*/4);
  EXPECT_TRUE(s.is_prefill);
  EXPECT_EQ(s.block_size, 16);
  EXPECT_EQ(s.max_blocks_per_seq, 4);
  EXPECT_EQ(s.num_seqs(), 3);
  EXPECT_EQ(s.num_tokens(), 58);
  EXPECT_EQ(s.input_ids, cat({span(100, 104), span(200, 219), span(300, 332)}));
  EXPECT_EQ(s.positions, cat({span(0, 4), span(0, 19), span(0, 32)}));
  // a: block 7 -> slots 112..116. b: block 3 -> 48..63, then block 9 -> 144..147.
  // c: block 12 -> 192..207, block 0 -> 0..15, block 5 -> 80.
  const std::vector<int32_t> slots =
      cat({span(112, 116), span(48, 63), span(144, 147), span(192, 207), span(0, 15), {80}});
  EXPECT_EQ(s.slot_mapping, slots);
  // Spot checks across the boundaries, written out.
  EXPECT_EQ(s.slot_mapping[5 + 15], 63);   // b, position 15: last of block 3
  EXPECT_EQ(s.slot_mapping[5 + 16], 144);  // b, position 16: first of block 9
  EXPECT_EQ(s.slot_mapping[25 + 16], 0);   // c, position 16: block id 0, offset 0
  EXPECT_EQ(s.slot_mapping[57], 80);       // c, position 32: block 5, offset 0
  EXPECT_EQ(s.cu_seqlens_q, (std::vector<int32_t>{0, 5, 25, 58}));
  EXPECT_EQ(s.cu_seqlens_k, (std::vector<int32_t>{0, 5, 25, 58}));
  EXPECT_EQ(s.last_indices, (std::vector<int32_t>{4, 24, 57}));
  EXPECT_EQ(s.max_seqlen_q, 33);
  EXPECT_EQ(s.max_seqlen_k, 33);
  EXPECT_EQ(s.block_tables, (std::vector<int32_t>{7, -1, -1, -1,  //
                                                  3, 9, -1, -1,    //
                                                  12, 0, 5, -1}));
  EXPECT_TRUE(s.context_lens.empty());
  EXPECT_EQ(s.sampling.size(), 3);
}

TEST(StepInput, PrefillBlockTableFillsEveryColumn) {
  // A sequence that uses exactly max_blocks_per_seq blocks gets no padding.
  Sequence a = make_seq(0, span(0, 31), {4, 2});
  Sequence b = make_seq(1, span(50, 50), {6});
  std::vector<Sequence*> batch{&a, &b};
  const StepInput s = build(batch, true, 2);
  EXPECT_EQ(s.block_tables, (std::vector<int32_t>{4, 2, 6, -1}));
  EXPECT_EQ(s.slot_mapping, cat({span(64, 79), span(32, 47), {96}}));
  EXPECT_EQ(s.cu_seqlens_q, (std::vector<int32_t>{0, 32, 33}));
  EXPECT_EQ(s.last_indices, (std::vector<int32_t>{31, 32}));
  EXPECT_EQ(s.max_seqlen_q, 32);
  EXPECT_EQ(s.max_seqlen_k, 32);
}

TEST(StepInput, PrefillPrefixCachedByHand) {
  // 40 tokens, the first 32 (two full blocks) cached; a plain 3-token prompt after it.
  Sequence y = make_seq(0, span(500, 539), {6, 2, 11});
  y.num_cached_tokens = 32;
  Sequence z = make_seq(1, {9, 8, 7}, {4});
  std::vector<Sequence*> batch{&y, &z};
  const StepInput s = build(batch, true, 3);
  EXPECT_EQ(s.num_tokens(), 11);
  EXPECT_EQ(s.num_seqs(), 2);
  EXPECT_EQ(s.input_ids, cat({span(532, 539), {9, 8, 7}}));
  EXPECT_EQ(s.positions, (std::vector<int32_t>{32, 33, 34, 35, 36, 37, 38, 39, 0, 1, 2}));
  // y: positions 32..39 are offsets 0..7 of block 11 -> 176..183; z: block 4 -> 64..66.
  EXPECT_EQ(s.slot_mapping, (std::vector<int32_t>{176, 177, 178, 179, 180, 181, 182, 183, 64, 65, 66}));
  EXPECT_EQ(s.cu_seqlens_q, (std::vector<int32_t>{0, 8, 11}));
  EXPECT_EQ(s.cu_seqlens_k, (std::vector<int32_t>{0, 40, 43}));
  EXPECT_EQ(s.last_indices, (std::vector<int32_t>{7, 10}));
  EXPECT_EQ(s.max_seqlen_q, 8);
  EXPECT_EQ(s.max_seqlen_k, 40);
  EXPECT_EQ(s.block_tables, (std::vector<int32_t>{6, 2, 11, 4, -1, -1}));
}

TEST(StepInput, PrefillPrefixCachedFromBlockManager) {
  BlockManager bm(16, kBs);
  Sequence filler(9, span(900, 915), SamplingParams{}, kBs);
  allocate_prefill(bm, filler);  // takes block 0
  bm.commit_hashes();  // the step that wrote it succeeded
  Sequence x(0, span(0, 39), SamplingParams{}, kBs);
  allocate_prefill(bm, x);  // blocks 1, 2, 3
  bm.commit_hashes();  // the step that wrote it succeeded
  bm.deallocate(filler);  // block 0 goes to the back of the free list
  Sequence y(1, cat({span(0, 31), span(1000, 1007)}), SamplingParams{}, kBs);
  allocate_prefill(bm, y);
  bm.commit_hashes();  // the step that wrote it succeeded
  ASSERT_EQ(y.num_cached_tokens, 32);
  ASSERT_EQ(x.block_table, (std::vector<int32_t>{1, 2, 3}));
  ASSERT_EQ(y.block_table, (std::vector<int32_t>{1, 2, 4}));  // two hits, then the free list's head

  std::vector<Sequence*> batch{&y};
  const StepInput s = build(batch, true, 4, /*draw_samples=*/false);
  EXPECT_EQ(s.input_ids, span(1000, 1007));
  EXPECT_EQ(s.positions, span(32, 39));
  EXPECT_EQ(s.slot_mapping, span(64, 71));  // block 4, offsets 0..7
  EXPECT_EQ(s.cu_seqlens_q, (std::vector<int32_t>{0, 8}));
  EXPECT_EQ(s.cu_seqlens_k, (std::vector<int32_t>{0, 40}));
  EXPECT_EQ(s.last_indices, (std::vector<int32_t>{7}));
  EXPECT_EQ(s.max_seqlen_q, 8);
  EXPECT_EQ(s.max_seqlen_k, 40);
  EXPECT_EQ(s.block_tables, (std::vector<int32_t>{1, 2, 4, -1}));
}

// Decode rows: a last token that opens block 2, a full last block, a short one, a single token.
struct MixedDecode {
  Sequence opens = make_seq(0, span(100, 115), {5, 2});  // 16-token prompt, then token 777 at position 16
  Sequence full = make_seq(1, span(200, 230), {1, 8});   // 31-token prompt, then token 888 at position 31
  Sequence short_seq = make_seq(2, span(300, 305), {10});  // 6 + 1 tokens
  Sequence single = make_seq(3, {42}, {3});                 // a 1-token sequence
  MixedDecode() {
    opens.append_token(777);
    full.append_token(888);
    short_seq.append_token(999);
  }
  std::vector<Sequence*> batch() { return {&opens, &full, &short_seq, &single}; }
};

TEST(StepInput, DecodeOneRowPerSequence) {
  MixedDecode m;
  const StepInput s = build(m.batch(), /*is_prefill=*/false, 3);
  EXPECT_FALSE(s.is_prefill);
  EXPECT_EQ(s.block_size, 16);
  EXPECT_EQ(s.num_seqs(), 4);
  EXPECT_EQ(s.num_tokens(), 4);
  EXPECT_EQ(s.input_ids, (std::vector<int32_t>{777, 888, 999, 42}));
  EXPECT_EQ(s.positions, (std::vector<int32_t>{16, 31, 6, 0}));
  EXPECT_EQ(s.context_lens, (std::vector<int32_t>{17, 32, 7, 1}));
  // opens: block 2 offset 0 -> 32; full: block 8 offset 15 -> 143; short: block 10 offset 6 -> 166;
  // single: block 3 offset 0 -> 48.
  EXPECT_EQ(s.slot_mapping, (std::vector<int32_t>{32, 143, 166, 48}));
  EXPECT_EQ(s.block_tables, (std::vector<int32_t>{5, 2, -1,   //
                                                  1, 8, -1,   //
                                                  10, -1, -1,  //
                                                  3, -1, -1}));
  EXPECT_EQ(s.max_seqlen_q, 1);
  EXPECT_EQ(s.max_seqlen_k, 32);
  EXPECT_TRUE(s.cu_seqlens_q.empty());
  EXPECT_TRUE(s.cu_seqlens_k.empty());
  EXPECT_TRUE(s.last_indices.empty());
  EXPECT_EQ(s.sampling.size(), 4);
}

TEST(StepInput, DecodeAfterBlockManagerAppend) {
  BlockManager bm(8, kBs);
  Sequence filler(9, span(0, 15), SamplingParams{}, kBs);
  allocate_prefill(bm, filler);  // block 0
  bm.commit_hashes();  // the step that wrote it succeeded
  Sequence a(0, span(100, 115), SamplingParams{}, kBs);
  allocate_prefill(bm, a);  // block 1
  bm.commit_hashes();  // the step that wrote it succeeded
  bm.deallocate(filler);  // free list: 2..7, 0
  a.append_token(55);
  ASSERT_TRUE(bm.can_append(a));
  append_decode(bm, a);
  bm.commit_hashes();  // the step that wrote it succeeded
  ASSERT_EQ(a.block_table, (std::vector<int32_t>{1, 2}));
  std::vector<Sequence*> batch{&a};
  StepInput s = build(batch, false, 2, false);
  EXPECT_EQ(s.input_ids, (std::vector<int32_t>{55}));
  EXPECT_EQ(s.positions, (std::vector<int32_t>{16}));
  EXPECT_EQ(s.context_lens, (std::vector<int32_t>{17}));
  EXPECT_EQ(s.slot_mapping, (std::vector<int32_t>{32}));  // block 2, offset 0
  // Fill block 2 up to its last slot: 15 more tokens, position 31 -> offset 15 -> 47.
  for (int32_t t = 56; t < 71; ++t) {
    a.append_token(t);
    append_decode(bm, a);
    bm.commit_hashes();  // the step that wrote it succeeded
  }
  ASSERT_EQ(a.block_table, (std::vector<int32_t>{1, 2}));
  s = build(batch, false, 2, false);
  EXPECT_EQ(s.input_ids, (std::vector<int32_t>{70}));
  EXPECT_EQ(s.positions, (std::vector<int32_t>{31}));
  EXPECT_EQ(s.context_lens, (std::vector<int32_t>{32}));
  EXPECT_EQ(s.slot_mapping, (std::vector<int32_t>{47}));
  EXPECT_EQ(s.block_tables, (std::vector<int32_t>{1, 2}));
}

TEST(StepInput, SamplingRowsFromParams) {
  SamplingParams p0;
  p0.temperature = 0.7f;
  p0.top_k = 50;
  p0.top_p = 0.9f;
  p0.min_p = 0.05f;
  p0.seed = 42;
  SamplingParams p1;
  p1.temperature = 0.0f;
  p1.seed = 7;
  SamplingParams p2;  // defaults, unseeded
  p2.temperature = 1.3f;
  p2.top_k = 1;
  p2.top_p = 0.25f;
  p2.min_p = 1.0f;
  Sequence a = make_seq(0, {1, 2, 3}, {0}, p0);
  Sequence b = make_seq(1, {4}, {1}, p1);
  Sequence c = make_seq(2, {5, 6}, {2}, p2);
  Sequence a_copy = a, b_copy = b;
  std::vector<Sequence*> batch{&a, &b, &c};

  for (bool prefill : {true, false}) {
    SCOPED_TRACE(prefill ? "prefill" : "decode");
    const StepInput s = build(batch, prefill, 1);
    EXPECT_EQ(s.sampling.temperature, (std::vector<float>{0.7f, 0.0f, 1.3f}));
    EXPECT_EQ(s.sampling.top_k, (std::vector<int>{50, -1, 1}));
    EXPECT_EQ(s.sampling.top_p, (std::vector<float>{0.9f, 1.0f, 0.25f}));
    EXPECT_EQ(s.sampling.min_p, (std::vector<float>{0.05f, 0.0f, 1.0f}));
    ASSERT_EQ(s.sampling.uniform.size(), 3u);
    // Seeded rows: exactly the next draw of each sequence's own generator.
    EXPECT_EQ(s.sampling.uniform[0], a_copy.next_uniform());
    EXPECT_EQ(s.sampling.uniform[1], b_copy.next_uniform());
    EXPECT_GE(s.sampling.uniform[2], 0.0f);
    EXPECT_LT(s.sampling.uniform[2], 1.0f);
  }
  // Each build drew exactly once per sequence: the generators are still in step with the copies.
  EXPECT_EQ(a.next_uniform(), a_copy.next_uniform());
  EXPECT_EQ(b.next_uniform(), b_copy.next_uniform());
}

TEST(StepInput, SamplingWithoutDrawsLeavesGeneratorsAlone) {
  Sequence a = make_seq(0, {1, 2, 3}, {0}, seeded(42));
  Sequence b = make_seq(1, {4}, {1}, seeded(43));
  Sequence a_copy = a, b_copy = b;
  std::vector<Sequence*> batch{&a, &b};
  const StepInput s = build(batch, true, 1, /*draw_samples=*/false);
  EXPECT_EQ(s.sampling.uniform, (std::vector<float>{0.0f, 0.0f}));
  EXPECT_EQ(s.sampling.temperature, (std::vector<float>{1.0f, 1.0f}));
  EXPECT_EQ(s.sampling.top_k, (std::vector<int>{-1, -1}));
  EXPECT_EQ(s.sampling.top_p, (std::vector<float>{1.0f, 1.0f}));
  EXPECT_EQ(s.sampling.min_p, (std::vector<float>{0.0f, 0.0f}));
  // Nothing was drawn: the next draw is still the first one.
  EXPECT_EQ(a.next_uniform(), a_copy.next_uniform());
  EXPECT_EQ(b.next_uniform(), b_copy.next_uniform());
  // And a drawing build afterwards gives the copies' second draw.
  const StepInput d = build(batch, true, 1, true);
  EXPECT_EQ(d.sampling.uniform[0], a_copy.next_uniform());
  EXPECT_EQ(d.sampling.uniform[1], b_copy.next_uniform());
}

TEST(StepInput, SeededUniformDoesNotDependOnBatch) {
  Sequence alone = make_seq(0, {1, 2}, {0}, seeded(99));
  Sequence in_batch = make_seq(5, {1, 2}, {3}, seeded(99));
  Sequence other = make_seq(6, {7}, {4}, seeded(1));
  std::vector<Sequence*> b1{&alone};
  std::vector<Sequence*> b2{&other, &in_batch};
  const StepInput s1 = build(b1, true, 1);
  const StepInput s2 = build(b2, true, 1);
  EXPECT_EQ(s1.sampling.uniform[0], s2.sampling.uniform[1]);
}

TEST(StepInput, EmptyBatchThrows) {
  std::vector<Sequence*> none;
  EXPECT_THROW(build(none, true, 4), Error);
  EXPECT_THROW(build(none, false, 4), Error);
}

TEST(StepInput, BlockTableTooShortThrows) {
  for (bool prefill : {true, false}) {
    SCOPED_TRACE(prefill ? "prefill" : "decode");
    Sequence ok = make_seq(0, span(0, 4), {1});
    Sequence bad = make_seq(1, span(0, 19), {2});  // 20 tokens need 2 blocks
    std::vector<Sequence*> batch{&ok, &bad};
    EXPECT_THROW(build(batch, prefill, 4), Error);
    Sequence none = make_seq(2, span(0, 2), {});  // no blocks at all
    std::vector<Sequence*> batch2{&none};
    EXPECT_THROW(build(batch2, prefill, 4), Error);
  }
  // Decode right after appending a token that opens a block, before may_append gave it one.
  Sequence grown = make_seq(3, span(0, 15), {6});
  grown.append_token(16);
  std::vector<Sequence*> batch3{&grown};
  EXPECT_THROW(build(batch3, false, 4), Error);
}

TEST(StepInput, MoreBlocksThanMaxBlocksPerSeqThrows) {
  for (bool prefill : {true, false}) {
    SCOPED_TRACE(prefill ? "prefill" : "decode");
    Sequence a = make_seq(0, span(0, 39), {3, 1, 2});  // 40 tokens: 3 blocks
    std::vector<Sequence*> batch{&a};
    EXPECT_THROW(build(batch, prefill, 2), Error);
    EXPECT_NO_THROW(build(batch, prefill, 3, false));
  }
}

TEST(StepInput, OtherMalformedBatchesThrow) {
  // More blocks than the tokens need.
  Sequence extra = make_seq(0, span(0, 4), {1, 2});
  std::vector<Sequence*> b1{&extra};
  EXPECT_THROW(build(b1, true, 4), Error);
  // Prefill with every token cached: nothing left to compute.
  Sequence all_cached = make_seq(1, span(0, 31), {1, 2});
  all_cached.num_cached_tokens = 32;
  std::vector<Sequence*> b2{&all_cached};
  EXPECT_THROW(build(b2, true, 4), Error);
  // Mixed block sizes in one batch.
  Sequence a = make_seq(2, span(0, 4), {1});
  Sequence b(3, span(0, 4), SamplingParams{}, 8);
  b.block_table = {2};
  std::vector<Sequence*> b3{&a, &b};
  EXPECT_THROW(build(b3, true, 4), Error);
}

TEST(StepInputImage, RoundTripPrefill) {
  MixedPrefill m;
  const StepInput s = build(m.batch(), true, 4);
  const StepInput back = StepInput::deserialize(s.serialize());
  expect_same(s, back);
  EXPECT_TRUE(back.is_prefill);
  EXPECT_EQ(back.last_indices, (std::vector<int32_t>{4, 24, 57}));
}

// Sequence b (prompt 200..219, token rows 5..24) asks for prompt logprobs: rows 5..23 score tokens
// 201..219 (the last row samples instead). In chunks, each position is asked for once; a
// recomputation after a preemption asks for none again.
TEST(StepInput, PromptLogprobRowsScoreTheNextPromptToken) {
  MixedPrefill m;
  m.b.prompt_logprobs_top = 2;
  const StepInput s = build(m.batch(), true, 4);
  EXPECT_EQ(s.prompt_logprob_rows, span(5, 23));
  EXPECT_EQ(s.prompt_logprob_targets, span(201, 219));
  EXPECT_EQ(s.prompt_logprob_top, std::vector<int32_t>(19, 2));
  EXPECT_EQ(s.prompt_logprob_seqs, std::vector<int32_t>(19, 1));
  EXPECT_EQ(StepInput::deserialize(s.serialize()).prompt_logprob_rows, span(5, 23));
  EXPECT_FALSE(m.b.needs_prompt_logprobs());

  Sequence c = make_seq(4, span(300, 332), {12, 0, 5});
  c.prompt_logprobs_top = 0;
  std::vector<Sequence*> one{&c};
  c.num_computed_tokens = 0;
  c.num_new_tokens = 16;
  StepInput first = build_step_input(one, true, 4);
  EXPECT_EQ(first.prompt_logprob_targets, span(301, 316));
  c.num_computed_tokens = 0;  // preempted and recomputed: 20 tokens now, the first 16 asked already
  c.num_new_tokens = 20;
  StepInput again = build_step_input(one, true, 4);
  EXPECT_EQ(again.prompt_logprob_rows, span(16, 19));
  EXPECT_EQ(again.prompt_logprob_targets, span(317, 320));
  c.num_computed_tokens = 20;
  c.num_new_tokens = 13;  // the last chunk: position 32 samples
  StepInput last = build_step_input(one, true, 4);
  EXPECT_EQ(last.prompt_logprob_targets, span(321, 332));
  EXPECT_FALSE(c.needs_prompt_logprobs());
  // A span that starts past what was asked for would lose positions: refused.
  Sequence d = make_seq(5, span(300, 332), {12, 0, 5});
  d.prompt_logprobs_top = 0;
  d.num_computed_tokens = 16;
  d.num_new_tokens = 17;
  std::vector<Sequence*> skipping{&d};
  EXPECT_THROW(build_step_input(skipping, true, 4), Error);
}

TEST(StepInputImage, RoundTripPrefixCached) {
  Sequence y = make_seq(0, span(500, 539), {6, 2, 11});
  y.num_cached_tokens = 32;
  std::vector<Sequence*> batch{&y};
  const StepInput s = build(batch, true, 3);
  expect_same(s, StepInput::deserialize(s.serialize()));
}

TEST(StepInputImage, RoundTripDecode) {
  MixedDecode m;
  const StepInput s = build(m.batch(), false, 3);
  const StepInput back = StepInput::deserialize(s.serialize());
  expect_same(s, back);
  EXPECT_FALSE(back.is_prefill);
  EXPECT_EQ(back.context_lens, (std::vector<int32_t>{17, 32, 7, 1}));
}

TEST(StepInputImage, RoundTripHandMadeValues) {
  // Values build_step_input never makes (negative, extreme, NaN-free floats) survive bit-exactly.
  StepInput s;
  s.is_prefill = true;
  s.block_size = 256;
  s.max_blocks_per_seq = 1;
  s.max_seqlen_q = std::numeric_limits<int32_t>::max();
  s.max_seqlen_k = -5;
  s.input_ids = {std::numeric_limits<int32_t>::min(), -1, 0, 123456789};
  s.block_tables = {-1};
  s.sampling.temperature = {1e-30f};
  s.sampling.top_k = {-7};
  s.sampling.top_p = {0.123456789f};
  s.sampling.min_p = {std::numeric_limits<float>::denorm_min()};
  s.sampling.uniform = {0x1.fffffep-1f};
  expect_same(s, StepInput::deserialize(s.serialize()));
  // A default (empty) StepInput also round-trips.
  expect_same(StepInput{}, StepInput::deserialize(StepInput{}.serialize()));
}

TEST(StepInputImage, LayoutSize) {
  // Decode of 2 sequences, 2 columns: header 4 (magic) + 2 (flags) + 4 * 4 = 22 bytes; 14 vectors of
  // a 4-byte count each = 56 (the prompt logprob rows' empty); elements: ids 2, positions 2, slots 2, cu_q 0, cu_k 0, last 0,
  // context 2, tables 4, top_k 2, temperature 2, top_p 2, min_p 2, uniform 2 = 22 * 4 = 88.
  Sequence a = make_seq(0, span(0, 16), {3, 4});
  Sequence b = make_seq(1, span(0, 2), {5});
  std::vector<Sequence*> batch{&a, &b};
  const StepInput s = build(batch, false, 2);
  const std::string img = s.serialize();
  EXPECT_EQ(img.size(), 166u);
  EXPECT_EQ(static_cast<uint8_t>(img[4]), 0u);  // is_prefill
  EXPECT_EQ(static_cast<uint8_t>(img[5]), 0u);  // full_logits: no penalties, logprobs or filters
  int32_t block_size = 0;
  std::memcpy(&block_size, img.data() + 6, 4);
  EXPECT_EQ(block_size, 16);
}

// The workers' image lacks the penalties and logprobs but keeps rank 0's answer to whether the
// step needs every logit on rank 0 (the gathered path instead of the vocabulary-parallel sampler).
TEST(StepInputImage, CarriesWhetherRankZeroNeedsFullLogits) {
  MixedDecode m;
  StepInput plain = build(m.batch(), false, 3);
  EXPECT_FALSE(plain.needs_full_logits());
  EXPECT_FALSE(StepInput::deserialize(plain.serialize()).needs_full_logits());
  StepInput nucleus = plain;
  nucleus.sampling.top_p[0] = 0.9f;
  EXPECT_TRUE(StepInput::deserialize(nucleus.serialize()).needs_full_logits());
  StepInput top_k = plain;
  top_k.sampling.top_k[1] = 5;
  EXPECT_TRUE(StepInput::deserialize(top_k.serialize()).needs_full_logits());
  StepInput logprobs = plain;
  logprobs.sampling.logprobs.assign(static_cast<size_t>(plain.num_samples()), 2);
  EXPECT_TRUE(logprobs.needs_full_logits());
  const StepInput back = StepInput::deserialize(logprobs.serialize());
  EXPECT_TRUE(back.sampling.logprobs.empty());  // rank 0's alone
  EXPECT_TRUE(back.needs_full_logits());
}

TEST(StepInputImage, TruncatedImageThrows) {
  MixedDecode m;
  const std::string img = build(m.batch(), false, 3).serialize();
  ASSERT_GT(img.size(), 21u);
  for (size_t n = 0; n < img.size(); ++n) {
    EXPECT_THROW(StepInput::deserialize(img.substr(0, n)), Error) << "prefix of " << n << " bytes";
  }
  EXPECT_NO_THROW(StepInput::deserialize(img));
}

TEST(StepInputImage, WrongMagicThrows) {
  MixedPrefill m;
  std::string img = build(m.batch(), true, 4).serialize();
  for (size_t i = 0; i < 4; ++i) {
    std::string bad = img;
    bad[i] = static_cast<char>(bad[i] ^ 0x01);
    EXPECT_THROW(StepInput::deserialize(bad), Error) << "byte " << i;
  }
  EXPECT_THROW(StepInput::deserialize(std::string(img.size(), '\0')), Error);
}

TEST(StepInputImage, TrailingBytesThrow) {
  MixedPrefill m;
  const std::string img = build(m.batch(), true, 4).serialize();
  EXPECT_THROW(StepInput::deserialize(img + std::string(1, '\0')), Error);
  EXPECT_THROW(StepInput::deserialize(img + std::string(4, '\x7f')), Error);
  EXPECT_THROW(StepInput::deserialize(img + img), Error);
}

TEST(StepInputImage, HugeCountThrowsInsteadOfAllocating) {
  MixedDecode m;
  std::string img = build(m.batch(), false, 3).serialize();
  // The first vector's count (input_ids) follows the 21-byte header.
  const uint32_t huge = 0xFFFFFFFFu;
  std::memcpy(img.data() + 21, &huge, 4);
  EXPECT_THROW(StepInput::deserialize(img), Error);
}

}  // namespace
}  // namespace minivllm
