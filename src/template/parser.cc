// Recursive-descent parser for Jinja templates (see parser.h). The expression grammar follows
// jinja2/parser.py: condexpr > or > and > not > compare > +,- > ~ > *,/,//,% > ** > unary, with
// postfix subscripts, calls, `|filter` and `is test` binding tighter than any binary operator.
#include "template/parser.h"

#include <cstdlib>
#include <initializer_list>
#include <set>

#include "common/check.h"
#include "template/builtins.h"
#include "template/lexer.h"

namespace minivllm::jinja {
namespace {

std::string describe(const Token& t) {
  switch (t.kind) {
    case TokenKind::kEnd: return "end of tag";
    case TokenKind::kString: return "string literal";
    case TokenKind::kInt:
    case TokenKind::kFloat: return "number " + t.text;
    default: return "'" + t.text + "'";
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

ExprPtr make(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

ExprPtr make2(Expr::Kind kind, int line, ExprPtr a, ExprPtr b, std::string name = "") {
  ExprPtr e = make(kind, line);
  e->children.push_back(std::move(a));
  e->children.push_back(std::move(b));
  e->name = std::move(name);
  return e;
}

class ExprParser {
 public:
  explicit ExprParser(Tokens& ts) : ts_(ts) {}

  // A comma-separated list becomes a tuple (a list value); `for` iterables parse without condexpr.
  ExprPtr tuple(bool with_condexpr = true) {
    int line = ts_.peek().line;
    ExprPtr first = expression(with_condexpr);
    if (!ts_.at_op(",")) return first;
    ExprPtr t = make(Expr::Kind::kList, line);
    t->name = "tuple";
    t->children.push_back(std::move(first));
    while (ts_.skip_op(",")) {
      if (ts_.at_end() || ts_.at_op(")") || ts_.at_name("if")) break;
      t->children.push_back(expression(with_condexpr));
    }
    return t;
  }

  ExprPtr expression(bool with_condexpr = true) { return with_condexpr ? condexpr() : or_expr(); }

 private:
  ExprPtr condexpr() {
    ExprPtr e = or_expr();
    while (ts_.at_name("if")) {
      int line = ts_.next().line;
      ExprPtr c = make(Expr::Kind::kCond, line);
      c->children.push_back(std::move(e));
      c->children.push_back(or_expr());
      c->children.push_back(ts_.skip_name("else") ? condexpr() : nullptr);
      e = std::move(c);
    }
    return e;
  }

  ExprPtr or_expr() {
    ExprPtr e = and_expr();
    while (ts_.at_name("or")) {
      int line = ts_.next().line;
      e = make2(Expr::Kind::kOr, line, std::move(e), and_expr());
    }
    return e;
  }

  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    while (ts_.at_name("and")) {
      int line = ts_.next().line;
      e = make2(Expr::Kind::kAnd, line, std::move(e), not_expr());
    }
    return e;
  }

  ExprPtr not_expr() {
    if (ts_.at_name("not")) {
      ExprPtr e = make(Expr::Kind::kNot, ts_.next().line);
      e->children.push_back(not_expr());
      return e;
    }
    return compare();
  }

  ExprPtr compare() {
    int line = ts_.peek().line;
    ExprPtr first = math1();
    ExprPtr cmp;
    static const std::set<std::string> kOps = {"==", "!=", "<", "<=", ">", ">="};
    while (true) {
      std::string op;
      if (ts_.peek().kind == TokenKind::kOp && kOps.count(ts_.peek().text)) {
        op = ts_.next().text;
      } else if (ts_.at_name("in")) {
        ts_.next();
        op = "in";
      } else if (ts_.at_name("not") && ts_.at_name("in", 1)) {
        ts_.next();
        ts_.next();
        op = "not in";
      } else {
        break;
      }
      if (!cmp) {
        cmp = make(Expr::Kind::kCompare, line);
        cmp->children.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->children.push_back(math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprPtr binary_level(std::initializer_list<std::string_view> ops, ExprPtr (ExprParser::*operand)()) {
    ExprPtr e = (this->*operand)();
    while (true) {
      bool matched = false;
      for (std::string_view op : ops) {
        if (ts_.at_op(op)) {
          int line = ts_.next().line;
          e = make2(Expr::Kind::kBinary, line, std::move(e), (this->*operand)(), std::string(op));
          matched = true;
          break;
        }
      }
      if (!matched) return e;
    }
  }

  ExprPtr math1() { return binary_level({"+", "-"}, &ExprParser::concat); }
  ExprPtr concat() { return binary_level({"~"}, &ExprParser::math2); }
  ExprPtr math2() { return binary_level({"*", "//", "/", "%"}, &ExprParser::power); }
  ExprPtr power() { return binary_level({"**"}, &ExprParser::unary_filtered); }
  ExprPtr unary_filtered() { return unary(true); }

  ExprPtr unary(bool with_filter) {
    ExprPtr e;
    if (ts_.at_op("-") || ts_.at_op("+")) {
      const Token& t = ts_.next();
      e = make(t.text == "-" ? Expr::Kind::kNeg : Expr::Kind::kPos, t.line);
      e->children.push_back(unary(false));
    } else {
      e = primary();
    }
    e = postfix(std::move(e));
    return with_filter ? filter_chain(std::move(e)) : std::move(e);
  }

  ExprPtr primary() {
    const Token& t = ts_.peek();
    int line = t.line;
    ExprPtr e = make(Expr::Kind::kLiteral, line);
    switch (t.kind) {
      case TokenKind::kName: {
        std::string n = ts_.next().text;
        if (n == "true" || n == "True") {
          e->literal = Value::boolean(true);
        } else if (n == "false" || n == "False") {
          e->literal = Value::boolean(false);
        } else if (n == "none" || n == "None") {
          e->literal = Value::none();
        } else {
          e->kind = Expr::Kind::kName;
          e->name = n;
        }
        return e;
      }
      case TokenKind::kString: {
        std::string s;
        while (ts_.peek().kind == TokenKind::kString) s += ts_.next().text;  // adjacent literals join
        e->literal = Value::string(std::move(s));
        return e;
      }
      case TokenKind::kInt: e->literal = Value::integer(ts_.next().int_value); return e;
      case TokenKind::kFloat: e->literal = Value::number(ts_.next().float_value); return e;
      default: break;
    }
    if (ts_.skip_op("(")) {
      if (ts_.skip_op(")")) {
        e->kind = Expr::Kind::kList;
        e->name = "tuple";
        return e;
      }
      ExprPtr inner = tuple();
      ts_.expect_op(")");
      return inner;
    }
    if (ts_.skip_op("[")) {
      e->kind = Expr::Kind::kList;
      while (!ts_.at_op("]")) {
        e->children.push_back(expression());
        if (!ts_.skip_op(",")) break;
      }
      ts_.expect_op("]");
      return e;
    }
    if (ts_.skip_op("{")) {
      e->kind = Expr::Kind::kDict;
      while (!ts_.at_op("}")) {
        e->children.push_back(expression());
        ts_.expect_op(":");
        e->children.push_back(expression());
        if (!ts_.skip_op(",")) break;
      }
      ts_.expect_op("}");
      return e;
    }
    ts_.fail("expected an expression");
  }

  ExprPtr postfix(ExprPtr e) {
    while (true) {
      if (ts_.at_op(".")) {
        int line = ts_.next().line;
        if (ts_.peek().kind == TokenKind::kInt) {
          ExprPtr idx = make(Expr::Kind::kLiteral, line);
          idx->literal = Value::integer(ts_.next().int_value);
          e = make2(Expr::Kind::kGetItem, line, std::move(e), std::move(idx));
        } else {
          ExprPtr a = make(Expr::Kind::kGetAttr, line);
          a->children.push_back(std::move(e));
          a->name = ts_.expect_name();
          e = std::move(a);
        }
      } else if (ts_.at_op("[")) {
        e = subscript(std::move(e));
      } else if (ts_.at_op("(")) {
        e = call(std::move(e), Expr::Kind::kCall, "");
      } else {
        return e;
      }
    }
  }

  ExprPtr subscript(ExprPtr obj) {
    int line = ts_.next().line;  // '['
    ExprPtr start, stop, step;
    if (!ts_.at_op(":")) start = expression();
    if (!ts_.skip_op(":")) {
      ts_.expect_op("]");
      return make2(Expr::Kind::kGetItem, line, std::move(obj), std::move(start));
    }
    if (!ts_.at_op("]") && !ts_.at_op(":")) stop = expression();
    if (ts_.skip_op(":") && !ts_.at_op("]")) step = expression();
    ts_.expect_op("]");
    ExprPtr s = make(Expr::Kind::kSlice, line);
    s->children.push_back(std::move(obj));
    s->children.push_back(std::move(start));
    s->children.push_back(std::move(stop));
    s->children.push_back(std::move(step));
    return s;
  }

  // Parses `(args)` into a call, filter or test node whose children[0] is `target`.
  ExprPtr call(ExprPtr target, Expr::Kind kind, std::string name) {
    int line = ts_.peek().line;
    ExprPtr c = make(kind, line);
    c->name = std::move(name);
    c->children.push_back(std::move(target));
    if (!ts_.skip_op("(")) return c;
    while (!ts_.at_op(")")) {
      if (ts_.at_op("*") || ts_.at_op("**")) ts_.fail("unsupported *args / **kwargs in call");
      if (ts_.peek().kind == TokenKind::kName && ts_.at_op("=", 1)) {
        std::string key = ts_.next().text;
        ts_.next();
        c->kwargs.emplace_back(key, expression());
      } else {
        if (!c->kwargs.empty()) ts_.fail("positional argument after keyword argument");
        c->children.push_back(expression());
      }
      if (!ts_.skip_op(",")) break;
    }
    ts_.expect_op(")");
    return c;
  }

  ExprPtr filter_chain(ExprPtr e) {
    while (true) {
      if (ts_.skip_op("|")) {
        int line = ts_.peek().line;
        std::string name = ts_.expect_name();
        while (ts_.skip_op(".")) name += std::string(".").append(ts_.expect_name());
        MINIVLLM_CHECK(find_filter(name)) << "chat template line " << line << ": unknown filter '" << name << "'";
        e = call(std::move(e), Expr::Kind::kFilter, name);
      } else if (ts_.at_name("is")) {
        e = test(std::move(e));
      } else if (ts_.at_op("(")) {
        e = call(std::move(e), Expr::Kind::kCall, "");
      } else {
        return e;
      }
    }
  }

  ExprPtr test(ExprPtr e) {
    int line = ts_.next().line;  // 'is'
    bool negated = ts_.skip_name("not");
    std::string name = ts_.expect_name();
    while (ts_.skip_op(".")) name += std::string(".").append(ts_.expect_name());
    MINIVLLM_CHECK(find_test(name)) << "chat template line " << line << ": unknown test '" << name << "'";
    ExprPtr t;
    if (ts_.at_op("(")) {
      t = call(std::move(e), Expr::Kind::kTest, name);
    } else {
      t = make(Expr::Kind::kTest, line);
      t->name = name;
      t->children.push_back(std::move(e));
      const Token& p = ts_.peek();
      bool arg_start = p.kind == TokenKind::kName || p.kind == TokenKind::kString || p.kind == TokenKind::kInt ||
                       p.kind == TokenKind::kFloat || ts_.at_op("[") || ts_.at_op("{");
      if (arg_start && !ts_.at_name("else") && !ts_.at_name("or") && !ts_.at_name("and")) {
        if (ts_.at_name("is")) ts_.fail("cannot chain tests with 'is'");
        t->children.push_back(postfix(primary()));
      }
    }
    if (!negated) return t;
    ExprPtr n = make(Expr::Kind::kNot, line);
    n->children.push_back(std::move(t));
    return n;
  }

  Tokens& ts_;
};

const std::set<std::string> kUnsupportedTags = {"include", "import", "from", "extends", "block", "call",
                                                "filter",  "raw",    "with", "do",      "autoescape", "trans"};

class StmtParser {
 public:
  explicit StmtParser(std::vector<Chunk> chunks) : chunks_(std::move(chunks)) {}

  Body parse_all() {
    std::string stop;
    Body body = parse_body({}, &stop);
    return body;
  }

 private:
  std::unique_ptr<Stmt> make_stmt(Stmt::Kind kind, int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = line;
    return s;
  }

  // Parses statements until a tag named in `stops` (left in tokens_ after its name) or the end.
  Body parse_body(std::initializer_list<std::string_view> stops, std::string* stop_found) {
    Body body;
    while (next_ < chunks_.size()) {
      const Chunk& c = chunks_[next_++];
      if (c.kind == ChunkKind::kText) {
        auto s = make_stmt(Stmt::Kind::kText, c.line);
        s->text = c.text;
        body.push_back(std::move(s));
        continue;
      }
      tokens_ = std::make_unique<Tokens>(&c.tokens);
      if (c.kind == ChunkKind::kOutput) {
        auto s = make_stmt(Stmt::Kind::kOutput, c.line);
        s->expr = ExprParser(*tokens_).tuple();
        tokens_->expect_end("{{ ... }}");
        body.push_back(std::move(s));
        continue;
      }
      std::string tag = tokens_->expect_name();
      for (std::string_view stop : stops) {
        if (tag == stop) {
          *stop_found = tag;
          return body;
        }
      }
      body.push_back(parse_statement(tag, c.line));
    }
    if (stops.size() != 0) {
      std::string expected;
      for (std::string_view s : stops) expected += (expected.empty() ? "'" : " or '") + std::string(s) + "'";
      MINIVLLM_FAIL() << "chat template: unexpected end of template, expected " << expected
                      << " to close the block opened at line " << block_line_;
    }
    return body;
  }

  std::unique_ptr<Stmt> parse_statement(const std::string& tag, int line) {
    int saved = block_line_;
    block_line_ = line;
    std::unique_ptr<Stmt> s;
    if (tag == "if") {
      s = parse_if(line);
    } else if (tag == "for") {
      s = parse_for(line);
    } else if (tag == "set") {
      s = parse_set(line);
    } else if (tag == "macro") {
      s = parse_macro(line);
    } else if (tag == "break" || tag == "continue") {
      s = make_stmt(tag == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, line);
      tokens_->expect_end(tag);
    } else if (tag == "generation") {  // transformers' AssistantTracker: renders its body in place
      tokens_->expect_end(tag);
      s = make_stmt(Stmt::Kind::kScope, line);
      std::string stop;
      s->body = parse_body({"endgeneration"}, &stop);
      tokens_->expect_end(stop);
    } else if (tag.rfind("end", 0, 3) == 0 || tag == "elif" || tag == "else") {
      MINIVLLM_FAIL() << "chat template line " << line << ": unexpected tag '" << tag << "'";
    } else if (kUnsupportedTags.count(tag)) {
      MINIVLLM_FAIL() << "chat template line " << line << ": unsupported tag '" << tag << "'";
    } else {
      MINIVLLM_FAIL() << "chat template line " << line << ": unknown tag '" << tag << "'";
    }
    block_line_ = saved;
    return s;
  }

  std::unique_ptr<Stmt> parse_if(int line) {
    auto s = make_stmt(Stmt::Kind::kIf, line);
    std::string stop = "elif";
    while (stop == "elif") {
      ExprPtr cond = ExprParser(*tokens_).tuple();
      tokens_->expect_end(stop == "elif" && s->branches.empty() ? "if" : "elif");
      Body body = parse_body({"elif", "else", "endif"}, &stop);
      s->branches.emplace_back(std::move(cond), std::move(body));
    }
    if (stop == "else") {
      tokens_->expect_end("else");
      s->else_body = parse_body({"endif"}, &stop);
    }
    tokens_->expect_end("endif");
    return s;
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> names;
    bool paren = tokens_->skip_op("(");
    do {
      names.push_back(tokens_->expect_name());
    } while (tokens_->skip_op(","));
    if (paren) tokens_->expect_op(")");
    return names;
  }

  std::unique_ptr<Stmt> parse_for(int line) {
    auto s = make_stmt(Stmt::Kind::kFor, line);
    s->targets = parse_targets();
    if (!tokens_->skip_name("in")) tokens_->fail("expected 'in' in for loop");
    s->expr = ExprParser(*tokens_).tuple(false);
    if (tokens_->skip_name("if")) s->filter = ExprParser(*tokens_).expression();
    if (tokens_->at_name("recursive")) tokens_->fail("unsupported recursive for loop");
    tokens_->expect_end("for");
    std::string stop;
    s->body = parse_body({"else", "endfor"}, &stop);
    if (stop == "else") {
      tokens_->expect_end("else");
      s->else_body = parse_body({"endfor"}, &stop);
    }
    tokens_->expect_end("endfor");
    return s;
  }

  std::unique_ptr<Stmt> parse_set(int line) {
    auto s = make_stmt(Stmt::Kind::kSet, line);
    std::string first = tokens_->expect_name();
    s->targets.push_back(first);
    if (tokens_->skip_op(".")) {
      s->attr_target = true;
      s->targets.push_back(tokens_->expect_name());
    } else {
      while (tokens_->skip_op(",")) s->targets.push_back(tokens_->expect_name());
    }
    if (tokens_->skip_op("=")) {
      s->expr = ExprParser(*tokens_).tuple();
      tokens_->expect_end("set");
      return s;
    }
    if (s->attr_target || s->targets.size() != 1) tokens_->fail("expected '=' in set");
    if (tokens_->at_op("|")) tokens_->fail("unsupported filtered block set");
    tokens_->expect_end("set");
    s->kind = Stmt::Kind::kSetBlock;
    std::string stop;
    s->body = parse_body({"endset"}, &stop);
    tokens_->expect_end("endset");
    return s;
  }

  std::unique_ptr<Stmt> parse_macro(int line) {
    auto s = make_stmt(Stmt::Kind::kMacro, line);
    s->text = tokens_->expect_name();
    tokens_->expect_op("(");
    while (!tokens_->at_op(")")) {
      std::string name = tokens_->expect_name();
      ExprPtr def;
      if (tokens_->skip_op("=")) def = ExprParser(*tokens_).expression();
      s->params.emplace_back(name, std::move(def));
      if (!tokens_->skip_op(",")) break;
    }
    tokens_->expect_op(")");
    tokens_->expect_end("macro");
    std::string stop;
    s->body = parse_body({"endmacro"}, &stop);
    tokens_->expect_end("endmacro");
    return s;
  }

  std::vector<Chunk> chunks_;
  size_t next_ = 0;
  std::unique_ptr<Tokens> tokens_;
  int block_line_ = 0;
};

}  // namespace

Body parse_template(std::string_view source) { return StmtParser(lex_template(source)).parse_all(); }

}  // namespace minivllm::jinja
