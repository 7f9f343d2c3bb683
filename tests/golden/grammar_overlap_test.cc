// Grammar masks filled beside the forward (overlap_grammar_masks, issue 49): the real stories260K
// model with xgrammar regexes, the synchronous and the async engine, the overlap on and off. The
// outputs are the same in all four (sampled and greedy rows, n > 1, rows without a grammar, a KV
// cache small enough to preempt, two ranks), every constrained text matches its regex (so the masks were
// applied), and the step observer shows the order: a step's masks are filled after its launch and
// before its collection, and with async scheduling after the step before it was collected (its
// tokens taken by the grammars) while this one is in flight; rows with a grammar no longer keep
// the next step from launching early.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "api/llm_engine.h"
#include "engine_test_util.h"

namespace minivllm {
namespace {

using Event = std::pair<LLMEngine::StepEvent, int64_t>;

constexpr const char* kLower = "[a-z ]+";
constexpr const char* kDigits = "[0-9]{3}( [0-9]{3})+";

EngineConfig config(const std::string& async, bool overlap, int blocks = 128, int world_size = 1) {
  EngineConfig c = stories_config();
  c.world_size = world_size;
  c.async_scheduling = async;
  c.overlap_grammar_masks = overlap;
  c.num_kvcache_blocks = blocks;
  c.max_model_length = 128;  // 8 blocks a sequence at most: a cache of 10 holds one
  return c;
}

SamplingParams constrained(const char* regex, float temperature, int n, int max_tokens) {
  SamplingParams p;
  p.temperature = temperature;
  p.seed = 11;
  p.n = n;
  p.max_tokens = max_tokens;
  p.structured_outputs.regex = regex;
  return p;
}

// Each request of the mix: a prompt, its params, the regex its text must match ("" for none).
struct Mixed {
  std::string prompt;
  SamplingParams params;
  std::string regex;
};

std::vector<Mixed> mix() {
  SamplingParams free_row;
  free_row.temperature = 0.7f;
  free_row.seed = 5;
  free_row.max_tokens = 40;
  free_row.ignore_eos = true;
  return {{"Once upon a time", constrained(kLower, 0.9f, 2, 40), kLower},
          {"The little dog", free_row, ""},
          {"Lily had", constrained(kDigits, 0.0f, 1, 30), kDigits},
          {"One day, Tom", constrained(kLower, 0.0f, 1, 48), kLower},
          {"She said", free_row, ""}};
}

struct Trace {
  std::vector<std::string> texts;  // request by request, choice by choice: text|finish reason
  std::vector<Event> events;
  int64_t preemptions = 0;
};

Trace run(const std::string& async, bool overlap, int blocks = 128, int world_size = 1) {
  LLMEngine engine(config(async, overlap, blocks, world_size));
  Trace r;
  engine.set_step_observer([&](LLMEngine::StepEvent e, int64_t step) { r.events.emplace_back(e, step); });
  const std::vector<Mixed> requests = mix();
  std::map<std::pair<int64_t, int>, RequestOutput> done;
  std::vector<int64_t> ids;
  for (const Mixed& m : requests) ids.push_back(engine.add_request(m.prompt, m.params));
  while (!engine.is_finished()) {
    for (RequestOutput& o : engine.step().finished) done[{o.request_id, o.index}] = o;
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    for (int c = 0; c < requests[i].params.n; ++c) {
      const RequestOutput& o = done.at({ids[i], c});
      EXPECT_NE(o.finish_reason, "error") << o.error;
      if (!requests[i].regex.empty() && o.finish_reason == "stop") {
        EXPECT_TRUE(std::regex_match(o.text, std::regex(requests[i].regex))) << "'" << o.text << "'";
      }
      if (!requests[i].regex.empty()) {  // cut by max_tokens: still a prefix the regex's characters allow
        EXPECT_TRUE(std::regex_match(o.text, std::regex("[a-z0-9 ]*"))) << "'" << o.text << "'";
      }
      r.texts.push_back(o.text + "|" + o.finish_reason);
    }
  }
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
  r.preemptions = engine.num_preemptions();
  return r;
}

// Position of the first (event, step) in the trace, -1 when absent.
long position(const std::vector<Event>& events, LLMEngine::StepEvent e, int64_t step) {
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i] == Event{e, step}) return static_cast<long>(i);
  }
  return -1;
}

TEST(GrammarOverlap, OutputsAreTheSameWithTheOverlapOnAndOff) {
  const Trace reference = run("off", false);
  for (const Trace& r : {run("off", true), run("on", false), run("on", true)}) EXPECT_EQ(r.texts, reference.texts);
  // A free row is not constrained: the texts differ from a constrained one's alphabet somewhere.
  bool unconstrained_differs = false;
  for (const std::string& t : reference.texts) unconstrained_differs |= !std::regex_search(t, std::regex("^[a-z0-9 ]*\\|"));
  EXPECT_TRUE(unconstrained_differs) << "the free rows should write capitals or punctuation";
}

// 10 blocks of 16 tokens for six sequences that grow to ~50: decodes preempt, and the preempted
// sequences are prefilled again with their grammars as they were (their tokens are kept).
TEST(GrammarOverlap, PreemptedConstrainedSequencesMatch) {
  const Trace reference = run("off", false, 10);
  EXPECT_GT(reference.preemptions, 0) << "the cache was meant to be too small";
  const Trace async = run("on", true, 10);
  EXPECT_GT(async.preemptions, 0);
  EXPECT_EQ(async.texts, reference.texts);
  EXPECT_EQ(run("off", true, 10).texts, reference.texts);
}

