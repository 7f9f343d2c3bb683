// Split behaviours follow HF tokenizers' SplitDelimiterBehavior: the regex marks delimiters,
// and the behaviour says whether they stand alone, vanish, or join a neighbour.
#include "tokenizer/pre_tokenizer.h"

#include <string>

#include "common/check.h"

namespace minivllm {

PreTokenizer::PreTokenizer(const std::vector<PreTokenizerStage>& stages) {
  for (const PreTokenizerStage& s : stages) {
    Stage stage;
    stage.spec = s;
    if (!s.regex.empty()) stage.regex = std::make_unique<Regex>(s.regex);
    stages_.push_back(std::move(stage));
  }
}

void PreTokenizer::split(std::string_view text, const PieceSink& sink) const {
  if (text.empty()) return;
  apply(0, text, sink);
}

void PreTokenizer::apply(size_t stage, std::string_view piece, const PieceSink& sink) const {
  if (stage == stages_.size()) {
    sink(piece);
    return;
  }
  const Stage& s = stages_[stage];
  std::string prefixed;
  if (s.spec.add_prefix_space && piece.front() != ' ') {
    prefixed = " ";
    prefixed += piece;
    piece = prefixed;
  }
  if (!s.regex) {
    apply(stage + 1, piece, sink);
    return;
  }
  split_one(s, piece, [&](std::string_view sub) { apply(stage + 1, sub, sink); });
}

void PreTokenizer::split_one(const Stage& stage, std::string_view piece,
                             const std::function<void(std::string_view)>& emit) const {
  const SplitBehavior behavior = stage.spec.behavior;
  const bool invert = stage.spec.invert;
  size_t cut = 0;  // start of the piece being built (merge behaviours)
  // Contiguous: a run of adjacent delimiters forms one piece.
  size_t run_begin = 0, run_end = 0;
  bool in_run = false;
  auto emit_range = [&](size_t b, size_t e) {
    if (e > b) emit(piece.substr(b, e - b));
  };
  auto on_segment = [&](size_t b, size_t e, bool delimiter) {
    if (b == e) return;
    switch (behavior) {
      case SplitBehavior::kIsolated:
        emit_range(b, e);
        break;
      case SplitBehavior::kRemoved:
        if (!delimiter) emit_range(b, e);
        break;
      case SplitBehavior::kMergedWithPrevious:
        if (delimiter) {
          emit_range(cut, e);
          cut = e;
        }
        break;
      case SplitBehavior::kMergedWithNext:
        if (delimiter) {
          emit_range(cut, b);
          cut = b;
        }
        break;
      case SplitBehavior::kContiguous:
        if (delimiter && in_run && run_end == b) {
          run_end = e;
          break;
        }
        if (in_run) emit_range(run_begin, run_end);
        in_run = delimiter;
        if (delimiter) {
          run_begin = b;
          run_end = e;
        } else {
          emit_range(b, e);
        }
        break;
    }
  };
  size_t pos = 0;
  stage.regex->for_each_match(piece, [&](size_t b, size_t e) {
    on_segment(pos, b, invert);
    on_segment(b, e, !invert);
    pos = e;
  });
  on_segment(pos, piece.size(), invert);
  if (behavior == SplitBehavior::kMergedWithPrevious || behavior == SplitBehavior::kMergedWithNext) {
    emit_range(cut, piece.size());
  }
  if (behavior == SplitBehavior::kContiguous && in_run) emit_range(run_begin, run_end);
}

}  // namespace minivllm
