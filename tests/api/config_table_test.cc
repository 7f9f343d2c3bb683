// The config tables (engine_config_keys(), sampling_keys()): every key parses from JSON onto its
// own member; an unknown key, a wrong type and an out-of-range value are errors naming the key;
// each key and alias is defined once. The CLI side is in tests/cli/config_flags_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "api/engine_config.h"
#include "api/resolved_config.h"
#include "engine/sampling_keys.h"

namespace minivllm {
namespace {

using nlohmann::json;

// to_json() is an ordered_json (table order); compared as text-equal plain JSON.
json plain(const nlohmann::ordered_json& o) { return json::parse(o.dump()); }

// The key a ConfigKeyError from `f` names ("" when `f` does not throw one).
template <class F>
std::string key_of_error(F&& f) {
  try {
    f();
  } catch (const ConfigKeyError& e) {
    EXPECT_NE(std::string(e.what()).find(e.key()), std::string::npos) << e.what();
    return e.key();
  }
  return "";
}

// A non-default, valid value for every engine key, set by hand on the member it belongs to.
json engine_sample() {
  return {{"model", "m"},          {"device", "cpu"},        {"max_num_seqs", 7},          {"max_waiting_requests", 11},
          {"max_num_batched_tokens", 9000}, {"max_model_len", 512}, {"block_size", 32},
          {"num_kvcache_blocks", 100}, {"kv_cache_dtype", "fp8"}, {"quantization", "fp8"}, {"gpu_memory_utilization", 0.5}, {"enforce_eager", true},
          {"async_scheduling", "off"}, {"overlap_grammar_masks", false},
          {"enable_chunked_prefill", false}, {"tensor_parallel_size", 2},       {"num_threads", 3},       {"eos", 5},
          {"load_format", "dummy"}, {"dummy_seed", 9}, {"enable_expert_parallel", true},
          {"hf_overrides", R"({"max_position_embeddings":1024})"}, {"generation_config", "vllm"},
          {"chat_template", "{{ messages[0].content }}"}};
}

json sampling_sample() {
  return {{"max_tokens", 9},          {"temperature", 0.5},      {"top_k", 40},
          {"top_p", 0.75},            {"min_p", 0.125},          {"seed", 42},
          {"ignore_eos", true},       {"stop", {"a", "bc"}},     {"stop_token_ids", {5, 6}},
          {"presence_penalty", 0.5},  {"frequency_penalty", -0.25}, {"repetition_penalty", 1.5},
          {"n", 3},                   {"logprobs", 2},           {"prompt_logprobs", 1},
          {"logit_bias", {{"5", 1.5}}},
          {"min_tokens", 2},          {"bad_words", {"x"}},      {"structured_outputs", {{"regex", "a+"}}},
          {"allowed_token_ids", {7, 8}},
          {"include_stop_str_in_output", true}, {"skip_special_tokens", false}, {"truncate_prompt_tokens", 7}};
}

template <class Keys>
std::set<std::string> names_of(const Keys& keys) {
  std::set<std::string> names;
  for (const ConfigKey& k : keys) names.insert(std::string(k.spec.name));
  return names;
}

TEST(ConfigTable, EveryEngineKeyReachesItsMember) {
  const json sample = engine_sample();
  std::set<std::string> sampled;
  for (const auto& [k, v] : sample.items()) sampled.insert(k);
  ASSERT_EQ(sampled, names_of(engine_config_keys())) << "give every key a sample value here";
  const EngineConfig c = EngineConfig::from_json(sample);
  EXPECT_EQ(c.model, "m");
  EXPECT_EQ(c.device, "cpu");
  EXPECT_EQ(c.max_num_seqs, 7);
  EXPECT_EQ(c.max_waiting_requests, 11);
  EXPECT_EQ(c.max_num_batched_tokens, 9000);
  EXPECT_EQ(c.max_model_length, 512);
  EXPECT_EQ(c.block_size, 32);
  EXPECT_EQ(c.num_kvcache_blocks, 100);
  EXPECT_EQ(c.kv_cache_dtype, "fp8");
  EXPECT_EQ(c.quantization, "fp8");
  EXPECT_EQ(c.gpu_memory_utilization, 0.5f);
  EXPECT_TRUE(c.enforce_eager);
  EXPECT_EQ(c.async_scheduling, "off");
  EXPECT_FALSE(c.overlap_grammar_masks);
  EXPECT_FALSE(c.enable_chunked_prefill);
  EXPECT_EQ(c.world_size, 2);
  EXPECT_TRUE(c.enable_expert_parallel);
  EXPECT_EQ(c.num_threads, 3);
  EXPECT_EQ(c.eos, 5);
  EXPECT_EQ(c.load_format, "dummy");
  EXPECT_EQ(c.dummy_seed, 9);
  EXPECT_EQ(c.hf_overrides, R"({"max_position_embeddings":1024})");
  EXPECT_EQ(c.generation_config, "vllm");
  EXPECT_EQ(c.chat_template, "{{ messages[0].content }}");
  EXPECT_EQ(plain(c.to_json()), sample);
  EXPECT_EQ(plain(EngineConfig::from_json(plain(c.to_json())).to_json()), sample);
}

TEST(ConfigTable, EverySamplingKeyReachesItsMember) {
  const json sample = sampling_sample();
  std::set<std::string> sampled;
  for (const auto& [k, v] : sample.items()) sampled.insert(k);
  ASSERT_EQ(sampled, names_of(sampling_keys())) << "give every key a sample value here";
  const SamplingParams p = SamplingParams::from_json(sample);
  EXPECT_EQ(p.max_tokens, 9);
  EXPECT_EQ(p.temperature, 0.5f);
  EXPECT_EQ(p.top_k, 40);
  EXPECT_EQ(p.top_p, 0.75f);
  EXPECT_EQ(p.min_p, 0.125f);
  EXPECT_EQ(p.seed, std::optional<uint64_t>(42));
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_TRUE(p.include_stop_str_in_output);
  EXPECT_FALSE(p.skip_special_tokens);
  EXPECT_EQ(p.truncate_prompt_tokens, 7);
  EXPECT_EQ(p.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(p.stop_token_ids, (std::vector<int64_t>{5, 6}));
  EXPECT_EQ(p.presence_penalty, 0.5f);
  EXPECT_EQ(p.frequency_penalty, -0.25f);
  EXPECT_EQ(p.repetition_penalty, 1.5f);
  EXPECT_EQ(p.n, 3);
  EXPECT_EQ(p.logprobs, 2);
  EXPECT_EQ(p.prompt_logprobs, 1);
  EXPECT_EQ(p.logit_bias, (std::map<int32_t, float>{{5, 1.5f}}));
  EXPECT_EQ(p.min_tokens, 2);
  EXPECT_EQ(p.bad_words, std::vector<std::string>{"x"});
  EXPECT_EQ(p.structured_outputs.regex, "a+");
  EXPECT_EQ(plain(p.to_json()), sample);
}

TEST(ConfigTable, DefaultsAreTheStructsAndNullKeepsThem) {
  const SamplingParams d = SamplingParams::from_json(json::object());
  EXPECT_EQ(d.to_json(), SamplingParams{}.to_json());
  EXPECT_EQ(SamplingParams::from_json({{"seed", nullptr}, {"logprobs", nullptr}}).to_json(), d.to_json());
  for (const ConfigKey& k : engine_config_keys()) {
    if (k.spec.name == "block_size") {
      EXPECT_EQ(k.default_json, "256");
    }
    if (k.spec.name == "device") {
      EXPECT_EQ(k.default_json, "\"auto\"");
    }
    if (k.spec.name == "num_kvcache_blocks") {
      EXPECT_TRUE(k.nullable);
    }
    EXPECT_FALSE(k.spec.help.empty()) << k.spec.name;
  }
  for (const ConfigKey& k : sampling_keys()) {
    if (k.spec.name == "seed") {
      EXPECT_EQ(k.default_json, "null");
      EXPECT_TRUE(k.nullable);
    }
    if (k.spec.name == "top_p") {
      EXPECT_EQ(k.range_text, "in (0, 1]");
    }
    EXPECT_FALSE(k.spec.help.empty()) << k.spec.name;
  }
  // A string for stop is one stop string; the sentinel may be written out.
  EXPECT_EQ(SamplingParams::from_json({{"stop", "x"}}).stop, std::vector<std::string>{"x"});
  EXPECT_EQ(SamplingParams::from_json({{"logprobs", -1}}).logprobs, -1);
  EXPECT_EQ(EngineConfig::from_json({{"model", "m"}, {"num_kvcache_blocks", -1}}).num_kvcache_blocks, -1);
}

TEST(ConfigTable, KvCacheDtypeTakesItsValuesOnly) {
  EXPECT_EQ(EngineConfig::from_json({{"model", "m"}}).kv_cache_dtype, "auto");
  for (const char* v : {"auto", "bf16", "fp8", "fp8_e4m3"}) {
    EXPECT_EQ(EngineConfig::from_json({{"model", "m"}, {"kv_cache_dtype", v}}).kv_cache_dtype, v);
  }
  EXPECT_EQ(key_of_error([] { EngineConfig::from_json({{"model", "m"}, {"kv_cache_dtype", "fp16"}}); }),
            "kv_cache_dtype");
  EXPECT_EQ(key_of_error([] { EngineConfig::from_json({{"model", "m"}, {"kv_cache_dtype", 8}}); }), "kv_cache_dtype");
}

TEST(ConfigTable, AliasesAndBothNames) {
  EXPECT_EQ(EngineConfig::from_json({{"model", "m"}, {"world_size", 4}}).world_size, 4);
  EXPECT_EQ(EngineConfig::from_json({{"model", "m"}, {"max_model_length", 1024}}).max_model_length, 1024);
  EXPECT_EQ(key_of_error([] { EngineConfig::from_json({{"model", "m"}, {"world_size", 1}, {"tensor_parallel_size", 2}}); }),
            "tensor_parallel_size");
}

TEST(ConfigTable, UnknownKeysAndMissingModelAreNamed) {
  EXPECT_EQ(key_of_error([] { EngineConfig::from_json({{"model", "m"}, {"max_num_seqz", 3}}); }), "max_num_seqz");
  EXPECT_EQ(key_of_error([] { SamplingParams::from_json({{"temprature", 1}}); }), "temprature");
  EXPECT_EQ(key_of_error([] { EngineConfig::from_json({{"device", "cpu"}}); }), "model");
  EXPECT_EQ(key_of_error([] { EngineConfig::from_json({{"model", ""}}); }), "model");
  EXPECT_THROW(EngineConfig::from_json(json::array()), Error);
  EXPECT_THROW(SamplingParams::from_json(json(3)), Error);
}

// A value of the wrong JSON type for each key's type.
json wrong_type(KeyType t) {
  switch (t) {
    case KeyType::kBool: return 1;
    case KeyType::kInt: return 1.5;
    case KeyType::kFloat: return "0.5";
    case KeyType::kString: return 5;
    case KeyType::kIntList: return json{{"a", 1}};
    case KeyType::kStringList: return json::array({1});
    case KeyType::kTokenMap: return json::array({1});
    case KeyType::kObject: return 5;
  }
  return nullptr;
}

// Values outside each key's range, from its spec ({} when any value of the type is allowed).
std::vector<json> out_of_range(const ConfigKey& k) {
  const KeySpec& s = k.spec;
  std::vector<json> bad;
  if (k.type == KeyType::kInt || k.type == KeyType::kIntList || k.type == KeyType::kFloat) {
    const bool is_int = k.type != KeyType::kFloat;
    auto wrap = [&](double v) { return k.type == KeyType::kIntList ? json::array({v}) : json(v); };
    auto wrap_int = [&](int64_t v) { return k.type == KeyType::kIntList ? json::array({v}) : json(v); };
    if (std::isfinite(s.min)) {
      if (!is_int) bad.push_back(wrap(s.min_open ? s.min : s.min - 0.5));
      else {
        int64_t v = static_cast<int64_t>(s.min) - 1;
        if (s.has_sentinel && v == s.sentinel) --v;
        bad.push_back(wrap_int(v));
      }
    }
    if (std::isfinite(s.max)) bad.push_back(is_int ? wrap_int(static_cast<int64_t>(s.max) + 1) : wrap(s.max + 0.5));
    if (s.multiple_of > 0) bad.push_back(static_cast<int64_t>(s.min) + 1);
    if (is_int && !std::isfinite(s.max) && k.type == KeyType::kInt && s.name != "seed" && s.name != "eos" &&
        s.name != "dummy_seed") {  // 64-bit members
      bad.push_back(int64_t{1} << 40);  // a 32-bit member
    }
  }
  if (k.type == KeyType::kFloat) bad.push_back(1e300);  // not finite as a float
  if (k.type == KeyType::kString && !s.choices[0].empty()) bad.push_back("nope");
  if (k.type == KeyType::kString && s.required) bad.push_back("");
  if (k.type == KeyType::kStringList) bad.push_back(json::array({""}));
  if (k.type == KeyType::kTokenMap) {
    bad.push_back({{"5", s.max + 1}});
    bad.push_back({{"-1", 0}});
  }
  if (k.type == KeyType::kObject) bad.push_back({{"regex", "a"}, {"choice", {"b"}}});  // two at once
  return bad;
}

template <class Parse>
void expect_bad_values_named(std::span<const ConfigKey> keys, json base, Parse parse) {
  for (const ConfigKey& k : keys) {
    const std::string name(k.spec.name);
    json wrong = base;
    wrong[name] = wrong_type(k.type);
    EXPECT_EQ(key_of_error([&] { parse(wrong); }), name) << wrong.dump();
    const std::vector<json> bad = out_of_range(k);
    EXPECT_EQ(bad.empty(), k.range_text.empty()) << name << ": range '" << k.range_text << "'";
    for (const json& v : bad) {
      json j = base;
      j[name] = v;
      EXPECT_EQ(key_of_error([&] { parse(j); }), name) << j.dump();
    }
  }
}

TEST(ConfigTable, WrongTypesAndOutOfRangeValuesNameTheKey) {
  expect_bad_values_named(engine_config_keys(), {{"model", "m"}}, [](const json& j) { EngineConfig::from_json(j); });
  expect_bad_values_named(sampling_keys(), json::object(), [](const json& j) { SamplingParams::from_json(j); });
  try {
    EngineConfig::from_json({{"model", "m"}, {"block_size", 20}});
    FAIL() << "no error";
  } catch (const ConfigKeyError& e) {
    EXPECT_STREQ(e.what(), "config key 'block_size' must be >= 16 and a multiple of 16, got 20");
  }
  try {
    SamplingParams::from_json({{"top_p", 1.5}});
    FAIL() << "no error";
  } catch (const ConfigKeyError& e) {
    EXPECT_STREQ(e.what(), "top_p must be in (0, 1], got 1.5");
    EXPECT_EQ(e.problem(), "must be in (0, 1], got 1.5");
  }
}

TEST(ConfigTable, ValidateChecksMembersSetInCpp) {
  EngineConfig c;
  c.model = "m";
  c.gpu_memory_utilization = 1.5f;
  EXPECT_EQ(key_of_error([&] { c.validate(); }), "gpu_memory_utilization");
  c = EngineConfig{};
  c.model = "m";
  c.num_kvcache_blocks = 0;
  EXPECT_EQ(key_of_error([&] { c.validate(); }), "num_kvcache_blocks");
  SamplingParams p;
  p.temperature = NAN;
  EXPECT_EQ(key_of_error([&] { p.validate(); }), "temperature");
  p = SamplingParams{};
  p.stop_token_ids = {-3};
  EXPECT_EQ(key_of_error([&] { p.validate(); }), "stop_token_ids");
}

// hf_overrides is a JSON object's text: an object (a Python dict, a config file's) is taken as its
// text, and anything but an object is an error naming the key.
TEST(ConfigTable, HfOverridesAreAJsonObject) {
  const json rope = {{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}}};
  const EngineConfig c = EngineConfig::from_json({{"model", "m"}, {"hf_overrides", rope}});
  EXPECT_EQ(json::parse(c.hf_overrides), rope);
  EXPECT_EQ(EngineConfig::from_json({{"model", "m"}, {"hf_overrides", rope.dump()}}).hf_overrides, rope.dump());
  for (const json& bad : {json("[1]"), json("{\"a\": "), json("4"), json(4)}) {
    SCOPED_TRACE(bad.dump());
    EXPECT_EQ(key_of_error([&] { EngineConfig::from_json({{"model", "m"}, {"hf_overrides", bad}}); }), "hf_overrides");
  }
}

TEST(ConfigTable, BatchedTokensFollowTheContextUnlessGiven) {
  // Chunked prefill (the default): a prompt longer than the budget is prefilled in chunks.
  EXPECT_EQ(EngineConfig::from_json({{"model", "m"}, {"max_model_len", 32768}}).max_num_batched_tokens, 16384);
  EXPECT_EQ(EngineConfig::from_json(
                {{"model", "m"}, {"max_model_len", 32768}, {"max_num_seqs", 64}, {"max_num_batched_tokens", 100}})
                .max_num_batched_tokens,
            100);
  EXPECT_EQ(EngineConfig::from_json({{"model", "m"}, {"max_num_seqs", 20000}}).max_num_batched_tokens, 20000);
  EXPECT_EQ(key_of_error([] {
              EngineConfig::from_json({{"model", "m"}, {"max_num_seqs", 200}, {"max_num_batched_tokens", 100}});
            }),
            "max_num_batched_tokens");
  // Whole prompts: the budget follows the context unless given, and must hold it when given.
  const json whole = {{"model", "m"}, {"enable_chunked_prefill", false}};
  json j = whole;
  j["max_model_len"] = 32768;
  EXPECT_EQ(EngineConfig::from_json(j).max_num_batched_tokens, 32768);
  j["max_model_len"] = 64;
  EXPECT_EQ(EngineConfig::from_json(j).max_num_batched_tokens, 16384);
  j["max_model_len"] = 32768;
  j["max_num_seqs"] = 64;
  j["max_num_batched_tokens"] = 100;
  EXPECT_EQ(key_of_error([&] { EngineConfig::from_json(j); }), "max_num_batched_tokens");
}

// Each name (and alias) belongs to one key, in each table and across both (the Python bindings
// take engine and sampling keys side by side).
TEST(ConfigTable, EachNameIsDefinedOnce) {
  std::set<std::string> seen;
  auto add = [&](std::string_view n) {
    if (!n.empty()) {
      EXPECT_TRUE(seen.insert(std::string(n)).second) << "'" << n << "' is defined twice";
    }
  };
  for (const ConfigKey& k : engine_config_keys()) {
    add(k.spec.name);
    add(k.spec.alias);
  }
  for (const ConfigKey& k : sampling_keys()) {
    add(k.spec.name);
    add(k.spec.alias);
  }
}

}  // namespace
}  // namespace minivllm

