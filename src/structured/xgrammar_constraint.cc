#include "structured/xgrammar_constraint.h"

#include "common/check.h"

namespace minivllm {
namespace {

class XgrammarConstraint : public TokenConstraint {
 public:
  XgrammarConstraint(const xgrammar::CompiledGrammar& grammar, int vocab_size)
      : matcher_(grammar), words_(xgrammar::GetBitmaskSize(vocab_size)) {}

  int bitmask_words() const override { return words_; }

  void fill_bitmask(int32_t* words) override {
    // One row of the batch's bitmask, seen by xgrammar as a [1, words] int32 tensor on the host.
    int64_t shape[2] = {1, words_};
    DLTensor t{};
    t.data = words;
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = 2;
    t.dtype = xgrammar::GetBitmaskDLType();
    t.shape = shape;
    matcher_.FillNextTokenBitmask(&t, 0);
  }

  bool accept(int32_t token) override { return matcher_.AcceptToken(token); }

  void rollback(int num_tokens) override {
    MINIVLLM_CHECK_GE(num_tokens, 0) << "rollback of a negative number of tokens";
    if (num_tokens > 0) matcher_.Rollback(num_tokens);
  }

  bool is_terminated() const override { return matcher_.IsTerminated(); }

 private:
  xgrammar::GrammarMatcher matcher_;
  int words_;
};

}  // namespace

std::unique_ptr<TokenConstraint> make_xgrammar_constraint(const xgrammar::CompiledGrammar& grammar, int vocab_size) {
  return std::make_unique<XgrammarConstraint>(grammar, vocab_size);
}

}  // namespace minivllm
