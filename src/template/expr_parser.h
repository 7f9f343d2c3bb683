// The tokens of one template tag with a cursor (Tokens), and the expression parser over them.
// The grammar follows jinja2/parser.py: condexpr > or > and > not > compare > +,- > ~ > *,/,//,%
// > ** > unary, with postfix subscripts, calls, `|filter` and `is test` binding tighter than any
// binary operator.
#pragma once

#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "common/check.h"
#include "template/ast.h"
#include "template/lexer.h"
#include "template/limits.h"

namespace minivllm::jinja {

inline std::string describe(const Token& t) {
  switch (t.kind) {
    case TokenKind::kEnd: return "end of tag";
    case TokenKind::kString: return "string literal";
    case TokenKind::kInt:
    case TokenKind::kFloat: return std::string("number ").append(excerpt(t.text));
    // (appending, not `"'" + string&&`: that trips a GCC 12 -Wrestrict false positive at -O3)
    default: return std::string("'").append(excerpt(t.text)).append("'");
  }
}

// The tokens of one tag, with a cursor.
class Tokens {
 public:
  explicit Tokens(const std::vector<Token>* toks) : toks_(toks) {}
  const Token& peek(size_t ahead = 0) const {
    size_t i = std::min(i_ + ahead, toks_->size() - 1);
    return (*toks_)[i];
  }
  const Token& next() {
    const Token& t = peek();
    if (i_ + 1 < toks_->size()) ++i_;
    return t;
  }
  bool at_op(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kOp && peek(ahead).text == op;
  }
  bool at_name(std::string_view name, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kName && peek(ahead).text == name;
  }
  bool at_end() const { return peek().kind == TokenKind::kEnd; }
  bool skip_op(std::string_view op) {
    if (!at_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!at_name(name)) return false;
    next();
    return true;
  }
  [[noreturn]] void fail(const std::string& what) const {
    MINIVLLM_FAIL() << "chat template line " << peek().line << ": " << what << " (got " << describe(peek()) << ")";
    std::abort();  // unreachable: the failure throws from its destructor
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail("expected '" + std::string(op) + "'");
  }
  std::string expect_name() {
    if (peek().kind != TokenKind::kName) fail("expected a name");
    return next().text;
  }
  void expect_end(std::string_view tag) {
    if (!at_end()) fail("unexpected tokens at the end of '" + std::string(tag) + "'");
  }

 private:
  const std::vector<Token>* toks_;
  size_t i_ = 0;
};

// A comma-separated list becomes a tuple; `for` iterables parse without the inline `if`.
ExprPtr parse_tuple(Tokens& ts, bool with_condexpr = true);
ExprPtr parse_expression(Tokens& ts);

}  // namespace minivllm::jinja
