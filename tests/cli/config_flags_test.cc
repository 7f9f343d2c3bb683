// The CLI's engine and sampling flags come from the config tables: every key parses from its flag
// to the value its JSON key gives; the flag set is the table's (no flag declared by hand beside
// it); --help shows every key's help, default and range; bad values name the flag.
#include <gtest/gtest.h>

#include <fstream>

#include <set>

#include "api/engine_config.h"
#include "cli/config_flags.h"
#include "cli/options.h"
#include "engine/sampling_keys.h"
#include "run_cli.h"

namespace minivllm::test {
namespace {

using cli::ArgParser;
using nlohmann::json;

// to_json() is an ordered_json (table order); compared as text-equal plain JSON.
json plain(const nlohmann::ordered_json& o) { return json::parse(o.dump()); }

// The CLI arguments that set `sample`'s keys (repeatable flags once per list element).
std::vector<std::string> flags_for(const json& sample, std::span<const ConfigKey> keys) {
  std::vector<std::string> args;
  for (const ConfigKey& k : keys) {
    const std::string name(k.spec.name), flag = cli::key_flag(k);
    if (!sample.contains(name) || k.spec.cli == CliUse::kNone) continue;
    const json& v = sample[name];
    if (k.type == KeyType::kBool) {
      if (v.dump() != k.default_json) args.push_back(flag);
    } else if (k.type == KeyType::kTokenMap) {  // repeatable ID=VALUE
      for (const auto& [id, x] : v.items()) args.insert(args.end(), {flag, id + "=" + x.dump()});
    } else if (v.is_array()) {
      for (const json& e : v) args.insert(args.end(), {flag, e.is_string() ? e.get<std::string>() : e.dump()});
    } else {
      args.insert(args.end(), {flag, v.is_string() ? v.get<std::string>() : v.dump()});
    }
  }
  return args;
}

ArgParser engine_and_sampling_parser() {
  ArgParser p("test", "test [options]", "");
  cli::add_sampling_options(p, 64, /*with_opt_in=*/true);
  cli::add_engine_options(p);
  return p;
}

const json kEngineSample = {{"model", "m"},
                            {"device", "cpu"},
                            {"max_num_seqs", 7},
                            {"max_waiting_requests", 11},
                            {"max_num_batched_tokens", 9000},
                            {"max_model_len", 512},
                            {"block_size", 32},
                            {"num_kvcache_blocks", 100},
                            {"kv_cache_dtype", "fp8_e4m3"},
                            {"quantization", "fp8"},
                            {"gpu_memory_utilization", 0.5},
                            {"enforce_eager", true},
                            {"async_scheduling", "off"},
                            {"overlap_grammar_masks", false},
                            {"enable_chunked_prefill", false},
                            {"tensor_parallel_size", 2},
                            {"enable_expert_parallel", true},
                            {"num_threads", 3},
                            {"eos", 5},
                            {"load_format", "dummy"},
                            {"dummy_seed", 9},
                            {"hf_overrides", R"({"max_position_embeddings":1024})"},
                            {"generation_config", "vllm"},
                            {"chat_template", "{{ messages[0].content }}"}};
const json kSamplingSample = {{"max_tokens", 9},         {"temperature", 0.5},        {"top_k", 40},
                              {"top_p", 0.75},           {"min_p", 0.125},            {"seed", 42},
                              {"ignore_eos", true},      {"stop", {"a", "bc"}},       {"stop_token_ids", {5, 6}},
                              {"presence_penalty", 0.5}, {"frequency_penalty", -0.25}, {"repetition_penalty", 1.5},
                              {"n", 3},                  {"logprobs", 2},             {"logit_bias", {{"5", 1.5}}},
                              {"min_tokens", 2},         {"bad_words", {"x", "y z"}}, {"prompt_logprobs", 1},
                              {"include_stop_str_in_output", true}, {"skip_special_tokens", false}, {"truncate_prompt_tokens", 7},
                              {"allowed_token_ids", {7, 8}},
                              {"structured_outputs", nullptr}};  // no flag of its own: see StructuredOutputFlags

TEST(ConfigFlags, EveryKeyParsesFromItsFlagAsFromJson) {
  for (const ConfigKey& k : engine_config_keys()) ASSERT_TRUE(kEngineSample.contains(k.spec.name)) << k.spec.name;
  for (const ConfigKey& k : sampling_keys()) ASSERT_TRUE(kSamplingSample.contains(k.spec.name)) << k.spec.name;
  std::vector<std::string> args = flags_for(kEngineSample, engine_config_keys());
  const std::vector<std::string> sampling = flags_for(kSamplingSample, sampling_keys());
  args.insert(args.end(), sampling.begin(), sampling.end());
  const cli::ParsedArgs a = engine_and_sampling_parser().parse(args);
  EXPECT_EQ(cli::engine_config_from(a).to_json(), EngineConfig::from_json(kEngineSample).to_json());
  EXPECT_EQ(plain(cli::engine_config_from(a).to_json()), kEngineSample);
  EXPECT_EQ(cli::sampling_params_from(a, 64).to_json(), SamplingParams::from_json(kSamplingSample).to_json());
  EXPECT_EQ(plain(cli::sampling_params_from(a, 64).to_json()), kSamplingSample);
}

TEST(ConfigFlags, AliasesDefaultsAndBothNames) {
  const ArgParser p = engine_and_sampling_parser();
  const auto c = cli::engine_config_from(p.parse({"--model", "m", "--world-size", "4", "--max-model-length", "64"}));
  EXPECT_EQ(c.world_size, 4);
  EXPECT_EQ(c.max_model_length, 64);
  EXPECT_EQ(c.max_num_batched_tokens, EngineConfig{}.max_num_batched_tokens);
  EXPECT_EQ(cli::engine_config_from(p.parse({"--model", "m", "--max-model-len", "32768"})).max_num_batched_tokens,
            EngineConfig{}.max_num_batched_tokens);  // chunked prefill: the budget need not hold a prompt
  const auto whole = cli::engine_config_from(
      p.parse({"--model", "m", "--max-model-len", "32768", "--no-enable-chunked-prefill"}));
  EXPECT_FALSE(whole.enable_chunked_prefill);
  EXPECT_EQ(whole.max_num_batched_tokens, 32768);
  EXPECT_EQ(cli::sampling_params_from(p.parse({}), 77).max_tokens, 77);
  EXPECT_EQ(cli::sampling_params_from(p.parse({}), 77).to_json().dump(),
            SamplingParams::from_json({{"max_tokens", 77}}).to_json().dump());
  EXPECT_THROW(cli::engine_config_from(p.parse({"--model", "m", "--world-size", "2", "--tensor-parallel-size", "2"})),
               cli::UsageError);
}

// The flag a UsageError from `f` starts with.
template <class F>
std::string flag_of_error(F&& f) {
  try {
    f();
  } catch (const cli::UsageError& e) {
    const std::string what = e.what();
    return what.substr(0, what.find(' '));
  }
  return "no error";
}

TEST(ConfigFlags, BadValuesNameTheFlagGiven) {
  const ArgParser p = engine_and_sampling_parser();
  auto engine = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--model", "m"});
    return flag_of_error([&] { cli::engine_config_from(p.parse(args)); });
  };
  auto sampling = [&](std::vector<std::string> args) {
    return flag_of_error([&] { cli::sampling_params_from(p.parse(args), 64); });
  };
  EXPECT_EQ(engine({"--block-size", "20"}), "--block-size");
  EXPECT_EQ(engine({"--block-size", "x"}), "--block-size");
  EXPECT_EQ(engine({"--max-model-len", "0"}), "--max-model-len");
  EXPECT_EQ(engine({"--tensor-parallel-size", "65"}), "--tensor-parallel-size");
  EXPECT_EQ(engine({"--kv-cache-dtype", "fp4"}), "--kv-cache-dtype");
  EXPECT_EQ(engine({"--gpu-memory-utilization", "nan"}), "--gpu-memory-utilization");
  EXPECT_EQ(engine({"--device", "tpu"}), "--device");
  EXPECT_EQ(engine({"--num-kvcache-blocks", "0"}), "--num-kvcache-blocks");
  EXPECT_EQ(engine({"--max-num-batched-tokens", "10", "--max-model-len", "20"}), "--max-num-batched-tokens");
  EXPECT_EQ(flag_of_error([&] { cli::engine_config_from(p.parse({})); }), "--model");
  EXPECT_EQ(sampling({"--top-p", "0"}), "--top-p");
  EXPECT_EQ(sampling({"--max-tokens", "0"}), "--max-tokens");
  EXPECT_EQ(sampling({"--stop", ""}), "--stop");
  EXPECT_EQ(sampling({"--stop-token-ids", "-1"}), "--stop-token-ids");
  EXPECT_EQ(sampling({"--logprobs", "21"}), "--logprobs");
  EXPECT_EQ(sampling({"--n", "1.5"}), "--n");
  EXPECT_EQ(sampling({"--logit-bias", "5"}), "--logit-bias");
  EXPECT_EQ(sampling({"--logit-bias", "5=x"}), "--logit-bias");
  EXPECT_EQ(sampling({"--logit-bias", "5=101"}), "--logit-bias");
  EXPECT_EQ(sampling({"--min-tokens", "-1"}), "--min-tokens");
}

// The structured_outputs key from its three flags (a schema or grammar read from a file), one at a time.
TEST(ConfigFlags, StructuredOutputFlags) {
  const ArgParser p = engine_and_sampling_parser();
  const std::string schema = testing::TempDir() + "/schema.json", grammar = testing::TempDir() + "/g.ebnf";
  std::ofstream(schema) << R"({"type": "object", "properties": {"a": {"type": "integer"}}})";
  std::ofstream(grammar) << R"(root ::= "yes" | "no")";
  EXPECT_EQ(cli::sampling_params_from(p.parse({"--json-schema", schema}), 64).structured_outputs.json,
            R"({"properties":{"a":{"type":"integer"}},"type":"object"})");
  EXPECT_EQ(cli::sampling_params_from(p.parse({"--regex", "[0-9]+"}), 64).structured_outputs.regex, "[0-9]+");
  EXPECT_EQ(cli::sampling_params_from(p.parse({"--grammar", grammar}), 64).structured_outputs.grammar,
            R"(root ::= "yes" | "no")");
  EXPECT_THROW(cli::sampling_params_from(p.parse({"--regex", "a", "--grammar", grammar}), 64), cli::UsageError);
  EXPECT_THROW(cli::sampling_params_from(p.parse({"--grammar", "/no/such/file"}), 64), cli::UsageError);
}

// The flags of a parser with only the tables' options are the tables' keys and aliases, each once.
TEST(ConfigFlags, TheFlagSetIsTheTables) {
  std::multiset<std::string> want;
  for (const ConfigKey& k : engine_config_keys()) {
    want.insert(cli::key_flag(k));
    if (!k.spec.alias.empty()) want.insert(cli_flag(k.spec.alias));
  }
  for (const ConfigKey& k : sampling_keys()) {
    if (k.spec.cli != CliUse::kNone) want.insert(cli::key_flag(k));
    if (k.spec.cli != CliUse::kNone && !k.spec.alias.empty()) want.insert(cli_flag(k.spec.alias));
  }
  for (const char* f : {"--json-schema", "--regex", "--grammar"}) want.insert(f);  // structured_outputs' flags
  const std::vector<std::string> names = engine_and_sampling_parser().names();
  EXPECT_EQ(std::multiset<std::string>(names.begin(), names.end()), want);
  // Declaring a table's flag by hand as well is refused when the parser is built.
  ArgParser twice("test", "test", "");
  twice.option("--block-size", "N", "by hand");
  EXPECT_THROW(cli::add_engine_options(twice), std::logic_error);
}

// Each subcommand's --help shows every key it takes with the table's help, default and range.
TEST(ConfigFlags, HelpListsEveryKeyWithHelpAndDefault) {
  for (const char* cmd : {"generate", "chat", "bench", "perplexity", "serve"}) {
    const CliResult r = run_cli({cmd, "--help"});
    ASSERT_EQ(r.exit_code, 0) << cmd << ": " << r.err;
    for (const ConfigKey& k : engine_config_keys()) {
      const std::string flag = cli::key_flag(k);
      EXPECT_NE(r.out.find("  " + flag + " "), std::string::npos) << cmd << " lacks " << flag << "\n" << r.out;
      EXPECT_NE(r.out.find(cli::key_help(k)), std::string::npos) << cmd << ": " << flag << "\n" << r.out;
      if (!k.spec.required) {
        EXPECT_NE(cli::key_help(k).find("default: "), std::string::npos) << flag;
      }
    }
    if (std::string(cmd) == "generate" || std::string(cmd) == "chat") {
      for (const ConfigKey& k : sampling_keys()) {
        const std::string flag = cli::key_flag(k);
        if (k.spec.cli == CliUse::kNone) continue;  // structured_outputs: --json-schema, --regex, --grammar
        if (k.spec.cli == CliUse::kOptIn && std::string(cmd) != "generate") {
          EXPECT_EQ(r.out.find("  " + flag + " "), std::string::npos) << cmd << " has " << flag;
          continue;
        }
        EXPECT_NE(r.out.find("  " + flag + " "), std::string::npos) << cmd << " lacks " << flag << "\n" << r.out;
        if (k.spec.name != "max_tokens") {  // its default is the command's
          EXPECT_NE(r.out.find(cli::key_help(k)), std::string::npos) << cmd << ": " << flag << "\n" << r.out;
        }
      }
    }
  }
  const CliResult gen = run_cli({"generate", "--help"});
  EXPECT_NE(gen.out.find("KV cache block size in tokens (default: 256; >= 16 and a multiple of 16)"), std::string::npos)
      << gen.out;
  EXPECT_NE(gen.out.find("tokens to generate at most (default: 64; >= 1)"), std::string::npos) << gen.out;
  EXPECT_NE(run_cli({"chat", "--help"}).out.find("tokens to generate at most (default: 512; >= 1)"), std::string::npos);
}

}  // namespace
}  // namespace minivllm::test