namespace minivllm {
namespace {

// The derived values, resolved in one place from the keys and the model.
TEST(ResolvedConfig, DerivedValuesComeFromTheKeysAndTheModel) {
  ModelConfig model;
  model.max_position_embeddings = 2048;
  model.eos_token_ids = {7, 3};
  const EngineConfig c =
      EngineConfig::from_json({{"model", "m"}, {"max_model_len", 8192}, {"max_num_batched_tokens", 8192}});
  const ResolvedConfig r = resolve_config(c, model, nullptr);
  EXPECT_EQ(r.max_model_length, 2048);  // capped by the model
  EXPECT_EQ(r.max_num_batched_tokens, 8192);
  EXPECT_EQ(r.eos_token_ids, (std::vector<int64_t>{3, 7}));
  EXPECT_EQ(r.runner_config().max_model_length, 2048);
  EXPECT_EQ(r.scheduler_config().max_model_length, 2048);
  EXPECT_EQ(r.scheduler_config().eos_token_ids, r.eos_token_ids);

  // yarn's factor x original extends the cap past max_position_embeddings (Qwen's recipe).
  model.rope_scaling.type = "yarn";
  model.rope_scaling.factor = 4.0;
  model.rope_scaling.original_max_position_embeddings = 1024;
  EXPECT_EQ(resolve_config(c, model, nullptr).max_model_length, 4096);
  model.rope_scaling = RopeScaling{};

  model.max_position_embeddings = 32768;
  const EngineConfig small = EngineConfig::from_json({{"model", "m"}, {"max_model_len", 1024}, {"eos", 5}});
  const ResolvedConfig s = resolve_config(small, model, nullptr);
  EXPECT_EQ(s.max_model_length, 1024);
  EXPECT_EQ(s.eos_token_ids, std::vector<int64_t>{5});
  EXPECT_EQ(s.runner_config().num_kvcache_blocks, -1);  // the runner sizes it; LLMEngine records it
}

}  // namespace
}  // namespace minivllm
