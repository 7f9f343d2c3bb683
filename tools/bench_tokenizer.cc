// Tokenizer throughput: encodes a few MB of text built from the Hugging Face reference texts
// (repeated, with a counter so words vary) with each real tokenizer, single thread, and prints
// load time and MB/s, all in thread CPU time. Usage: bench_tokenizer [shared_dir] [megabytes]
#include <ctime>
#include <cstdio>
#include <fstream>
#include <string>

#include <random>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace {

// CPU time of this thread: the figure that does not depend on what else the machine runs.
double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

std::string build_corpus(const std::string& shared, size_t bytes) {
  std::ifstream in(shared + "/tokenizer-vectors/hf_goldens.json");
  const nlohmann::json goldens = nlohmann::json::parse(in);
  std::string corpus;
  for (size_t round = 0; corpus.size() < bytes; ++round) {
    for (const auto& t : goldens.at("texts")) {
      corpus += t.get<std::string>();
      corpus += ' ';
      corpus += std::to_string(round * 7919 % 100000);
      corpus += '\n';
    }
  }
  return corpus;
}

// Cache-hostile text: random words (Latin, Cyrillic, CJK letters, digits, punctuation), almost
// never repeated, so every pre-token goes through the BPE merge loop.
std::string build_random_corpus(size_t bytes) {
  static const char* const kPieces[] = {"a", "e", "i", "o", "u", "t", "n", "s", "r", "l", "th", "ing", "er",
                                        "\xD0\xB0", "\xD0\xBA", "\xD1\x82", "\xE4\xBD\xA0", "\xE5\xA5\xBD", "7", "42",
                                        "\xC3\xA9", "-", "."};
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> piece(0, sizeof(kPieces) / sizeof(kPieces[0]) - 1), len(1, 8);
  std::string corpus;
  while (corpus.size() < bytes) {
    for (int k = len(rng); k > 0; --k) corpus += kPieces[piece(rng)];
    corpus += rng() % 11 == 0 ? '\n' : ' ';
  }
  return corpus;
}

void bench(const char* name, const std::string& dir, const std::string& corpus) {
  double t0 = cpu_seconds();
  const auto tok = minivllm::Tokenizer::from_dir(dir);
  const double load_s = cpu_seconds() - t0;
  // One cold pass (fills the BPE cache), then timed passes.
  size_t n_tokens = tok->encode(corpus, false).size();
  const int passes = 3;
  t0 = cpu_seconds();
  for (int i = 0; i < passes; ++i) n_tokens = tok->encode(corpus, false).size();
  const double enc_s = (cpu_seconds() - t0) / passes;
  const std::vector<int32_t> ids = tok->encode(corpus, false);
  t0 = cpu_seconds();
  const std::string back = tok->decode(ids);
  const double dec_s = cpu_seconds() - t0;
  std::printf("%-8s load %.2f s | encode %.1f MB/s (%zu tokens, %.2f MB) | decode %.1f MB/s | round trip %s\n",
              name, load_s, corpus.size() / enc_s / 1e6, n_tokens, corpus.size() / 1e6,
              corpus.size() / dec_s / 1e6, back == corpus ? "ok" : "MISMATCH");
  const std::string random_text = build_random_corpus(corpus.size() / 4);
  const auto fresh = minivllm::Tokenizer::from_dir(dir);  // empty cache
  t0 = cpu_seconds();
  fresh->encode(random_text, false);
  const double random_s = cpu_seconds() - t0;
  std::printf("%-8s random words, cold cache: encode %.1f MB/s\n", name, random_text.size() / random_s / 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string shared = argc > 1 ? argv[1] : "/work/shared";
  const double mb = argc > 2 ? std::stod(argv[2]) : 4.0;
  const std::string corpus = build_corpus(shared, static_cast<size_t>(mb * 1e6));
  bench("qwen3", shared + "/models/qwen3-0.6b", corpus);
  bench("llama3", shared + "/models/llama-3.2-1b-instruct", corpus);
  return 0;
}
