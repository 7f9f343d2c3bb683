// StructuredOutputEngine: turns a request's StructuredOutputs into a TokenConstraint per sequence,
// through xgrammar (the grammar engine vLLM, SGLang, TensorRT-LLM and MLC embed; README:
// Dependencies). One per LLMEngine, rank 0, made on the first constrained request. Compiled
// grammars are cached by their source (the schema, regex, choices or EBNF text): xgrammar's
// compiler keeps them, so a schema sent again costs no compile.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/structured_outputs.h"
#include "engine/token_constraint.h"
#include "tokenizer/tokenizer.h"

namespace minivllm {

class StructuredOutputEngine {
 public:
  // `vocab_size`: the model's (its logits' width, which may exceed the tokenizer's); `stop_ids`:
  // the tokens that end a completed grammar (the model's eos ids).
  StructuredOutputEngine(const Tokenizer& tokenizer, int64_t vocab_size, const std::vector<int64_t>& stop_ids);
  ~StructuredOutputEngine();

  // A fresh grammar state for one sequence. A grammar that cannot be compiled (a bad schema, regex
  // or EBNF) is a ConfigKeyError naming `key` (the parameter the request gave it under) and
  // xgrammar's reason.
  std::unique_ptr<TokenConstraint> make_constraint(const StructuredOutputs& spec, const char* key);
  // Compiles `spec` into the cache only (the same errors). Thread-safe, as xgrammar's compiler and
  // its cache are: callers compile off the engine thread, then make_constraint finds it there.
  void compile(const StructuredOutputs& spec, const char* key);

  // Whether this build has a grammar engine (xgrammar found at configure time).
  static bool available();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace minivllm
