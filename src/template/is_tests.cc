// Jinja tests (`x is defined`, `x is string`, ...) with jinja2's definitions; note that, as in
// Python, booleans are numbers and undefined is iterable (it iterates as empty).
#include <cctype>
#include <map>

#include "template/builtins.h"
#include "template/checked_int.h"
#include "template/limits.h"

namespace minivllm::jinja {
namespace {

bool compare_test(const Value& v, CallArgs& a, const char* name, bool (*pred)(int)) {
  auto args = bind_args(a, {"other"}, name);
  return pred(compare(v, args[0]));
}

bool any_cased(const std::string& s, bool want_lower) {
  charge_work(s.size());
  bool cased = false;
  for (char c : s) {
    if (std::isupper(static_cast<unsigned char>(c))) {
      if (want_lower) return false;
      cased = true;
    } else if (std::islower(static_cast<unsigned char>(c))) {
      if (!want_lower) return false;
      cased = true;
    }
  }
  return cased;
}

int64_t need_int(const Value& v, const char* test) {
  if (v.kind() != Value::Kind::kInt && v.kind() != Value::Kind::kBool)
    throw TypeError(std::string("test '") + test + "' needs an integer, got " + type_name(v));
  return v.as_int();
}

bool sameas(const Value& v, const Value& o) {
  if (v.kind() != o.kind()) return false;
  switch (v.kind()) {
    case Value::Kind::kList: return &v.as_list() == &o.as_list();
    case Value::Kind::kDict:
    case Value::Kind::kNamespace: return &v.as_dict() == &o.as_dict();
    default: return equals(v, o);
  }
}

using K = Value::Kind;

const std::map<std::string, TestFn>& tests() {
  static const std::map<std::string, TestFn> kTests = {
      {"defined", [](const Value& v, CallArgs&) { return !v.is_undefined(); }},
      {"undefined", [](const Value& v, CallArgs&) { return v.is_undefined(); }},
      {"none", [](const Value& v, CallArgs&) { return v.is_none(); }},
      {"string", [](const Value& v, CallArgs&) { return v.is_string(); }},
      {"mapping", [](const Value& v, CallArgs&) { return v.is_dict(); }},
      {"iterable", [](const Value& v, CallArgs&) {
         return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
       }},
      {"sequence", [](const Value& v, CallArgs&) {
         return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
       }},
      {"number", [](const Value& v, CallArgs&) { return v.is_number(); }},
      {"integer", [](const Value& v, CallArgs&) { return v.kind() == K::kInt; }},
      {"float", [](const Value& v, CallArgs&) { return v.kind() == K::kFloat; }},
      {"boolean", [](const Value& v, CallArgs&) { return v.kind() == K::kBool; }},
      {"true", [](const Value& v, CallArgs&) { return v.kind() == K::kBool && v.as_bool(); }},
      {"false", [](const Value& v, CallArgs&) { return v.kind() == K::kBool && !v.as_bool(); }},
      {"callable", [](const Value& v, CallArgs&) { return v.kind() == K::kCallable; }},
      {"odd", [](const Value& v, CallArgs&) { return need_int(v, "odd") % 2 != 0; }},
      {"even", [](const Value& v, CallArgs&) { return need_int(v, "even") % 2 == 0; }},
      {"divisibleby", [](const Value& v, CallArgs& a) {
         auto args = bind_args(a, {"num"}, "divisibleby");
         int64_t d = need_int(args[0], "divisibleby");
         if (d == 0) throw TypeError("divisibleby 0");
         return floor_mod(need_int(v, "divisibleby"), d) == 0;  // INT64_MIN % -1 traps
       }},
      {"eq", [](const Value& v, CallArgs& a) { return equals(v, bind_args(a, {"other"}, "eq")[0]); }},
      {"ne", [](const Value& v, CallArgs& a) { return !equals(v, bind_args(a, {"other"}, "ne")[0]); }},
      {"lt", [](const Value& v, CallArgs& a) { return compare_test(v, a, "lt", [](int c) { return c < 0; }); }},
      {"le", [](const Value& v, CallArgs& a) { return compare_test(v, a, "le", [](int c) { return c <= 0; }); }},
      {"gt", [](const Value& v, CallArgs& a) { return compare_test(v, a, "gt", [](int c) { return c > 0; }); }},
      {"ge", [](const Value& v, CallArgs& a) { return compare_test(v, a, "ge", [](int c) { return c >= 0; }); }},
      {"in", [](const Value& v, CallArgs& a) { return contains(bind_args(a, {"seq"}, "in")[0], v); }},
      {"sameas", [](const Value& v, CallArgs& a) { return sameas(v, bind_args(a, {"other"}, "sameas")[0]); }},
      {"lower", [](const Value& v, CallArgs&) { return v.is_string() && any_cased(v.as_string(), true); }},
      {"upper", [](const Value& v, CallArgs&) { return v.is_string() && any_cased(v.as_string(), false); }},
  };
  return kTests;
}

}  // namespace

TestFn find_test(const std::string& name) {
  static const std::map<std::string, std::string> kAliases = {
      {"==", "eq"}, {"equalto", "eq"}, {"!=", "ne"}, {"<", "lt"},  {"lessthan", "lt"}, {"<=", "le"},
      {">", "gt"},  {"greaterthan", "gt"}, {">=", "ge"}};
  auto alias = kAliases.find(name);
  auto it = tests().find(alias == kAliases.end() ? name : alias->second);
  return it == tests().end() ? nullptr : it->second;
}

}  // namespace minivllm::jinja
