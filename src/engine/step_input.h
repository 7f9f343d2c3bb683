// StepInput: everything one model step needs, as plain data (seeds: what prepare_prefill /
// prepare_decode compute, plus the sampler's per-row values). Rank 0 builds it from the scheduled
// Sequences; every rank's ModelRunner runs it; it is exactly what rank 0 sends to the workers, so
// it serialises to bytes. The runtime never sees a Sequence.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sampling/sampler.h"

namespace minivllm {

class Sequence;

// A token sampled by a step whose result is not known yet (async scheduling): sampling row r of
// the step in flight. The scheduler appends it as a placeholder, build_step_input passes it on as
// it is, and the runner takes the token from that row of the previous step's sampled ids on its
// device (Backend::resolve_pending_ids).
constexpr int32_t pending_token(int row) { return -1 - row; }
constexpr bool is_pending_token(int32_t id) { return id < 0; }

// Prefill (the varlen path) takes any mix of query spans: a prompt's chunk, a whole prompt, or a
// decode token as a span of 1; each attends over its keys [0, span end) through its block table.
// Only the sequences whose span ends at their last token sample: they alone have a row in
// last_indices and in the sampling arrays ("sampling rows", in sequence order).
struct StepInput {
  bool is_prefill = false;
  int block_size = 0;
  int max_blocks_per_seq = 0;  // columns of block_tables
  int max_seqlen_q = 0;        // prefill: longest query span
  int max_seqlen_k = 0;        // prefill: longest key span, cached prefix included
  // One entry per computed token (prefill: each span's tokens; decode: one per sequence).
  std::vector<int32_t> input_ids, positions, slot_mapping;
  std::vector<int32_t> cu_seqlens_q, cu_seqlens_k;  // prefill: num_seqs + 1 prefix sums
  std::vector<int32_t> last_indices;                // prefill: token row of each sampling row
  std::vector<int32_t> context_lens;                // decode: keys per sequence, new token included
  std::vector<int32_t> block_tables;                // [num_seqs, max_blocks_per_seq], -1 padded
  SamplingBatch sampling;                           // one row per sampling row (rank 0 samples)
  // The penalties' token counts, kept per running sequence on rank 0's device (empty when no row
  // has penalties). Sampling row r reads counts row penalty_slots[r] (-1: no penalties). A row that
  // completes a prefill first recounts its whole sequence: count_tokens[count_offsets[r],
  // count_offsets[r + 1]), the first count_num_prompt[r] of them its prompt. A decode row (an empty
  // range) counts its input token as generated.
  std::vector<int32_t> penalty_slots, count_offsets, count_num_prompt, count_tokens;
  // Prompt logprobs (prefill only): the token rows whose logits score the next prompt token. Every
  // rank computes those rows' logits (gathered at world_size > 1), so the rows travel to the
  // workers; the scored tokens, how many top alternatives each row wants and the step's sequence
  // of each row are rank 0's alone.
  std::vector<int32_t> prompt_logprob_rows, prompt_logprob_targets, prompt_logprob_top, prompt_logprob_seqs;
  // Pooling (SamplingParams::pooling, prefill only): the token rows whose final-normed hidden state
  // rank 0 hands back (each embedding request's last token), and the step's sequence of each. Rank
  // 0's alone: every rank holds the whole hidden state.
  std::vector<int32_t> pool_rows, pool_seqs;
  // The workers' copy lacks the penalties and logprobs: it carries rank 0's needs_full_logits().
  bool full_logits = false;
  // Rank 0: some sampling row has a grammar whose mask is filled after the launch, beside the
  // forward (sampling.bitmask stays empty; ModelRunner::sample_deferred takes the masks). Never
  // serialised: the workers sample nothing.
  bool defer_bitmask = false;

  // Whether rank 0 needs every logit of the vocabulary to sample this step (with world_size > 1
  // the ranks then gather their slices instead of sampling them where they are,
  // model/vocab_parallel_sampler.h): penalties, logprobs, or a row with top-k, top-p or min-p.
  bool needs_full_logits() const;

  // Sequences attending (prefill: spans; decode: rows).
  int num_seqs() const { return is_prefill ? static_cast<int>(cu_seqlens_q.size()) - 1 : static_cast<int>(input_ids.size()); }
  // Rows that sample: every decode row; the prefill spans that end a sequence.
  int num_samples() const { return is_prefill ? static_cast<int>(last_indices.size()) : num_seqs(); }
  int num_tokens() const { return static_cast<int>(input_ids.size()); }

  // A flat little-endian byte image, and back (throws an Error on a malformed image). Only what
  // every rank needs travels: the penalties, their counts and the logprobs requests are rank 0's
  // alone (it samples) and are left out.
  std::string serialize() const;
  static StepInput deserialize(const std::string& bytes);
};

// Seeds: prepare_prefill / prepare_decode. Each sequence computes its tokens [num_computed_tokens,
// + num_new_tokens) (keys: every token before its span's end); decode needs each span to be its
// last token. When `draw_samples`, each sampling row's generator gives its uniform (rank 0 calls
// this once per step). `defer_bitmask`: a batch with grammars gets defer_bitmask set instead of
// its masks, which fill_token_bitmask gives later.
StepInput build_step_input(const std::vector<Sequence*>& seqs, bool is_prefill, int max_blocks_per_seq,
                           bool draw_samples = true, bool defer_bitmask = false);

// The sampling rows' (`sampling_rows`: a step's sequences that sample, in order) token bitmask:
// each constrained row's allowed tokens from its grammar's current state, every other row all ones,
// a sequence already finished too (its row is wasted: async scheduling). Empty when no row has a
// grammar; `words` gets the words a row. Reads only the rows' grammars, so it may run while the
// step's forward does.
std::vector<int32_t> fill_token_bitmask(const std::vector<Sequence*>& sampling_rows, int& words);

}  // namespace minivllm
