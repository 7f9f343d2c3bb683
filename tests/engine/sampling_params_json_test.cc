// SamplingParams::from_json / to_json: what the Python package's keyword arguments go through.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/check.h"
#include "common/config_key.h"
#include "engine/sampling_params.h"

namespace minivllm {
namespace {

std::string error_of(const char* text) {
  try {
    SamplingParams::from_json(nlohmann::json::parse(text));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SamplingParamsJson, ReadsEveryFieldAndWritesItBack) {
  const SamplingParams s = SamplingParams::from_json(nlohmann::json::parse(
      R"({"temperature": 0.5, "top_k": 5, "top_p": 0.9, "min_p": 0.1, "max_tokens": 7, "ignore_eos": true,
          "seed": 42, "stop_token_ids": [3, 4], "stop": "end", "n": 2, "logprobs": 3,
          "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.2})"));
  EXPECT_EQ(s.top_k, 5);
  EXPECT_EQ(s.max_tokens, 7);
  EXPECT_TRUE(s.ignore_eos);
  ASSERT_TRUE(s.seed.has_value());
  EXPECT_EQ(*s.seed, 42u);
  EXPECT_EQ(s.stop, std::vector<std::string>{"end"});
  EXPECT_EQ(s.stop_token_ids, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(s.n, 2);
  EXPECT_EQ(s.logprobs, 3);
  // to_json gives every field, and reads back to the same values.
  const nlohmann::ordered_json j = s.to_json();
  EXPECT_EQ(j.at("max_tokens"), 7);
  EXPECT_EQ(j.at("seed"), 42);
  EXPECT_EQ(SamplingParams::from_json(nlohmann::json::parse(j.dump())).to_json(), j);
}

TEST(SamplingParamsJson, DefaultsAndNulls) {
  const SamplingParams s = SamplingParams::from_json(nlohmann::json::parse(R"({"seed": null, "logprobs": null})"));
  EXPECT_FALSE(s.seed.has_value());
  EXPECT_EQ(s.logprobs, -1);
  EXPECT_EQ(s.to_json(), SamplingParams{}.to_json());
  EXPECT_TRUE(s.to_json()["seed"].is_null());
}

// The message names the key (the Python package raises it as ValueError, tests/python checks that).
TEST(SamplingParamsJson, ErrorsNameTheKey) {
  for (const auto& [text, key] : std::vector<std::pair<const char*, const char*>>{
           {R"({"temprature": 1})", "temprature"},
           {R"({"max_tokens": "many"})", "max_tokens"},
           {R"({"ignore_eos": 1})", "ignore_eos"},
           {R"({"n": true})", "n"},
           {R"({"seed": "x"})", "seed"},
           {R"({"stop": [1]})", "stop"},
           {R"({"top_p": 0})", "top_p"}}) {
    const std::string e = error_of(text);
    EXPECT_FALSE(e.empty()) << text;
    EXPECT_NE(e.find(std::string(key)), std::string::npos) << text << " -> " << e;
  }
  EXPECT_FALSE(error_of("[1]").empty());
}

}  // namespace
}  // namespace minivllm

namespace minivllm {
namespace {

// logit_bias is OpenAI's object of token id (in decimal) to a bias in [-100, 100]; min_tokens and
// bad_words are vLLM's. Bad values name the key and the entry at fault.
TEST(SamplingParamsJson, LogitBiasMinTokensBadWords) {
  const SamplingParams s = SamplingParams::from_json(nlohmann::json::parse(
      R"({"logit_bias": {"50256": -100, "7": 2.5}, "min_tokens": 3, "bad_words": ["foo", "bar baz"]})"));
  EXPECT_EQ(s.logit_bias, (std::map<int32_t, float>{{7, 2.5f}, {50256, -100.0f}}));
  EXPECT_EQ(s.min_tokens, 3);
  EXPECT_EQ(s.bad_words, (std::vector<std::string>{"foo", "bar baz"}));
  EXPECT_TRUE(s.has_logit_rules());
  EXPECT_EQ(s.to_json().at("logit_bias").dump(), R"({"7":2.5,"50256":-100.0})");
  EXPECT_EQ(SamplingParams::from_json(nlohmann::json::parse(s.to_json().dump())).to_json(), s.to_json());
  EXPECT_FALSE(SamplingParams{}.has_logit_rules());

  EXPECT_NE(error_of(R"({"logit_bias": {"5": 101}})").find("logit_bias value of token 5 must be in [-100, 100]"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"logit_bias": {"abc": 1}})").find("logit_bias keys must be token ids"), std::string::npos);
  EXPECT_NE(error_of(R"({"logit_bias": {"-3": 1}})").find("logit_bias keys must be token ids"), std::string::npos);
  EXPECT_NE(error_of(R"({"logit_bias": [1, 2]})").find("logit_bias must be an object"), std::string::npos);
  EXPECT_NE(error_of(R"({"logit_bias": {"5": "x"}})").find("logit_bias value of token 5 must be a number"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"min_tokens": -1})").find("min_tokens"), std::string::npos);
  EXPECT_NE(error_of(R"({"bad_words": [""]})").find("bad_words"), std::string::npos);
  // A cross-key rule, checked by validate() (the engine calls it on every request).
  SamplingParams p;
  p.max_tokens = 4;
  p.min_tokens = 5;
  try {
    p.validate();
    ADD_FAILURE() << "min_tokens > max_tokens was accepted";
  } catch (const ConfigKeyError& e) {
    EXPECT_EQ(e.key(), "min_tokens");
  }
}

}  // namespace
}  // namespace minivllm
