// Expression evaluation of the template renderer (see renderer.h): Python arithmetic and
// comparison rules, short-circuit and/or returning operands, calls, filters and tests.
#include <cmath>

#include "common/check.h"
#include "template/builtins.h"
#include "template/checked_int.h"
#include "template/limits.h"
#include "template/renderer.h"

namespace minivllm::jinja {
namespace {

using K = Value::Kind;

[[noreturn]] void bad_operands(const std::string& op, const Value& a, const Value& b) {
  throw TypeError("unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
}

// seq * times, refused before anything is built when the result would break a limit.
Value repeat(const Value& seq, int64_t times) {
  if (times < 0) times = 0;
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    uint64_t bytes;
    if (__builtin_mul_overflow(static_cast<uint64_t>(s.size()), static_cast<uint64_t>(times), &bytes))
      bytes = UINT64_MAX;
    check_string_size(bytes);
    std::string out;
    out.reserve(bytes);
    if (times > 0) out = s;
    while (out.size() < bytes) out.append(out, 0, std::min(out.size(), bytes - out.size()));  // doubling
    return Value::string(std::move(out));
  }
  const ValueList& items = seq.as_list();
  uint64_t n;
  if (__builtin_mul_overflow(static_cast<uint64_t>(items.size()), static_cast<uint64_t>(times), &n)) n = UINT64_MAX;
  check_list_size(n);
  ValueList out;
  out.reserve(n);
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::list(std::move(out));
}

bool is_int(const Value& v) { return v.kind() == K::kInt || v.kind() == K::kBool; }

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  bool ints = is_int(a) && is_int(b);
  if (op == "+") return ints ? Value::integer(checked_add(a.as_int(), b.as_int())) : Value::number(a.as_float() + b.as_float());
  if (op == "-") return ints ? Value::integer(checked_sub(a.as_int(), b.as_int())) : Value::number(a.as_float() - b.as_float());
  if (op == "*") return ints ? Value::integer(checked_mul(a.as_int(), b.as_int())) : Value::number(a.as_float() * b.as_float());
  if (op == "/") {
    if (b.as_float() == 0) throw TypeError("division by zero");
    return Value::number(a.as_float() / b.as_float());
  }
  if (op == "//" || op == "%") {
    if (b.as_float() == 0) throw TypeError(op == "//" ? "integer division by zero" : "modulo by zero");
    if (ints) return Value::integer(op == "//" ? floor_div(a.as_int(), b.as_int()) : floor_mod(a.as_int(), b.as_int()));
    double x = a.as_float(), y = b.as_float();
    double q = std::floor(x / y);
    return Value::number(op == "//" ? q : x - q * y);
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) return Value::integer(checked_pow(a.as_int(), b.as_int()));
    // A negative integer exponent gives a float, as in Python (where 0 ** -1 is an error).
    if (a.as_float() == 0 && b.as_float() < 0) throw TypeError("0.0 cannot be raised to a negative power");
    return Value::number(std::pow(a.as_float(), b.as_float()));
  }
  bad_operands(op, a, b);
}

// a + b of two strings (or a ~ b), checked before it is built.
Value concat(const std::string& a, const std::string& b) {
  check_string_size(static_cast<uint64_t>(a.size()) + b.size());
  std::string out;
  out.reserve(a.size() + b.size());
  out += a;
  out += b;
  return Value::string(std::move(out));
}

std::optional<int64_t> slice_part(const Value& v) {
  if (v.is_none() || v.is_undefined()) return std::nullopt;
  if (!is_int(v)) throw TypeError("slice indices must be integers or None, not " + type_name(v));
  return v.as_int();
}

}  // namespace

Value Renderer::eval_binary(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return concat(to_str(a), to_str(b));
  if (a.is_undefined()) throw_undefined(a);
  if (b.is_undefined()) throw_undefined(b);
  if (a.is_number() && b.is_number()) return arithmetic(op, a, b);
  if (op == "+" && a.is_string() && b.is_string()) return concat(a.as_string(), b.as_string());
  if (op == "+" && a.is_list() && b.is_list()) {
    check_list_size(static_cast<uint64_t>(a.as_list().size()) + b.as_list().size());
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
  if (!f) throw TypeError("unknown filter '" + excerpt(e.name) + "'");
  Value input = eval(*e.children[0]);
  CallArgs args = eval_args(e);
  return f(input, args);
}

Value Renderer::eval_test(const Expr& e) {
  TestFn t = find_test(e.name);
  if (!t) throw TypeError("unknown test '" + excerpt(e.name) + "'");
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
  DepthGuard guard(*this, e.line);
  charge_work(kWorkPerNode);
  return eval_node(e);
}

// The cases of eval_node with many temporaries live apart, keeping eval_node's frame (once per
// expression level on the stack) small.
Value Renderer::eval_unary(const Expr& e) {
  Value v = eval(*e.children[0]);
  if (v.is_undefined()) throw_undefined(v);
  if (!v.is_number())
    throw TypeError("bad operand type for unary " + std::string(e.kind == Expr::Kind::kNeg ? "-" : "+") + ": '" +
                    type_name(v) + "'");
  if (e.kind == Expr::Kind::kPos) return is_int(v) ? Value::integer(v.as_int()) : v;
  return is_int(v) ? Value::integer(checked_neg(v.as_int())) : Value::number(-v.as_float());
}

Value Renderer::eval_list(const Expr& e) {
  ValueList items;
  items.reserve(e.children.size());
  for (const auto& c : e.children) items.push_back(eval(*c));
  return e.name == "tuple" ? Value::tuple(std::move(items)) : Value::list(std::move(items));
}

Value Renderer::eval_dict(const Expr& e) {
  ValueDict d;
  for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
    Value k = eval(*e.children[i]);
    if (!k.is_string()) throw TypeError("dict literal keys must be strings, got " + type_name(k));
    d.set(k.as_string(), eval(*e.children[i + 1]));
  }
  return Value::dict(std::move(d));
}

Value Renderer::eval_node(const Expr& e) {
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
    case Expr::Kind::kPos: return eval_unary(e);
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
    case Expr::Kind::kList: return eval_list(e);
    case Expr::Kind::kDict: return eval_dict(e);
  }
  return Value();
}

}  // namespace minivllm::jinja
