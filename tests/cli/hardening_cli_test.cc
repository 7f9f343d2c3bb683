// Hostile or broken input to the command line: JSON nested tens of thousands deep, token ids that do
// not fit 32 bits, huge values in error paths, and broken chat templates. Each is a clear error
// (a short message, never a crash or a dump of the input) or, where nothing is wrong, works.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli/json_input.h"
#include "tokenizer/byte_level.h"
#include "run_cli.h"
#include "scoped_env.h"

namespace minivllm::test {
namespace {

namespace fs = std::filesystem;

const std::string kQwen3 = MINIVLLM_SHARED_DIR "/models/qwen3-0.6b";
const std::string kStories = MINIVLLM_SHARED_DIR "/models/stories260K/stories260K.gguf";

std::string nested(size_t depth, const std::string& inner = "1") {
  return std::string(depth, '[') + inner + std::string(depth, ']');
}

// A runtime error (exit 1) with one short line on stderr naming every one of `parts`.
void expect_runtime_error(const CliResult& r, std::initializer_list<std::string> parts) {
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_LT(r.err.size(), 400u) << "stderr should quote only an excerpt of the input: " << r.err.substr(0, 400);
  for (const std::string& p : parts) EXPECT_NE(r.err.find(p), std::string::npos) << "missing '" << p << "': " << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out.substr(0, 200);
}

void expect_usage_error(const CliResult& r, std::initializer_list<std::string> parts) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_LT(r.err.size(), 400u) << r.err.substr(0, 400);
  for (const std::string& p : parts) EXPECT_NE(r.err.find(p), std::string::npos) << "missing '" << p << "': " << r.err;
}

TEST(JsonInput, DepthScanIgnoresStringsAndEscapes) {
  using cli::json_too_deep_at;
  EXPECT_FALSE(json_too_deep_at(nested(256)));
  EXPECT_EQ(json_too_deep_at(nested(257)), 256u);
  EXPECT_EQ(json_too_deep_at("{\"a\": [[1]]}", 2), 7u);
  EXPECT_FALSE(json_too_deep_at("[\"[[[[\", \"\\\"[[[\"]", 1));  // brackets in strings, an escaped quote
  EXPECT_FALSE(json_too_deep_at("[]]]]][", 1));                       // stray closers do not go negative
}

TEST(JsonInput, ExcerptsAreShortWhateverTheValue) {
  using cli::json_excerpt;
  EXPECT_EQ(json_excerpt(nlohmann::json::parse("[1, {\"a\": \"b\"}]")), "[1,{\"a\":\"b\"}]");
  nlohmann::json deep = 1;
  for (int i = 0; i < 100000; ++i) deep = nlohmann::json::array({std::move(deep)});  // dump() would overflow
  const std::string e = json_excerpt(deep);
  EXPECT_LE(e.size(), cli::kMaxExcerptChars);
  EXPECT_EQ(e, std::string(77, '[') + "...");
  const std::string long_string = json_excerpt(nlohmann::json(std::string(1 << 20, 'x')));
  EXPECT_EQ(long_string, std::string("\"").append(76, 'x').append("..."));
  EXPECT_EQ(cli::text_excerpt(std::string(100, 'a') + "\xC3\xA9", 80).size(), 80u);
  EXPECT_EQ(cli::text_excerpt(std::string(76, 'a') + "\xC3\xA9" + std::string(10, 'b'), 80),
            std::string(76, 'a') + "...");  // not cut inside the 2-byte character
}

TEST(JsonInput, TokenIdsMustFitInt32) {
  using cli::json_token_id;
  EXPECT_EQ(json_token_id(nlohmann::json(2147483647)), 2147483647);
  EXPECT_EQ(json_token_id(nlohmann::json(-5)), -5);  // range only; the tokenizer names unknown ids
  EXPECT_FALSE(json_token_id(nlohmann::json::parse("4294967297")));
  EXPECT_FALSE(json_token_id(nlohmann::json::parse("18446744073709551615")));
  EXPECT_FALSE(json_token_id(nlohmann::json::parse("-2147483649")));
  EXPECT_FALSE(json_token_id(nlohmann::json::parse("1.0")));
  EXPECT_FALSE(json_token_id(nlohmann::json("1")));
  EXPECT_EQ(cli::not_a_token_id(nlohmann::json::parse("4294967297")), "4294967297 is outside the 32-bit token id range");
}

TEST(CliHardening, DeeplyNestedStdinIsRefusedWithoutCrashing) {
  for (size_t depth : {10000, 70000, 200000}) {
    expect_runtime_error(run_cli({"detokenize", "--model", kQwen3}, nested(depth)), {"stdin", "nested more than 256"});
    expect_runtime_error(run_cli({"detokenize", "--model", kQwen3}, std::string("[").append(nested(depth)).append("]")), {"nested"});
    expect_runtime_error(run_cli({"tokenize", "--model", kQwen3}, nested(depth, "\"x\"")), {"nested"});
    expect_runtime_error(run_cli({"template", "--model", kQwen3}, "[{\"role\": \"user\", \"content\": " +
                                                                     nested(depth) + "}]"),
                         {"nested"});
  }
  // Within the limit the messages reach the chat template, which renders them or refuses them
  // cleanly; either way nothing crashes.
  const CliResult within = run_cli({"template", "--model", kQwen3},
                                   "[{\"role\": \"user\", \"content\": \"hi\", \"x\": " + nested(250) + "}]");
  EXPECT_TRUE(within.exit_code == 0 || within.exit_code == 1) << within.exit_code << " " << within.err;
  // Brackets inside strings do not count; a moderately nested element is reported by its type.
  const CliResult in_string = run_cli({"tokenize", "--model", kQwen3}, "[\"" + std::string(10000, '[') + "\"]");
  EXPECT_EQ(in_string.exit_code, 0) << in_string.err;
  expect_runtime_error(run_cli({"detokenize", "--model", kQwen3}, "[[" + nested(200) + "]]"),
                       {"element 0, id 0", "[[[[", "not an integer token id"});
  expect_runtime_error(run_cli({"detokenize", "--model", kQwen3}, std::string("[").append(nested(200)).append("]")), {"element 0, id 0"});
}

TEST(CliHardening, TokenIdsBeyondInt32AreErrorsNamingTheId) {
  // 4294967297 = 2^32 + 1 used to decode as token 1.
  expect_runtime_error(run_cli({"detokenize", "--model", kQwen3}, "[[4294967297]]"),
                       {"4294967297", "element 0, id 0", "32-bit"});
  expect_runtime_error(run_cli({"detokenize", "--model", kQwen3}, "[[9707, 18446744073709551615]]"),
                       {"18446744073709551615", "id 1"});
  expect_runtime_error(run_cli({"detokenize", "--model", kQwen3}, "[[-9223372036854775808]]"),
                       {"-9223372036854775808"});
  expect_runtime_error(run_cli({"detokenize", "--model", kQwen3}, "[[1.5]]"), {"1.5", "not an integer"});
  expect_runtime_error(run_cli({"detokenize", "--model", kQwen3}, "[[-1]]"), {"-1", "outside the vocabulary"});
  expect_runtime_error(run_cli({"detokenize", "--model", kQwen3}, "[[2147483647]]"), {"2147483647"});
  // A huge bad element is quoted only in part.
  expect_runtime_error(run_cli({"detokenize", "--model", kQwen3}, "[[\"" + std::string(1 << 20, 'x') + "\"]]"),
                       {"\"xxxx", "..."});
  expect_runtime_error(run_cli({"detokenize", "--model", kQwen3}, "[[{\"a\": \"" + std::string(1 << 20, 'x') + "\"}]]"),
                       {"{\"a\":\"xxx", "..."});
  const CliResult ok = run_cli({"detokenize", "--model", kQwen3}, "[[9707, 1879]]");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(nlohmann::json::parse(ok.out), nlohmann::json::array({"Hello world"}));
}

TEST(CliHardening, InvalidJsonErrorsQuoteOnlyAnExcerpt) {
  // nlohmann's message quotes the token it stopped in: here all of the unterminated string.
  expect_runtime_error(run_cli({"tokenize", "--model", kQwen3}, "[\"" + std::string(1 << 20, 'y')),
                       {"stdin is not valid JSON", "yyyy..."});
  expect_runtime_error(run_cli({"detokenize", "--model", kQwen3}, "[[" + std::string(100000, '9') + "]]"),
                       {"stdin"});
}

TEST(CliHardening, PromptIdsAreCheckedLikeStdin) {
  // Parsed before the model is opened: "m" need not exist.
  expect_usage_error(run_cli({"generate", "--model", "m", "--prompt-ids", "[[4294967297]]"}),
                     {"--prompt-ids", "4294967297"});
  expect_usage_error(run_cli({"generate", "--model", "m", "--prompt-ids", "[[18446744073709551615]]"}),
                     {"--prompt-ids", "18446744073709551615"});
  expect_usage_error(run_cli({"generate", "--model", "m", "--prompt-ids", nested(60000)}),
                     {"--prompt-ids", "nested more than 256"});
  expect_usage_error(run_cli({"generate", "--model", "m", "--prompt-ids", std::string("[").append(nested(200)).append("]")}),
                     {"--prompt-ids", "prompt 0"});
  expect_usage_error(run_cli({"generate", "--model", "m", "--prompt-ids", "[[1, \"" + std::string(100000, 'z') + "\"]]"}),
                     {"--prompt-ids", "\"zzz", "..."});
  expect_usage_error(run_cli({"generate", "--model", "m", "--prompt-ids", "[[1," + std::string(100000, 'q')}),
                     {"--prompt-ids", "not valid JSON"});
}

TEST(CliHardening, TemplateVarsAreCheckedLikeStdin) {
  expect_usage_error(run_cli({"template", "--model", kQwen3, "--var", "x=" + nested(60000)}),
                     {"--var x", "nested more than 256"});
  expect_usage_error(run_cli({"template", "--model", kQwen3, "--var", "x=" + std::string(100000, 'w')}),
                     {"--var x", "www..."});
  expect_usage_error(run_cli({"template", "--model", kQwen3, "--var", std::string(100000, 'v')}), {"--var", "vvv..."});
}

TEST(CliHardening, WorkloadFileIdsAreChecked) {
  const fs::path dir = fs::path(MINIVLLM_BINARY_DIR) / "cli_hardening_workload";
  fs::create_directories(dir);
  const std::string big = (dir / "big_id.json").string();
  std::ofstream(big) << R"({"prompt_token_ids": [[1, 4294967297]], "max_tokens": [4]})";
  expect_runtime_error(run_cli({"bench", "--model", kQwen3, "--workload", big, "--dry-run"}),
                       {big, "4294967297"});
  const std::string max_tokens = (dir / "big_max_tokens.json").string();
  std::ofstream(max_tokens) << R"({"prompt_token_ids": [[1]], "max_tokens": [4294967297]})";
  expect_runtime_error(run_cli({"bench", "--model", kQwen3, "--workload", max_tokens, "--dry-run"}),
                       {"max_tokens[0]", "4294967297"});
  const std::string deep = (dir / "deep.json").string();
  std::ofstream(deep) << "{\"prompt_token_ids\": " << nested(100000) << ", \"max_tokens\": [1]}";
  expect_runtime_error(run_cli({"bench", "--model", kQwen3, "--workload", deep, "--dry-run"}), {deep, "nested"});
}

// ---- broken chat templates ----

// A model folder (Qwen3-0.6B's config.json, no weights) with a byte-only tokenizer.json, small so
// that each run loads it fast, and a tokenizer_config.json whose `chat_template` is `tmpl` (absent
// when `tmpl` is null).
std::string model_with_template(const std::string& name, const nlohmann::json& tmpl) {
  const fs::path dir = fs::path(MINIVLLM_BINARY_DIR) / "cli_hardening_models" / name;
  fs::create_directories(dir);
  fs::copy_file(fs::path(kQwen3) / "config.json", dir / "config.json", fs::copy_options::overwrite_existing);
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level::encode(std::string(1, static_cast<char>(b)))] = b;
  const nlohmann::json tokenizer = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}},
                                    {"pre_tokenizer", {{"type", "ByteLevel"}}}};
  std::ofstream(dir / "tokenizer.json") << tokenizer.dump();
  nlohmann::json config = {{"eos_token", "!"}};
  if (!tmpl.is_null()) config["chat_template"] = tmpl;
  std::ofstream(dir / "tokenizer_config.json") << config.dump();
  return dir.string();
}