// Two ranks (worker processes): rank 0 samples after the mask while the worker's part of the
// sampler's collectives waits for it.
TEST(GrammarOverlap, TensorParallelMatchesOneRank) {
  const Trace reference = run("off", false);
  EXPECT_EQ(run("on", true, 128, 2).texts, reference.texts);
  EXPECT_EQ(run("off", true, 128, 2).texts, reference.texts);
}

TEST(GrammarOverlap, MasksAreFilledWhileTheStepIsInFlight) {
  using E = LLMEngine::StepEvent;
  const Trace async = run("on", true);
  int filled = 0, filled_after_previous = 0, launched_early = 0;
  for (const auto& [e, step] : async.events) {
    if (e == E::kLaunch && step > 0 && position(async.events, E::kCollect, step - 1) > position(async.events, e, step)) {
      ++launched_early;  // launched before the step before it was collected
    }
    if (e != E::kFillMasks) continue;
    ++filled;
    const long fill = position(async.events, e, step);
    EXPECT_LT(position(async.events, E::kLaunch, step), fill) << "step " << step;
    // The last step may be left in flight when every sequence has finished (its rows are wasted).
    const long collect = position(async.events, E::kCollect, step);
    if (collect < 0) {
      EXPECT_EQ(step, async.events.back().second) << "only the last step goes uncollected";
    } else {
      EXPECT_GT(collect, fill) << "step " << step;
    }
    const long previous = position(async.events, E::kCollect, step - 1);
    if (step > 0 && previous > position(async.events, E::kLaunch, step)) {
      EXPECT_LT(previous, fill) << "step " << step << "'s masks filled before the step before it resolved";
      ++filled_after_previous;
    }
  }
  EXPECT_GT(filled, 20);
  EXPECT_GT(filled_after_previous, 20) << "constrained steps should overlap the step before them";
  EXPECT_GT(launched_early, 20);

  // The synchronous engine: each step's masks between its launch and its collection.
  const Trace sync = run("off", true);
  int sync_filled = 0;
  for (const auto& [e, step] : sync.events) {
    if (e != E::kFillMasks) continue;
    ++sync_filled;
    EXPECT_EQ(position(sync.events, E::kLaunch, step) + 1, position(sync.events, e, step));
    EXPECT_EQ(position(sync.events, e, step) + 1, position(sync.events, E::kCollect, step));
  }
  EXPECT_GT(sync_filled, 20);

  // Overlap off: masks before the launch (no fill event), and a step with a grammar row is
  // collected before the next launch.
  // Only steps after the last grammar row finished may launch early there.
  const Trace off = run("on", false);
  int off_launched_early = 0;
  for (const auto& [e, step] : off.events) {
    EXPECT_NE(e, E::kFillMasks);
    if (e == E::kLaunch && step > 0 && position(off.events, E::kCollect, step - 1) > position(off.events, e, step)) {
      ++off_launched_early;
    }
  }
  EXPECT_LT(off_launched_early, launched_early);
}

// Grammars compile on the submitters' threads (AsyncEngine does so before queueing a request), while
// the engine steps on its own: each compiled grammar then constrains its request, and a grammar that
// does not compile is refused on the submitter's thread, naming the parameter.
TEST(GrammarOverlap, GrammarsCompileOnOtherThreadsWhileTheEngineSteps) {
  LLMEngine engine(config("on", true));
  // Each regex and the characters its prefixes use (a text cut at max_tokens is a prefix of a match).
  const std::vector<std::pair<std::string, std::string>> regexes = {
      {"[a-z]{3}( [a-z]{3})+", "[a-z ]+"}, {"[0-9]{2}( [0-9]{2})+", "[0-9 ]+"}, {"(ab|cd)+", "[abcd]+"},
      {"[aeiou ]+", "[aeiou ]+"}};
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  for (size_t i = 0; i < regexes.size(); ++i) {
    threads.emplace_back([&, i] {
      engine.compile_structured_outputs(constrained(regexes[i].first.c_str(), 0.0f, 1, 24));
      try {
        engine.compile_structured_outputs(constrained("[unclosed", 0.0f, 1, 24));
      } catch (const ConfigKeyError& e) {
        if (std::string(e.what()).find("structured_outputs") != std::string::npos) ++refused;
      }
    });
  }
  // Meanwhile the engine steps through a constrained request and a free one.
  const auto busy = engine.generate(std::vector<std::string>{"Once upon a time", "The little dog"},
                                    constrained(kLower, 0.0f, 1, 40));
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(refused.load(), static_cast<int>(regexes.size()));
  for (const auto& out : busy) EXPECT_TRUE(std::regex_match(out.text, std::regex(kLower))) << out.text;
  for (const auto& [re, alphabet] : regexes) {
    const auto out = engine.generate(std::vector<std::string>{"Lily had"}, constrained(re.c_str(), 0.0f, 1, 24));
    EXPECT_TRUE(std::regex_match(out[0].text, std::regex(alphabet))) << re << ": '" << out[0].text << "'";
  }
}

}  // namespace
}  // namespace minivllm
