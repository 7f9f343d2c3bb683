// The throughput benchmark's workload: nano-vllm's bench.py drawn with CPython's random.seed(0)
// (see py_random.h), or read from a JSON file written by tools/make_bench_workload.py.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace minivllm::cli {

struct BenchWorkload {
  std::vector<std::vector<int32_t>> prompt_token_ids;
  std::vector<int> max_tokens;  // one per prompt

  int64_t num_prompt_tokens() const;
  int64_t num_output_tokens() const;  // sum of max_tokens (every sequence ignores eos)
  // Keeps the first n sequences (all when n >= size()).
  void truncate(size_t n);
};

// bench.py: seed(0); prompts = [[randint(0, 10000) for _ in range(randint(100, 1024))] for _ in
// range(num_seqs)]; then max_tokens = [randint(100, 1024) for _ in range(num_seqs)].
// For 256 sequences: 142,827 prompt tokens and 133,966 output tokens. A smaller num_seqs is a
// different draw (the output lengths come after all prompts): truncate() the 256 instead.
BenchWorkload make_seeds_workload(int num_seqs = 256);

// {"prompt_token_ids": [[...], ...], "max_tokens": [...]}; errors name the file and the entry.
BenchWorkload load_workload(const std::string& path);

}  // namespace minivllm::cli