TEST(CliHardening, BrokenHfChatTemplateFailsOnlyWhereATemplateIsUsed) {
  const std::string broken = model_with_template("broken", "{% for m in messages %}{{ m.content ");
  const std::string config = broken + "/tokenizer_config.json";
  // Plain tokenize / detokenize do not need the template.
  const CliResult tok = run_cli({"tokenize", "--model", broken}, "[\"Hello world\"]");
  EXPECT_EQ(tok.exit_code, 0) << tok.err;
  EXPECT_EQ(nlohmann::json::parse(tok.out), nlohmann::json::parse("[[72, 101, 108, 108, 111, 32, 119, 111, 114, 108, 100]]"));
  // The template command names the file and what is wrong, not "has no chat template".
  const CliResult tmpl = run_cli({"template", "--model", broken}, R"([{"role": "user", "content": "hi"}])");
  expect_runtime_error(tmpl, {config, "chat template"});
  EXPECT_EQ(tmpl.err.find("has no chat template"), std::string::npos) << tmpl.err;
  EXPECT_EQ(tmpl.err.find("check failed"), std::string::npos) << tmpl.err;
  // A list without a "default" entry, and a template that is not a string, are broken too.
  const std::string no_default =
      model_with_template("no_default", nlohmann::json::array({{{"name", "tool_use"}, {"template", "x"}}}));
  expect_runtime_error(run_cli({"template", "--model", no_default}, "[]"), {no_default, "default"});
  EXPECT_EQ(run_cli({"tokenize", "--model", no_default}, "[\"hi\"]").exit_code, 0);
  const std::string not_string = model_with_template("not_string", 42);
  expect_runtime_error(run_cli({"template", "--model", not_string}, "[]"), {not_string, "chat_template"});
  EXPECT_EQ(run_cli({"tokenize", "--model", not_string}, "[\"hi\"]").exit_code, 0);
  // No template at all is fine until one is asked for.
  const std::string none = model_with_template("none", nullptr);
  EXPECT_EQ(run_cli({"tokenize", "--model", none}, "[\"hi\"]").exit_code, 0);
  expect_runtime_error(run_cli({"template", "--model", none}, "[]"), {"has no chat template"});
  // And a good one still renders.
  const std::string good = model_with_template("good", "{% for m in messages %}<{{ m.content }}>{% endfor %}");
  const CliResult ok = run_cli({"template", "--model", good}, R"([{"role": "user", "content": "hi"}])");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(ok.out, "<hi>");
}

