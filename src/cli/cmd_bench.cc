// `minivllm bench`: nano-vllm's bench.py (256 random prompts, ignore_eos, per-sequence max_tokens,
// temperature 0.6: output tokens per second over the whole run) plus single-sequence decode speed
// (one prompt of 128 tokens or --decode-context's, greedy, timing only the decode steps; with
// --decode-batch N, N such prompts decoding together).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>

#include "api/llm_engine.h"
#include "backend/kv_cache_spec.h"
#include "cli/bench_workload.h"
#include "cli/cli_io.h"
#include "cli/commands.h"
#include "cli/options.h"

namespace minivllm::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct ThroughputResult {
  int64_t output_tokens = 0;
  double seconds = 0;
  double tok_s() const { return output_tokens / seconds; }
};

struct DecodeResult {
  int64_t tokens = 0;  // decoded after the prefill step
  double seconds = 0;
};

// bench.py's warm-up: one short generate ("Benchmark: " when the model has a tokenizer).
void warm_up(LLMEngine& engine, const BenchWorkload& w) {
  RequestOutput out;
  if (engine.tokenizer() != nullptr) {
    out = engine.generate(std::vector<std::string>{"Benchmark: "}, SamplingParams{}).at(0);
  } else {
    const auto& p = w.prompt_token_ids.at(0);
    std::vector<int32_t> ids(p.begin(), p.begin() + std::min<size_t>(p.size(), 16));
    out = engine.generate(std::vector<std::vector<int32_t>>{ids}, SamplingParams{}).at(0);
  }
  MINIVLLM_CHECK(out.finish_reason != "error") << "warm-up request rejected: " << user_message(Error(out.error));
}

ThroughputResult run_throughput(LLMEngine& engine, const BenchWorkload& w, float temperature) {
  ThroughputResult r;
  const Clock::time_point t0 = Clock::now();
  for (size_t i = 0; i < w.prompt_token_ids.size(); ++i) {
    SamplingParams sp;
    sp.temperature = temperature;
    sp.ignore_eos = true;
    sp.max_tokens = w.max_tokens[i];
    try {
      engine.add_request(w.prompt_token_ids[i], sp);
    } catch (const Error& e) {
      MINIVLLM_FAIL() << "workload sequence " << i << " rejected: " << user_message(e);
    }
  }
  // A request that ends in an error (a failed step) would make the run look short and the figure
  // meaningless: the bench fails instead, naming the first error.
  int64_t failed = 0;
  std::string first_error;
  while (!engine.is_finished()) {
    for (const RequestOutput& o : engine.step().finished) {
      r.output_tokens += static_cast<int64_t>(o.token_ids.size());
      if (o.finish_reason == "error" && failed++ == 0) first_error = o.error;
    }
  }
  r.seconds = seconds_since(t0);
  MINIVLLM_CHECK(failed == 0) << failed << " of the workload's " << w.prompt_token_ids.size()
                              << " sequences failed, so there is no throughput to report; the first: "
                              << user_message(Error(first_error));
  return r;
}

// The decode run's prompts: context_len tokens of the workload's first prompt, repeated as needed,
// the j-th of `batch` starting j tokens further into it and its first token replaced by j, so that
// no two share a cached block (each sequence reads its own KV, as separate users' would).
DecodeResult run_decode(LLMEngine& engine, const BenchWorkload& w, int decode_tokens, int context_len, int batch) {
  const auto& src = w.prompt_token_ids.at(0);
  SamplingParams sp;
  sp.temperature = 0;
  sp.ignore_eos = true;
  sp.max_tokens = decode_tokens;
  for (int j = 0; j < batch; ++j) {
    std::vector<int32_t> prompt(static_cast<size_t>(context_len));
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = src[(i + static_cast<size_t>(j)) % src.size()];
    if (j > 0) prompt[0] = j;
    engine.add_request(prompt, sp);
  }
  DecodeResult r;
  while (!engine.is_finished()) {
    const Clock::time_point t0 = Clock::now();
    const StepResult s = engine.step();
    const double dt = seconds_since(t0);
    for (const RequestOutput& o : s.finished) {
      MINIVLLM_CHECK(o.finish_reason != "error") << "the decode run's sequence failed: " << user_message(Error(o.error));
    }
    if (s.num_tokens < 0) {  // a decode step (the prefill step also samples a token; it is excluded)
      r.seconds += dt;
      r.tokens += -s.num_tokens;
    }
  }
  return r;
}

std::string format(const char* fmt, double a, double b, double c) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, a, b, c);
  return buf;
}

