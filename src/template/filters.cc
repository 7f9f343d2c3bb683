// Jinja filters with jinja2's behaviour, and tojson as transformers overrides it
// (json.dumps with ensure_ascii=False, key order kept, no HTML escaping).
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "template/builtins.h"
#include "template/checked_int.h"
#include "template/limits.h"
#include "template/py_string.h"

namespace minivllm::jinja {
namespace {

using K = Value::Kind;

std::string text_of(const Value& v) { return to_str(v); }  // jinja's soft_str: undefined -> ""

bool arg_true(const Value& v) { return !v.is_undefined() && truthy(v); }

// jinja's make_attrgetter: "a.b.0" walks items (integers become indexes).
Value attr_path(const Value& item, const std::string& path) {
  Value cur = item;
  size_t b = 0;
  while (true) {
    size_t dot = path.find('.', b);
    std::string part = path.substr(b, dot == std::string::npos ? std::string::npos : dot - b);
    // Digits index a list; more than 18 of them cannot be an index (and would overflow).
    bool numeric = !part.empty() && part.size() <= 18 && std::all_of(part.begin(), part.end(), ::isdigit);
    cur = get_item(cur, numeric ? Value::integer(std::stoll(part)) : Value::string(part));
    if (dot == std::string::npos) return cur;
    b = dot + 1;
  }
}

Value length(const Value& v) {
  switch (v.kind()) {
    case K::kUndefined: return Value::integer(0);
    case K::kString: return Value::integer(utf8_length(v.as_string()));
    case K::kList: return Value::integer(static_cast<int64_t>(v.as_list().size()));
    case K::kDict: return Value::integer(static_cast<int64_t>(v.as_dict().entries.size()));
    default: throw TypeError("object of type '" + type_name(v) + "' has no len()");
  }
}

Value sort_keys_deep(const Value& v) {
  if (v.is_list()) {
    ValueList out;
    for (const Value& x : v.as_list()) out.push_back(sort_keys_deep(x));
    return Value::list(std::move(out));
  }
  if (!v.is_dict()) return v;
  ValueDict d;
  for (const auto& [k, x] : v.as_dict().entries) d.entries.emplace_back(k, sort_keys_deep(x));
  std::stable_sort(d.entries.begin(), d.entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return Value::dict(std::move(d));
}

Value tojson(const Value& v, CallArgs& a) {
  auto args = bind_args(a, {"ensure_ascii", "indent", "separators", "sort_keys"}, "tojson");
  if (arg_true(args[0])) throw TypeError("tojson: ensure_ascii=True is not supported");
  if (!args[2].is_undefined() && !args[2].is_none()) throw TypeError("tojson: separators are not supported");
  int indent = -1;
  if (!args[1].is_undefined() && !args[1].is_none()) {
    if (args[1].kind() != K::kInt) throw TypeError("tojson: indent must be an integer");
    // Wider than a string may be cannot print (to_json_text checks the text it builds).
    indent = static_cast<int>(std::clamp<int64_t>(args[1].as_int(), 0, kMaxStringBytes + 1));
  }
  return Value::string(to_json_text(arg_true(args[3]) ? sort_keys_deep(v) : v, indent));
}

Value to_int(const Value& v, CallArgs& a) {
  auto args = bind_args(a, {"default", "base"}, "int");
  Value dflt = args[0].is_undefined() ? Value::integer(0) : args[0];
  if (!args[1].is_undefined() && !(args[1].kind() == K::kInt && args[1].as_int() == 10))
    throw TypeError("int: only base 10 is supported");
  switch (v.kind()) {
    case K::kBool:
    case K::kInt: return Value::integer(v.as_int());
    case K::kFloat:
      return std::isfinite(v.as_float()) ? Value::integer(checked_float_to_int(v.as_float(), "int()")) : dflt;
    case K::kString: {
      std::string s = py_replace(py_strip(v.as_string(), std::nullopt, true, true), "_", "", -1);
      try {
        size_t used = 0;
        int64_t i = std::stoll(s, &used);
        if (used == s.size()) return Value::integer(i);
      } catch (const std::exception&) {  // not an integer, or beyond int64: try it as a float
      }
      std::optional<double> d;
      try {
        size_t used = 0;
        double x = std::stod(s, &used);
        if (used == s.size()) d = x;
      } catch (const std::exception&) {
      }
      // Outside the try: a float beyond int64 is an error, not the default.
      if (d && std::isfinite(*d)) return Value::integer(checked_float_to_int(*d, "int()"));
      return dflt;
    }
    default: return dflt;
  }
}

Value to_float(const Value& v, CallArgs& a) {
  auto args = bind_args(a, {"default"}, "float");
  Value dflt = args[0].is_undefined() ? Value::number(0.0) : args[0];
  if (v.is_number()) return Value::number(v.as_float());
  if (v.is_string()) {
    std::string s = py_strip(v.as_string(), std::nullopt, true, true);
    try {
      size_t used = 0;
      double d = std::stod(s, &used);
      if (used == s.size()) return Value::number(d);
    } catch (const std::exception&) {
    }
  }
  return dflt;
}

Value join(const Value& v, CallArgs& a) {
  auto args = bind_args(a, {"d", "attribute"}, "join");
  std::string sep = args[0].is_undefined() ? "" : text_of(args[0]);
  std::string out;
  bool first = true;
  for (const Value& item : iterate(v)) {
    std::string x = text_of(args[1].is_undefined() ? item : attr_path(item, text_of(args[1])));
    check_string_size(static_cast<uint64_t>(out.size()) + (first ? 0 : sep.size()) + x.size());
    if (!first) out += sep;
    first = false;
    out += x;
  }
  return Value::string(std::move(out));
}

// select / reject / selectattr / rejectattr share this: keep items whose (attribute's) test result
// equals `keep`.
Value select_items(const Value& v, CallArgs& a, bool with_attr, bool keep, const char* name) {
  size_t first_test_arg = with_attr ? 1 : 0;
  if (with_attr && a.positional.empty()) throw TypeError(std::string(name) + ": missing attribute name");
  if (!a.keyword.empty()) throw TypeError(std::string(name) + ": keyword arguments are not supported");
  TestFn test = nullptr;
  CallArgs test_args;
  if (a.positional.size() > first_test_arg) {
    std::string test_name = text_of(a.positional[first_test_arg]);
    test = find_test(test_name);
    if (!test) throw TypeError(std::string(name) + ": unknown test '" + excerpt(test_name) + "'");
    test_args.positional.assign(a.positional.begin() + first_test_arg + 1, a.positional.end());
  }
  ValueList out;
  for (const Value& item : iterate(v)) {
    Value subject = with_attr ? attr_path(item, text_of(a.positional[0])) : item;
    CallArgs copy = test_args;
    bool r = test ? test(subject, copy) : truthy(subject);
    if (r == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value map_items(const Value& v, CallArgs& a) {
  ValueList out;
  const Value* attribute = nullptr;
  const Value* dflt = nullptr;
  for (const auto& [k, x] : a.keyword) {
    if (k == "attribute") attribute = &x;
    else if (k == "default") dflt = &x;
    else if (!a.positional.empty()) continue;  // keyword args of the mapped filter
    else throw TypeError("map: unexpected keyword argument '" + excerpt(k) + "'");
  }
  if (attribute) {
    for (const Value& item : iterate(v)) {
      Value x = attr_path(item, text_of(*attribute));
      out.push_back(x.is_undefined() && dflt ? *dflt : x);
    }
    return Value::list(std::move(out));
  }
  if (a.positional.empty()) throw TypeError("map: needs a filter name or attribute=");
  std::string name = text_of(a.positional[0]);
  FilterFn f = find_filter(name);
  if (!f) throw TypeError("map: unknown filter '" + name + "'");
  for (const Value& item : iterate(v)) {
    CallArgs rest;
    rest.positional.assign(a.positional.begin() + 1, a.positional.end());
    rest.keyword = a.keyword;
    out.push_back(f(item, rest));
  }
  return Value::list(std::move(out));
}

// Sort key for sort/unique/min/max: optional attribute, strings lower-cased unless case_sensitive.
Value sort_key(const Value& item, const Value& attribute, bool case_sensitive) {
  Value k = attribute.is_undefined() || attribute.is_none() ? item : attr_path(item, text_of(attribute));
  if (!case_sensitive && k.is_string()) return Value::string(py_lower(k.as_string()));
  return k;
}

Value sort_items(const Value& v, CallArgs& a) {
  auto args = bind_args(a, {"reverse", "case_sensitive", "attribute"}, "sort");
  ValueList items = iterate(v);
  bool reverse = arg_true(args[0]), cs = arg_true(args[1]);
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    int c = compare(sort_key(x, args[2], cs), sort_key(y, args[2], cs));
    return reverse ? c > 0 : c < 0;
  });
  return Value::list(std::move(items));
}

Value unique_items(const Value& v, CallArgs& a) {
  auto args = bind_args(a, {"case_sensitive", "attribute"}, "unique");
  ValueList out, seen;
  for (const Value& item : iterate(v)) {
    Value k = sort_key(item, args[1], arg_true(args[0]));
    charge_work(seen.size() * kWorkPerItem);  // quadratic: compares with every kept item
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) continue;
    seen.push_back(k);
    out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value extreme(const Value& v, CallArgs& a, bool want_max, const char* name) {
  auto args = bind_args(a, {"case_sensitive", "attribute"}, name);
  ValueList items = iterate(v);
  if (items.empty()) return Value::undefined(std::string("No aggregated item, sequence was empty."));
  const Value* best = &items[0];
  for (const Value& x : items) {
    int c = compare(sort_key(x, args[1], arg_true(args[0])), sort_key(*best, args[1], arg_true(args[0])));
    if (want_max ? c > 0 : c < 0) best = &x;
  }
  return *best;
}

Value sum_items(const Value& v, CallArgs& a) {
  auto args = bind_args(a, {"attribute", "start"}, "sum");
  Value total = args[1].is_undefined() ? Value::integer(0) : args[1];
  for (const Value& item : iterate(v)) {
    Value x = args[0].is_undefined() ? item : attr_path(item, text_of(args[0]));
    if (!x.is_number() || !total.is_number()) throw TypeError("sum: unsupported operand " + type_name(x));
    bool is_float = x.kind() == K::kFloat || total.kind() == K::kFloat;
    total = is_float ? Value::number(total.as_float() + x.as_float())
                     : Value::integer(checked_add(total.as_int(), x.as_int(), "sum"));
  }
  return total;
}

Value indent(const Value& v, CallArgs& a) {
  auto args = bind_args(a, {"width", "first", "blank"}, "indent");
  std::string pad;
  if (args[0].is_string()) {
    pad = args[0].as_string();
  } else {
    int64_t width = args[0].is_undefined() ? 4 : std::max<int64_t>(0, args[0].as_int());  // " " * -1 == ""
    check_string_size(static_cast<uint64_t>(width));
    pad.assign(static_cast<size_t>(width), ' ');
  }
  const bool blank = arg_true(args[2]);
  const std::string s = text_of(v) + "\n";
  // Lines end at \n, \r or \r\n; every line but the first gets the pad (empty ones only with blank).
  std::string out = arg_true(args[1]) ? pad : "";
  size_t b = 0;
  bool first_line = true;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\n' && s[i] != '\r') continue;
    std::string_view line = std::string_view(s).substr(b, i - b);
    check_string_size(static_cast<uint64_t>(out.size()) + 1 + pad.size() + line.size());
    if (!first_line) {
      out += '\n';
      if (blank || !line.empty()) out += pad;
    }
    out += line;
    first_line = false;
    if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
    b = i + 1;
  }
  return Value::string(std::move(out));
}

Value string_filter(const Value& v, CallArgs& a, const char* name, std::string (*fn)(std::string_view)) {
  bind_args(a, {}, name);
  return Value::string(fn(text_of(v)));
}

const std::map<std::string, FilterFn>& filters() {
  static const std::map<std::string, FilterFn> kFilters = {
      {"trim", [](const Value& v, CallArgs& a) {
         auto args = bind_args(a, {"chars"}, "trim");
         std::optional<std::string> chars;
         if (args[0].is_string()) chars = args[0].as_string();
         return Value::string(py_strip(text_of(v), chars, true, true));
       }},
      {"tojson", tojson},
      {"length", [](const Value& v, CallArgs& a) { bind_args(a, {}, "length"); return length(v); }},
      {"count", [](const Value& v, CallArgs& a) { bind_args(a, {}, "count"); return length(v); }},
      {"upper", [](const Value& v, CallArgs& a) { return string_filter(v, a, "upper", py_upper); }},
      {"lower", [](const Value& v, CallArgs& a) { return string_filter(v, a, "lower", py_lower); }},
      {"capitalize", [](const Value& v, CallArgs& a) { return string_filter(v, a, "capitalize", py_capitalize); }},
      {"title", [](const Value& v, CallArgs& a) { return string_filter(v, a, "title", jinja_title); }},
      {"default", [](const Value& v, CallArgs& a) {
         auto args = bind_args(a, {"default_value", "boolean"}, "default");
         bool use_default = v.is_undefined() || (arg_true(args[1]) && !truthy(v));
         if (!use_default) return v;
         return args[0].is_undefined() ? Value::string("") : args[0];
       }},
      {"join", join},
      {"replace", [](const Value& v, CallArgs& a) {
         auto args = bind_args(a, {"old", "new", "count"}, "replace");
         int64_t count = args[2].is_undefined() || args[2].is_none() ? -1 : args[2].as_int();
         return Value::string(py_replace(text_of(v), text_of(args[0]), text_of(args[1]), count));
       }},
      {"first", [](const Value& v, CallArgs& a) {
         bind_args(a, {}, "first");
         ValueList items = iterate(v);
         return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
       }},
      {"last", [](const Value& v, CallArgs& a) {
         bind_args(a, {}, "last");
         if (v.is_dict()) throw TypeError("'dict' object is not reversible");
         ValueList items = iterate(v);
         return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
       }},
      {"list", [](const Value& v, CallArgs& a) { bind_args(a, {}, "list"); return Value::list(iterate(v)); }},
      {"string", [](const Value& v, CallArgs& a) { bind_args(a, {}, "string"); return Value::string(text_of(v)); }},
      {"safe", [](const Value& v, CallArgs& a) { bind_args(a, {}, "safe"); return v; }},
      {"int", to_int},
      {"float", to_float},
      {"abs", [](const Value& v, CallArgs& a) {
         bind_args(a, {}, "abs");
         if (v.kind() == K::kFloat) return Value::number(std::fabs(v.as_float()));
         if (!v.is_number()) throw TypeError("bad operand type for abs(): '" + type_name(v) + "'");
         return Value::integer(v.as_int() < 0 ? checked_neg(v.as_int(), "abs()") : v.as_int());
       }},
      {"items", [](const Value& v, CallArgs& a) {
         bind_args(a, {}, "items");
         if (v.is_undefined()) return Value::list({});
         if (!v.is_dict()) throw TypeError("items: expected a mapping, got " + type_name(v));
         ValueList out;
         for (const auto& [k, x] : v.as_dict().entries) out.push_back(Value::tuple({Value::string(k), x}));
         return Value::list(std::move(out));
       }},
      {"selectattr", [](const Value& v, CallArgs& a) { return select_items(v, a, true, true, "selectattr"); }},
      {"rejectattr", [](const Value& v, CallArgs& a) { return select_items(v, a, true, false, "rejectattr"); }},
      {"select", [](const Value& v, CallArgs& a) { return select_items(v, a, false, true, "select"); }},
      {"reject", [](const Value& v, CallArgs& a) { return select_items(v, a, false, false, "reject"); }},
      {"map", map_items},
      {"reverse", [](const Value& v, CallArgs& a) {
         bind_args(a, {}, "reverse");
         if (v.is_string()) {
           std::u32string u = utf8_decode(v.as_string());
           std::reverse(u.begin(), u.end());
           return Value::string(utf8_encode(u));
         }
         ValueList items = iterate(v);
         std::reverse(items.begin(), items.end());
         return Value::list(std::move(items));
       }},
      {"sort", sort_items},
      {"unique", unique_items},
      {"min", [](const Value& v, CallArgs& a) { return extreme(v, a, false, "min"); }},
      {"max", [](const Value& v, CallArgs& a) { return extreme(v, a, true, "max"); }},
      {"sum", sum_items},
      {"indent", indent},
      {"attr", [](const Value& v, CallArgs& a) { return get_attr(v, text_of(bind_args(a, {"name"}, "attr")[0])); }},
  };
  return kFilters;
}

}  // namespace

FilterFn find_filter(const std::string& name) {
  if (name == "d") return find_filter("default");
  auto it = filters().find(name);
  return it == filters().end() ? nullptr : it->second;
}

}  // namespace minivllm::jinja