// stories260K.gguf with a tokenizer.chat_template key added in front of the others. The entry is
// padded to a multiple of 32 bytes (GGUF's default alignment), so the tensor data stays aligned and
// its offsets, relative to the data section, stay valid.
std::string stories_with_template(const std::string& name, const std::string& tmpl) {
  const std::string src = read_text_file(kStories);
  if (src.size() < 24 || src.compare(0, 4, "GGUF") != 0) return "";
  const std::string key = "tokenizer.chat_template";
  std::string value = tmpl;
  const size_t fixed = 8 + key.size() + 4 + 8;  // key length, key, type, string length
  while ((fixed + value.size()) % 32 != 0) value.push_back(' ');
  auto u64 = [](uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); };
  auto u32 = [](uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); };
  uint64_t n_kv = 0;
  std::memcpy(&n_kv, src.data() + 16, 8);
  std::string out = src.substr(0, 16) + u64(n_kv + 1);
  out += u64(key.size()) + key + u32(8 /* string */) + u64(value.size()) + value;
  out += src.substr(24);
  const fs::path dir = fs::path(MINIVLLM_BINARY_DIR) / "cli_hardening_models";
  fs::create_directories(dir);
  const std::string path = (dir / (name + ".gguf")).string();
  std::ofstream(path, std::ios::binary) << out;
  return path;
}