// Always the whole draw, then its first sequences: bench.py draws every prompt before any
// max_tokens, so drawing fewer sequences would change the output lengths.
// Without --num-seqs, every sequence of the workload.
BenchWorkload workload_from(const ParsedArgs& a, std::optional<int64_t> requested) {
  BenchWorkload w = a.has("--workload") ? load_workload(*a.get("--workload")) : make_seeds_workload(256);
  const int64_t num_seqs = requested.value_or(static_cast<int64_t>(w.prompt_token_ids.size()));
  MINIVLLM_CHECK(static_cast<size_t>(num_seqs) <= w.prompt_token_ids.size())
      << "--num-seqs " << num_seqs << " exceeds the workload's " << w.prompt_token_ids.size() << " sequences";
  w.truncate(static_cast<size_t>(std::max<int64_t>(num_seqs, 1)));  // the decode run reuses prompt 0
  return w;
}

void print_dry_run(const BenchWorkload& w, bool as_json) {
  const nlohmann::json report = {{"num_seqs", w.prompt_token_ids.size()},
                                 {"prompt_tokens", w.num_prompt_tokens()},
                                 {"output_tokens", w.num_output_tokens()}};
  if (as_json) {
    std::cout << dump_json(report) << std::endl;
  } else {
    std::cout << "Workload: " << w.prompt_token_ids.size() << " sequences, " << w.num_prompt_tokens()
              << " prompt tokens, " << w.num_output_tokens() << " output tokens" << std::endl;
  }
}

}  // namespace

