// Expression evaluation of the template renderer (see renderer.h): Python arithmetic and
// comparison rules, short-circuit and/or returning operands, calls, filters and tests.
#include <cmath>

#include "common/check.h"
#include "template/builtins.h"
#include "template/renderer.h"

namespace minivllm::jinja {
namespace {

using K = Value::Kind;

[[noreturn]] void bad_operands(const std::string& op, const Value& a, const Value& b) {
  throw TypeError("unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
}

Value repeat(const Value& seq, int64_t times) {
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += seq.as_string();
    return Value::string(std::move(out));
  }
  ValueList out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), seq.as_list().begin(), seq.as_list().end());
  return Value::list(std::move(out));
}

bool is_int(const Value& v) { return v.kind() == K::kInt || v.kind() == K::kBool; }

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  bool ints = is_int(a) && is_int(b);
  if (op == "+") return ints ? Value::integer(a.as_int() + b.as_int()) : Value::number(a.as_float() + b.as_float());
  if (op == "-") return ints ? Value::integer(a.as_int() - b.as_int()) : Value::number(a.as_float() - b.as_float());
  if (op == "*") return ints ? Value::integer(a.as_int() * b.as_int()) : Value::number(a.as_float() * b.as_float());
  if (op == "/") {
    if (b.as_float() == 0) throw TypeError("division by zero");
    return Value::number(a.as_float() / b.as_float());
  }
  if (op == "//" || op == "%") {
    if (b.as_float() == 0) throw TypeError(op == "//" ? "integer division by zero" : "modulo by zero");
    if (ints) {
      int64_t x = a.as_int(), y = b.as_int();
      int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) {  // Python floors toward negative infinity
        --q;
        r += y;
      }
      return Value::integer(op == "//" ? q : r);
    }
    double x = a.as_float(), y = b.as_float();
    double q = std::floor(x / y);
    return Value::number(op == "//" ? q : x - q * y);
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) {
      int64_t r = 1;
      for (int64_t i = 0; i < b.as_int(); ++i) r *= a.as_int();
      return Value::integer(r);
    }
    return Value::number(std::pow(a.as_float(), b.as_float()));
  }
  bad_operands(op, a, b);
}

std::optional<int64_t> slice_part(const Value& v) {
  if (v.is_none() || v.is_undefined()) return std::nullopt;
  if (!is_int(v)) throw TypeError("slice indices must be integers or None, not " + type_name(v));
  return v.as_int();
}

}  // namespace

Value Renderer::eval_binary(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return Value::string(to_str(a) + to_str(b));
  if (a.is_undefined()) throw_undefined(a);
  if (b.is_undefined()) throw_undefined(b);
  if (a.is_number() && b.is_number()) return arithmetic(op, a, b);
  if (op == "+" && a.is_string() && b.is_string()) return Value::string(a.as_string() + b.as_string());
  if (op == "+" && a.is_list() && b.is_list()) {
    ValueList out = a.as_list();
    out.insert(out.end(), b.as_list().begin(), b.as_list().end());
    return Value::list(std::move(out));
  }
  if (op == "*" && (a.is_string() || a.is_list()) && is_int(b)) return repeat(a, b.as_int());
  if (op == "*" && is_int(a) && (b.is_string() || b.is_list())) return repeat(b, a.as_int());
  if (op == "%" && a.is_string()) throw TypeError("printf-style string formatting ('%') is not supported");
  bad_operands(op, a, b);
}

Value Renderer::eval_compare(const Expr& e) {
  Value left = eval(*e.children[0]);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.children[i + 1]);
    const std::string& op = e.ops[i];
    bool r;
    if (op == "==") r = equals(left, right);
    else if (op == "!=") r = !equals(left, right);
    else if (op == "in") r = contains(right, left);
    else if (op == "not in") r = !contains(right, left);
    else {
      if (left.is_undefined()) throw_undefined(left);
      if (right.is_undefined()) throw_undefined(right);
      int c = compare(left, right);
      r = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
    }
    if (!r) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

