// The pre-tokenizer: regex splits applied in order (HF Split / ByteLevel / Digits), cutting the
// text into pieces that BPE encodes independently (and that the BPE cache is keyed on).
#pragma once

#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "tokenizer/regex.h"
#include "tokenizer/tokenizer_spec.h"

namespace minivllm {

class PreTokenizer {
 public:
  explicit PreTokenizer(const std::vector<PreTokenizerStage>& stages);

  using PieceSink = std::function<void(std::string_view)>;
  // Calls sink(piece) for every non-empty piece of `text` (valid UTF-8), in order.
  void split(std::string_view text, const PieceSink& sink) const;

 private:
  struct Stage {
    std::unique_ptr<Regex> regex;  // null: the stage only adds the prefix space
    PreTokenizerStage spec;
  };
  void apply(size_t stage, std::string_view piece, const PieceSink& sink) const;
  void split_one(const Stage& stage, std::string_view piece,
                 const std::function<void(std::string_view)>& emit) const;

  std::vector<Stage> stages_;
};

}  // namespace minivllm