int run_bench(const std::vector<std::string>& argv) {
  ArgParser p("bench", "bench --model M [--workload FILE.json] [--num-seqs N] [options]",
              "Throughput on nano-vllm's bench.py workload (256 sequences drawn with Python's random.seed(0):\n"
              "142,827 prompt tokens, 133,966 output tokens), then single-sequence greedy decode speed.\n"
              "Prints \"Total: ..tok, Time: ..s, Throughput: ..tok/s\" and a \"Decode: ...\" line.");
  p.option("--workload", "FILE", "read {\"prompt_token_ids\", \"max_tokens\"} from FILE instead")
      .option("--num-seqs", "N", "use the first N sequences of the workload; 0 skips the throughput run (default all)")
      .option("--temperature", "T", "sampling temperature of the throughput run (default 0.6)")
      .option("--decode-tokens", "N", "greedy tokens of the decode run; 0 skips it (default 256)")
      .option("--decode-context", "N",
              "prompt tokens of the decode run (default 128): batch-1 decode at a long context, as\n"
              "llama-bench's -d; prompt plus decode tokens must fit max_model_len")
      .option("--decode-batch", "N",
              "sequences of the decode run, decoding together (default 1); decode_tok_s is then their\n"
              "tokens together a second; at most --max-num-seqs")
      .option("--repeat", "N",
              "run the workload N times, the prefix cache emptied before each, and report the median run\n"
              "(as llama-bench's -r; default 1)")
      .flag("--dry-run", "print the workload's size and token totals, load no model")
      .flag("--json", "print the figures as JSON");
  add_engine_options(p);
  return run_command(p, argv, [](const ParsedArgs& a) {
    const std::optional<int64_t> num_seqs = a.get_optional_int("--num-seqs", 0, 1 << 20);
    const double temperature = a.get_float("--temperature", 0.6);
    if (temperature < 0) throw UsageError("--temperature must be >= 0, got " + *a.get("--temperature"));
    const int decode_tokens = static_cast<int>(a.get_int("--decode-tokens", 256, 0, 1 << 20));
    const int decode_context = static_cast<int>(a.get_int("--decode-context", 128, 1, 1 << 24));
    const int decode_batch = static_cast<int>(a.get_int("--decode-batch", 1, 1, 1 << 16));
    const int repeat = static_cast<int>(a.get_int("--repeat", 1, 1, 1000));
    const bool as_json = a.has("--json");
    if (a.has("--dry-run")) {
      print_dry_run(workload_from(a, num_seqs), as_json);
      return kExitOk;
    }
    const EngineConfig config = engine_config_from(a);
    if (decode_batch > config.max_num_seqs) {
      throw UsageError("--decode-batch " + std::to_string(decode_batch) + " exceeds --max-num-seqs " +
                       std::to_string(config.max_num_seqs) + ": the sequences would not decode together");
    }
    const BenchWorkload w = workload_from(a, num_seqs);
    const auto load_start = Clock::now();
    LLMEngine engine(config);  // weights (or dummy ones) loaded, KV sized, graphs captured
    const double load_s = std::chrono::duration<double>(Clock::now() - load_start).count();
    const ResolvedConfig& rc = engine.config();  // max_model_len capped by the model's: known once loaded
    if (decode_tokens > 0 && static_cast<int64_t>(decode_context) + decode_tokens > rc.max_model_length) {
      throw UsageError("--decode-context " + std::to_string(decode_context) + " plus --decode-tokens " +
                       std::to_string(decode_tokens) + " exceeds max_model_len " +
                       std::to_string(rc.max_model_length) + " (raise --max-model-len or lower them)");
    }
    warm_up(engine, w);

    const int64_t kv_tokens = static_cast<int64_t>(rc.num_kvcache_blocks) * rc.block_size;
    // The KV cache's size in tokens: what kv_cache_dtype fp8 doubles (stderr: stdout may be JSON).
    std::cerr << "KV cache: " << rc.num_kvcache_blocks << " blocks of " << rc.block_size << " tokens = " << kv_tokens
              << " tokens, " << describe_kv_cache_dtype(rc.kv_cache_element) << std::endl;
    nlohmann::json report = {{"model", config.model},
                             {"world_size", config.world_size},
                             {"num_kvcache_blocks", rc.num_kvcache_blocks},
                             {"kv_cache_dtype", dtype_name(rc.kv_cache_element)},
                             {"kv_cache_tokens", kv_tokens},
                             {"load_s", load_s}};
    if (num_seqs.value_or(1) > 0) {
      // Each run starts from an empty prefix cache: a repeated workload would otherwise find every
      // prompt cached and skip its prefill.
      std::vector<ThroughputResult> runs;
      for (int i = 0; i < repeat; ++i) {
        MINIVLLM_CHECK(engine.reset_prefix_cache()) << "the prefix cache could not be emptied before run " << i + 1;
        runs.push_back(run_throughput(engine, w, static_cast<float>(temperature)));
        const ThroughputResult& t = runs.back();
        if (!as_json) {
          std::cout << format("Total: %.0ftok, Time: %.2fs, Throughput: %.2ftok/s",
                              static_cast<double>(t.output_tokens), t.seconds, t.tok_s())
                    << std::endl;
        }
      }
      // The median run (the slower middle one for an even count): one outlier moves nothing.
      std::vector<ThroughputResult> sorted = runs;
      std::sort(sorted.begin(), sorted.end(),
                [](const ThroughputResult& x, const ThroughputResult& y) { return x.seconds > y.seconds; });
      const ThroughputResult& t = sorted[(sorted.size() - 1) / 2];
      const double tok_s = t.tok_s();
      report.update({{"num_seqs", w.prompt_token_ids.size()},
                     {"prompt_tokens", w.num_prompt_tokens()},
                     {"output_tokens", t.output_tokens},
                     {"time_s", t.seconds},
                     {"throughput_tok_s", tok_s}});
      // Prompt tokens found in the prefix cache over every run (the workload's own shared prefixes).
      report["prefix_cache_hit_tokens"] = engine.stats().prefix_cache_hit_tokens;
      if (repeat > 1) {
        nlohmann::json each = nlohmann::json::array();
        for (const ThroughputResult& r : runs) each.push_back(r.tok_s());
        report["throughput_runs_tok_s"] = each;
        if (!as_json) {
          std::cout << format("Median of %.0f runs: %.2ftok/s (slowest %.2f)", repeat, tok_s, sorted.front().tok_s())
                    << std::endl;
        }
      }
    }
    if (decode_tokens > 0) {
      const DecodeResult d = run_decode(engine, w, decode_tokens, decode_context, decode_batch);
      const double tok_s = d.seconds > 0 ? d.tokens / d.seconds : 0.0;
      report.update({{"decode_tokens", d.tokens},
                     {"decode_context", decode_context},
                     {"decode_batch", decode_batch},
                     {"decode_time_s", d.seconds},
                     {"decode_tok_s", tok_s}});
      if (!as_json) {
        std::cout << format("Decode: %.0ftok, Time: %.2fs, Throughput: %.2ftok/s", static_cast<double>(d.tokens),
                            d.seconds, tok_s)
                  << " (batch " << decode_batch << ", " << decode_context << "-token prompt"
                  << (decode_batch > 1 ? "s" : "") << ")" << std::endl;
      }
    }
    if (as_json) std::cout << dump_json(report) << std::endl;
    return kExitOk;
  });
}

}  // namespace minivllm::cli
