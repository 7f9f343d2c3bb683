#include "cli/options.h"

#include <cmath>
#include <limits>

#include "cli/cli_io.h"
#include "cli/json_input.h"
#include "common/check.h"

namespace minivllm::cli {
namespace {

constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();

}  // namespace

void add_engine_options(ArgParser& p) {
  p.option("--model", "M", "Hugging Face directory, .gguf file, or SmolLM2-135M-Instruct (required)")
      .option("--device", "D", "auto | cpu | cuda (default auto)")
      .option("--max-num-seqs", "N", "sequences per batch (default 512)")
      .option("--max-num-batched-tokens", "N",
              "tokens one step computes: decodes, then prefill chunks (default 16384, at least --max-num-seqs)")
      .flag("--no-chunked-prefill", "whole prompts in prefill-only steps (budget raised to --max-model-len)")
      .option("--max-model-len", "N", "longest prompt + completion (default 4096)")
      .option("--block-size", "N", "KV cache block size in tokens, a multiple of 16 (default 256)")
      .option("--num-kvcache-blocks", "N", "KV cache blocks (default: sized from free memory)")
      .option("--gpu-memory-utilization", "F", "fraction of GPU memory to use (default 0.9)")
      .flag("--enforce-eager", "no CUDA graphs")
      .option("--tensor-parallel-size", "N", "ranks (GPUs, or CPU processes) the model is split over (default 1)")
      .option("--world-size", "N", "same as --tensor-parallel-size")
      .option("--num-threads", "N", "CPU threads, 0 = all cores (default 0)")
      .option("--eos", "ID", "end-of-sequence token id (default: the model's own)");
}

EngineConfig engine_config_from(const ParsedArgs& a) {
  EngineConfig c;
  c.model = a.required("--model");
  c.device = a.get("--device").value_or(c.device);
  if (c.device != "auto" && c.device != "cpu" && c.device != "cuda") {
    throw UsageError("--device must be auto, cpu or cuda, got '" + c.device + "'");
  }
  c.max_num_seqs = static_cast<int>(a.get_int("--max-num-seqs", c.max_num_seqs, 1, kIntMax));
  c.max_num_batched_tokens =
      static_cast<int>(a.get_int("--max-num-batched-tokens", c.max_num_batched_tokens, 1, kIntMax));
  c.max_model_length = static_cast<int>(a.get_int("--max-model-len", c.max_model_length, 1, kIntMax));
  c.block_size = static_cast<int>(a.get_int("--block-size", c.block_size, 16, kIntMax));
  if (c.block_size % 16 != 0) throw UsageError("--block-size must be a multiple of 16, got " + std::to_string(c.block_size));
  c.num_kvcache_blocks = static_cast<int>(a.get_int("--num-kvcache-blocks", c.num_kvcache_blocks, -1, kIntMax));
  if (c.num_kvcache_blocks == 0) throw UsageError("--num-kvcache-blocks must be -1 (auto) or >= 1, got 0");
  c.gpu_memory_utilization = static_cast<float>(a.get_float("--gpu-memory-utilization", c.gpu_memory_utilization));
  if (!(c.gpu_memory_utilization > 0.0f && c.gpu_memory_utilization <= 1.0f)) {
    throw UsageError("--gpu-memory-utilization must be in (0, 1], got " + *a.get("--gpu-memory-utilization"));
  }
  c.enforce_eager = a.has("--enforce-eager");
  if (a.has("--tensor-parallel-size") && a.has("--world-size")) {
    throw UsageError("give --tensor-parallel-size or --world-size, not both");
  }
  const char* tp_flag = a.has("--world-size") ? "--world-size" : "--tensor-parallel-size";
  c.world_size = static_cast<int>(a.get_int(tp_flag, c.world_size, 1, 64));
  c.num_threads = static_cast<int>(a.get_int("--num-threads", c.num_threads, 0, 4096));
  c.eos = a.get_int("--eos", c.eos, -1, std::numeric_limits<int64_t>::max());
  c.enable_chunked_prefill = !a.has("--no-chunked-prefill");
  // A large --max-num-seqs should not trip the batched-tokens check when the user left that flag
  // alone; without chunked prefill a larger --max-model-len raises it too, so that any prompt fits
  // one prefill.
  if (!a.has("--max-num-batched-tokens")) {
    c.max_num_batched_tokens = std::max(c.max_num_batched_tokens, c.max_num_seqs);
    if (!c.enable_chunked_prefill) c.max_num_batched_tokens = std::max(c.max_num_batched_tokens, c.max_model_length);
  }
  try {
    c.validate();
  } catch (const Error& e) {
    throw UsageError(user_message(e));
  }
  return c;
}

void add_sampling_options(ArgParser& p, int default_max_tokens) {
  p.option("--max-tokens", "N", "tokens to generate at most (default " + std::to_string(default_max_tokens) + ")")
      .option("--temperature", "T", "sampling temperature, 0 = greedy (default 1.0)")
      .option("--top-k", "K", "keep the K most likely tokens (default off)")
      .option("--top-p", "P", "nucleus sampling mass in (0, 1] (default 1)")
      .option("--min-p", "P", "drop tokens below P x the top probability (default 0)")
      .option("--seed", "S", "seed for reproducible sampling")
      .flag("--ignore-eos", "keep generating past end-of-sequence tokens")
      .option("--stop", "STR", "stop string, not included in the output (repeatable)")
      .option("--presence-penalty", "F", "subtract F from tokens already generated, in [-2, 2] (default 0)")
      .option("--frequency-penalty", "F", "subtract F x times generated, in [-2, 2] (default 0)")
      .option("--repetition-penalty", "F",
              "divide positive (multiply negative) logits of prompt and generated tokens by F > 0 (default 1)");
}

SamplingParams sampling_params_from(const ParsedArgs& a, int default_max_tokens) {
  SamplingParams s;
  s.max_tokens = static_cast<int>(a.get_int("--max-tokens", default_max_tokens, 1, kIntMax));
  s.temperature = static_cast<float>(a.get_float("--temperature", s.temperature));
  if (s.temperature < 0) throw UsageError("--temperature must be >= 0, got " + *a.get("--temperature"));
  s.top_k = static_cast<int>(a.get_int("--top-k", s.top_k, -1, kIntMax));
  s.top_p = static_cast<float>(a.get_float("--top-p", s.top_p));
  if (!(s.top_p > 0.0f && s.top_p <= 1.0f)) throw UsageError("--top-p must be in (0, 1], got " + *a.get("--top-p"));
  s.min_p = static_cast<float>(a.get_float("--min-p", s.min_p));
  if (!(s.min_p >= 0.0f && s.min_p <= 1.0f)) throw UsageError("--min-p must be in [0, 1], got " + *a.get("--min-p"));
  if (auto seed = a.get_optional_int("--seed", 0, std::numeric_limits<int64_t>::max())) {
    s.seed = static_cast<uint64_t>(*seed);
  }
  s.ignore_eos = a.has("--ignore-eos");
  s.presence_penalty = static_cast<float>(a.get_float("--presence-penalty", s.presence_penalty));
  if (!(s.presence_penalty >= -2.0f && s.presence_penalty <= 2.0f)) {
    throw UsageError("--presence-penalty must be in [-2, 2], got " + *a.get("--presence-penalty"));
  }
  s.frequency_penalty = static_cast<float>(a.get_float("--frequency-penalty", s.frequency_penalty));
  if (!(s.frequency_penalty >= -2.0f && s.frequency_penalty <= 2.0f)) {
    throw UsageError("--frequency-penalty must be in [-2, 2], got " + *a.get("--frequency-penalty"));
  }
  s.repetition_penalty = static_cast<float>(a.get_float("--repetition-penalty", s.repetition_penalty));
  if (!(s.repetition_penalty > 0.0f && std::isfinite(s.repetition_penalty))) {
    throw UsageError("--repetition-penalty must be > 0, got " + *a.get("--repetition-penalty"));
  }
  s.stop = a.all("--stop");
  for (const std::string& stop : s.stop) {
    if (stop.empty()) throw UsageError("--stop must not be empty");
  }
  try {
    s.validate();
  } catch (const Error& e) {
    throw UsageError(user_message(e));
  }
  return s;
}

void add_template_var_option(ArgParser& p) {
  p.option("--var", "NAME=JSON", "chat-template variable, e.g. --var enable_thinking=false (repeatable)");
}

nlohmann::json template_vars_from(const ParsedArgs& a) {
  nlohmann::json vars = nlohmann::json::object();
  for (const std::string& v : a.all("--var")) {
    const size_t eq = v.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError("--var expects NAME=JSON, got '" + text_excerpt(v) + "'");
    const std::string name = v.substr(0, eq);
    const std::string value = v.substr(eq + 1);
    if (json_too_deep_at(value)) {
      throw UsageError("--var " + text_excerpt(name) + ": the value is nested more than " +
                       std::to_string(kMaxJsonDepth) + " arrays or objects deep");
    }
    try {
      vars[name] = nlohmann::json::parse(value);
    } catch (const nlohmann::json::exception&) {
      throw UsageError("--var " + text_excerpt(name) + ": the value is not JSON: '" + text_excerpt(value) +
                       "' (strings need quotes: --var name='\"text\"')");
    }
  }
  return vars;
}

}  // namespace minivllm::cli
