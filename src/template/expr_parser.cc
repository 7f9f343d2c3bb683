// Recursive-descent expression parser (see expr_parser.h).
#include "template/expr_parser.h"

#include <algorithm>
#include <initializer_list>
#include <set>

#include "template/builtins.h"
#include "template/limits.h"

namespace minivllm::jinja {
namespace {

ExprPtr make(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

[[noreturn]] void too_deep(int line) {
  MINIVLLM_FAIL() << "chat template line " << line << ": expression nested too deeply: over " << kMaxExpressionDepth
                  << " levels (kMaxExpressionDepth)";
  std::abort();  // unreachable: the failure throws from its destructor
}

// Sets e's tree depth from its (complete) children; refuses trees deeper than the limit, which
// the renderer would walk recursively (as does the tree's destructor).
ExprPtr finish(ExprPtr e) {
  int deepest = 0;
  for (const auto& c : e->children)
    if (c) deepest = std::max(deepest, c->depth);
  for (const auto& [k, c] : e->kwargs)
    if (c) deepest = std::max(deepest, c->depth);
  e->depth = deepest + 1;
  if (e->depth > kMaxExpressionDepth) too_deep(e->line);
  return e;
}

ExprPtr make2(Expr::Kind kind, int line, ExprPtr a, ExprPtr b, std::string name = "") {
  ExprPtr e = make(kind, line);
  e->children.push_back(std::move(a));
  e->children.push_back(std::move(b));
  e->name = std::move(name);
  return finish(std::move(e));
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
    return finish(std::move(t));
  }

  ExprPtr expression(bool with_condexpr = true) {
    Nest nest(*this);
    return with_condexpr ? condexpr() : or_expr();
  }

 private:
  // Counts the parser's own recursion (brackets, `not not ...`, `- - ...`, `else ... if`): each
  // level is several native frames (kMaxExpressionDepth).
  class Nest {
   public:
    explicit Nest(ExprParser& p) : p_(p) {
      if (++p_.nesting_ > kMaxExpressionDepth) too_deep(p_.ts_.peek().line);
    }
    ~Nest() { --p_.nesting_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;

   private:
    ExprParser& p_;
  };

  ExprPtr condexpr() {
    ExprPtr e = or_expr();
    while (ts_.at_name("if")) {
      int line = ts_.next().line;
      ExprPtr c = make(Expr::Kind::kCond, line);
      c->children.push_back(std::move(e));
      c->children.push_back(or_expr());
      if (ts_.skip_name("else")) {
        Nest nest(*this);
        c->children.push_back(condexpr());
      } else {
        c->children.push_back(nullptr);
      }
      e = finish(std::move(c));
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
      Nest nest(*this);
      ExprPtr e = make(Expr::Kind::kNot, ts_.next().line);
      e->children.push_back(not_expr());
      return finish(std::move(e));
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
    return cmp ? finish(std::move(cmp)) : std::move(first);
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
      Nest nest(*this);
      const Token& t = ts_.next();
      e = make(t.text == "-" ? Expr::Kind::kNeg : Expr::Kind::kPos, t.line);
      e->children.push_back(unary(false));
      e = finish(std::move(e));
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
      return finish(std::move(e));
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
      return finish(std::move(e));
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
          e = finish(std::move(a));
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
    return finish(std::move(s));
  }

  // Parses `(args)` into a call, filter or test node whose children[0] is `target`.
  ExprPtr call(ExprPtr target, Expr::Kind kind, std::string name) {
    int line = ts_.peek().line;
    ExprPtr c = make(kind, line);
    c->name = std::move(name);
    c->children.push_back(std::move(target));
    if (!ts_.skip_op("(")) return finish(std::move(c));
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
    return finish(std::move(c));
  }

  ExprPtr filter_chain(ExprPtr e) {
    while (true) {
      if (ts_.skip_op("|")) {
        int line = ts_.peek().line;
        std::string name = ts_.expect_name();
        while (ts_.skip_op(".")) name += std::string(".").append(ts_.expect_name());
        MINIVLLM_CHECK(find_filter(name)) << "chat template line " << line << ": unknown filter '" << excerpt(name) << "'";
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
    MINIVLLM_CHECK(find_test(name)) << "chat template line " << line << ": unknown test '" << excerpt(name) << "'";
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
      t = finish(std::move(t));
    }
    if (!negated) return t;
    ExprPtr n = make(Expr::Kind::kNot, line);
    n->children.push_back(std::move(t));
    return finish(std::move(n));
  }

  Tokens& ts_;
  int nesting_ = 0;
};

}  // namespace

ExprPtr parse_tuple(Tokens& ts, bool with_condexpr) { return ExprParser(ts).tuple(with_condexpr); }
ExprPtr parse_expression(Tokens& ts) { return ExprParser(ts).expression(); }

}  // namespace minivllm::jinja