CallArgs Renderer::eval_args(const Expr& e) {
  CallArgs args;
  for (size_t i = 1; i < e.children.size(); ++i) args.positional.push_back(eval(*e.children[i]));
  for (const auto& [k, v] : e.kwargs) args.keyword.emplace_back(k, eval(*v));
  return args;
}

Value Renderer::eval_call(const Expr& e) {
  Value callee = eval(*e.children[0]);
  if (callee.is_undefined()) throw_undefined(callee);
  if (callee.kind() != K::kCallable) throw TypeError("'" + type_name(callee) + "' object is not callable");
  CallArgs args = eval_args(e);
  return callee.as_callable().fn(args);
}

Value Renderer::eval_filter(const Expr& e) {
  FilterFn f = find_filter(e.name);
  if (!f) throw TypeError("unknown filter '" + e.name + "'");
  Value input = eval(*e.children[0]);
  CallArgs args = eval_args(e);
  return f(input, args);
}

Value Renderer::eval_test(const Expr& e) {
  TestFn t = find_test(e.name);
  if (!t) throw TypeError("unknown test '" + e.name + "'");
  Value input = eval(*e.children[0]);
  CallArgs args = eval_args(e);
  return Value::boolean(t(input, args));
}

Value Renderer::eval_slice(const Expr& e) {
  Value obj = eval(*e.children[0]);
  auto part = [&](size_t i) { return e.children[i] ? slice_part(eval(*e.children[i])) : std::nullopt; };
  return slice_value(obj, part(1), part(2), part(3));
}

Value Renderer::eval(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::kLiteral: return e.literal;
    case Expr::Kind::kName: return lookup(e.name);
    case Expr::Kind::kGetAttr: return get_attr(eval(*e.children[0]), e.name);
    case Expr::Kind::kGetItem: {
      Value obj = eval(*e.children[0]);
      return get_item(obj, eval(*e.children[1]));
    }
    case Expr::Kind::kSlice: return eval_slice(e);
    case Expr::Kind::kCall: return eval_call(e);
    case Expr::Kind::kFilter: return eval_filter(e);
    case Expr::Kind::kTest: return eval_test(e);
    case Expr::Kind::kNot: return Value::boolean(!truthy(eval(*e.children[0])));
    case Expr::Kind::kNeg:
    case Expr::Kind::kPos: {
      Value v = eval(*e.children[0]);
      if (v.is_undefined()) throw_undefined(v);
      if (!v.is_number()) throw TypeError("bad operand type for unary " + std::string(e.kind == Expr::Kind::kNeg ? "-" : "+") + ": '" + type_name(v) + "'");
      if (e.kind == Expr::Kind::kPos) return is_int(v) ? Value::integer(v.as_int()) : v;
      return is_int(v) ? Value::integer(-v.as_int()) : Value::number(-v.as_float());
    }
    case Expr::Kind::kBinary: {
      Value a = eval(*e.children[0]);
      return eval_binary(e.name, a, eval(*e.children[1]));
    }
    case Expr::Kind::kAnd: {
      Value a = eval(*e.children[0]);
      return truthy(a) ? eval(*e.children[1]) : a;
    }
    case Expr::Kind::kOr: {
      Value a = eval(*e.children[0]);
      return truthy(a) ? a : eval(*e.children[1]);
    }
    case Expr::Kind::kCompare: return eval_compare(e);
    case Expr::Kind::kCond:
      if (truthy(eval(*e.children[1]))) return eval(*e.children[0]);
      return e.children[2] ? eval(*e.children[2]) : Value::undefined("conditional expression had no else branch");
    case Expr::Kind::kList: {
      ValueList items;
      for (const auto& c : e.children) items.push_back(eval(*c));
      return e.name == "tuple" ? Value::tuple(std::move(items)) : Value::list(std::move(items));
    }
    case Expr::Kind::kDict: {
      ValueDict d;
      for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
        Value k = eval(*e.children[i]);
        if (!k.is_string()) throw TypeError("dict literal keys must be strings, got " + type_name(k));
        d.set(k.as_string(), eval(*e.children[i + 1]));
      }
      return Value::dict(std::move(d));
    }
  }
  return Value();
}

}  // namespace minivllm::jinja