TEST(CliHardening, BrokenGgufChatTemplateFailsOnlyWhereATemplateIsUsed) {
  if (!fs::exists(kStories)) GTEST_SKIP() << kStories << " does not exist";
  const std::string good = stories_with_template("stories_good_template", "{{ messages[0].content }}|");
  const std::string broken = stories_with_template("stories_broken_template", "{% if messages %}{{ oops ");
  ASSERT_FALSE(good.empty());
  const CliResult good_tmpl = run_cli({"template", "--model", good}, R"([{"role": "user", "content": "hi"}])");
  ASSERT_EQ(good_tmpl.exit_code, 0) << good_tmpl.err;  // the rewritten file is a valid GGUF
  EXPECT_EQ(good_tmpl.out.substr(0, 3), "hi|");

  const CliResult tok = run_cli({"tokenize", "--model", broken}, "[\"Once upon a time\"]");
  EXPECT_EQ(tok.exit_code, 0) << tok.err;
  EXPECT_EQ(tok.out, run_cli({"tokenize", "--model", kStories}, "[\"Once upon a time\"]").out);
  expect_runtime_error(run_cli({"template", "--model", broken}, R"([{"role": "user", "content": "hi"}])"),
                       {broken, "tokenizer.chat_template"});
  const std::vector<std::string> engine = {"--device", "cpu", "--max-num-seqs", "8", "--max-model-len", "512",
                                           "--num-kvcache-blocks", "16", "--num-threads", "1", "--max-tokens", "2"};
  std::vector<std::string> plain = {"generate", "--model", broken, "--prompt", "Once upon a time"};
  plain.insert(plain.end(), engine.begin(), engine.end());
  const CliResult gen = run_cli(plain);
  EXPECT_EQ(gen.exit_code, 0) << gen.err;
  std::vector<std::string> chat = {"generate", "--model", broken, "--chat", "hi"};
  chat.insert(chat.end(), engine.begin(), engine.end());
  const CliResult chat_gen = run_cli(chat);
  EXPECT_NE(chat_gen.exit_code, 0);
  EXPECT_NE(chat_gen.err.find(broken), std::string::npos) << chat_gen.err;
  EXPECT_NE(chat_gen.err.find("tokenizer.chat_template"), std::string::npos) << chat_gen.err;
}

// A bad MINIVLLM_CPU_ISA stops the CPU backend at start-up with the variable named, not inside the
// first request (bench called that a rejected warm-up request).
TEST(CliHardening, BadCpuIsaIsAStartUpErrorNamingTheVariable) {
  const ScopedEnv bad_isa("MINIVLLM_CPU_ISA", "avx9");
  const CliResult gen = run_cli({"generate", "--model", kStories, "--device", "cpu", "--prompt-ids", "[[1,2,3]]",
                                 "--max-tokens", "2"});
  const CliResult bench = run_cli({"bench", "--model", kStories, "--device", "cpu", "--num-seqs", "0",
                                   "--decode-tokens", "2"});
  for (const CliResult* r : {&gen, &bench}) {
    EXPECT_NE(r->exit_code, 0);
    EXPECT_NE(r->err.find("MINIVLLM_CPU_ISA=avx9 must be one of scalar, avx2, avx512"), std::string::npos) << r->err;
    EXPECT_EQ(r->err.find("warm-up"), std::string::npos) << r->err;
  }
}


}  // namespace
}  // namespace minivllm::test
