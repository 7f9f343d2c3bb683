// Attribute and item access, the str/dict methods templates call, iteration, slicing and `in`
// (see builtins.h). HF renders in an ImmutableSandboxedEnvironment, so mutating methods
// (list.append, dict.update...) do not exist here either.
#include "template/builtins.h"

#include <algorithm>
#include <functional>
#include <map>

#include "template/limits.h"
#include "template/py_string.h"

namespace minivllm::jinja {
namespace {

std::optional<std::string> opt_string(const Value& v, const char* what) {
  if (v.is_undefined() || v.is_none()) return std::nullopt;
  if (!v.is_string()) throw TypeError(std::string(what) + " arg must be None or str, not " + type_name(v));
  return v.as_string();
}

int64_t opt_int(const Value& v, int64_t dflt) {
  if (v.is_undefined() || v.is_none()) return dflt;
  if (v.kind() != Value::Kind::kInt && v.kind() != Value::Kind::kBool)
    throw TypeError("expected an integer, got " + type_name(v));
  return v.as_int();
}

const std::string& need_string(const Value& v, const std::string& what) {
  if (!v.is_string()) throw TypeError(what + " expects a str argument, got " + type_name(v));
  return v.as_string();
}

// startswith/endswith take a str or a tuple (list) of str.
bool affix_match(const std::string& s, const Value& arg, bool prefix, const char* fn) {
  auto one = [&](const Value& a) {
    const std::string& x = need_string(a, fn);
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (arg.is_list()) return std::any_of(arg.as_list().begin(), arg.as_list().end(), one);
  return one(arg);
}

ValueList strings_to_list(const std::vector<std::string>& parts) {
  ValueList out;
  for (const auto& p : parts) out.push_back(Value::string(p));
  return out;
}

std::string py_title(const std::string& s) {
  std::string out = s;
  bool prev_cased = false;
  for (char& c : out) {
    bool alpha = std::isalpha(static_cast<unsigned char>(c));
    if (alpha) c = static_cast<char>(prev_cased ? std::tolower(c) : std::toupper(c));
    prev_cased = alpha;
  }
  return out;
}

using StrMethod = std::function<Value(const std::string&, const CallArgs&)>;

const std::map<std::string, StrMethod>& string_methods() {
  static const std::map<std::string, StrMethod> kMethods = {
      {"strip", [](const std::string& s, const CallArgs& a) {
         auto v = bind_args(a, {"chars"}, "str.strip");
         return Value::string(py_strip(s, opt_string(v[0], "strip"), true, true));
       }},
      {"lstrip", [](const std::string& s, const CallArgs& a) {
         auto v = bind_args(a, {"chars"}, "str.lstrip");
         return Value::string(py_strip(s, opt_string(v[0], "lstrip"), true, false));
       }},
      {"rstrip", [](const std::string& s, const CallArgs& a) {
         auto v = bind_args(a, {"chars"}, "str.rstrip");
         return Value::string(py_strip(s, opt_string(v[0], "rstrip"), false, true));
       }},
      {"split", [](const std::string& s, const CallArgs& a) {
         auto v = bind_args(a, {"sep", "maxsplit"}, "str.split");
         auto sep = opt_string(v[0], "split");
         if (sep && sep->empty()) throw TypeError("str.split: empty separator");
         return Value::list(strings_to_list(py_split(s, sep, opt_int(v[1], -1))));
       }},
      {"rsplit", [](const std::string& s, const CallArgs& a) {
         auto v = bind_args(a, {"sep", "maxsplit"}, "str.rsplit");
         auto sep = opt_string(v[0], "rsplit");
         int64_t maxsplit = opt_int(v[1], -1);
         if (maxsplit < 0) return Value::list(strings_to_list(py_split(s, sep, -1)));
         if (!sep || sep->empty()) throw TypeError("str.rsplit with maxsplit needs a non-empty separator");
         std::vector<std::string> parts;
         size_t end = s.size();
         while (static_cast<int64_t>(parts.size()) < maxsplit) {
           check_list_size(parts.size() + 1);
           size_t hit = end >= sep->size() ? s.rfind(*sep, end - sep->size()) : std::string::npos;
           if (hit == std::string::npos) break;
           parts.push_back(s.substr(hit + sep->size(), end - hit - sep->size()));
           end = hit;
         }
         parts.push_back(s.substr(0, end));
         std::reverse(parts.begin(), parts.end());
         return Value::list(strings_to_list(parts));
       }},
      {"splitlines", [](const std::string& s, const CallArgs& a) {
         bind_args(a, {}, "str.splitlines");
         std::vector<std::string> parts;
         size_t b = 0;
         for (size_t i = 0; i < s.size(); ++i) {
           if (s[i] != '\n' && s[i] != '\r') continue;
           check_list_size(parts.size() + 1);
           parts.push_back(s.substr(b, i - b));
           if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
           b = i + 1;
         }
         if (b < s.size()) parts.push_back(s.substr(b));
         return Value::list(strings_to_list(parts));
       }},
      {"startswith", [](const std::string& s, const CallArgs& a) {
         auto v = bind_args(a, {"prefix"}, "str.startswith");
         return Value::boolean(affix_match(s, v[0], true, "str.startswith"));
       }},
      {"endswith", [](const std::string& s, const CallArgs& a) {
         auto v = bind_args(a, {"suffix"}, "str.endswith");
         return Value::boolean(affix_match(s, v[0], false, "str.endswith"));
       }},
      {"replace", [](const std::string& s, const CallArgs& a) {
         auto v = bind_args(a, {"old", "new", "count"}, "str.replace");
         return Value::string(py_replace(s, need_string(v[0], "str.replace"), need_string(v[1], "str.replace"),
                                         opt_int(v[2], -1)));
       }},
      {"upper", [](const std::string& s, const CallArgs& a) {
         bind_args(a, {}, "str.upper");
         return Value::string(py_upper(s));
       }},
      {"lower", [](const std::string& s, const CallArgs& a) {
         bind_args(a, {}, "str.lower");
         return Value::string(py_lower(s));
       }},
      {"capitalize", [](const std::string& s, const CallArgs& a) {
         bind_args(a, {}, "str.capitalize");
         return Value::string(py_capitalize(s));
       }},
      {"title", [](const std::string& s, const CallArgs& a) {
         bind_args(a, {}, "str.title");
         return Value::string(py_title(s));
       }},
      {"find", [](const std::string& s, const CallArgs& a) {
         auto v = bind_args(a, {"sub"}, "str.find");
         size_t hit = s.find(need_string(v[0], "str.find"));
         return Value::integer(hit == std::string::npos ? -1 : utf8_length(std::string_view(s).substr(0, hit)));
       }},
      {"count", [](const std::string& s, const CallArgs& a) {
         auto v = bind_args(a, {"sub"}, "str.count");
         const std::string& sub = need_string(v[0], "str.count");
         if (sub.empty()) return Value::integer(utf8_length(s) + 1);
         int64_t n = 0;
         for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
         return Value::integer(n);
       }},
      {"join", [](const std::string& s, const CallArgs& a) {
         auto v = bind_args(a, {"iterable"}, "str.join");
         std::string out;
         bool first = true;
         for (const Value& item : iterate(v[0])) {
           const std::string& x = need_string(item, "str.join");
           check_string_size(static_cast<uint64_t>(out.size()) + (first ? 0 : s.size()) + x.size());
           if (!first) out += s;
           first = false;
           out += x;
         }
         return Value::string(std::move(out));
       }},
      {"removeprefix", [](const std::string& s, const CallArgs& a) {
         auto v = bind_args(a, {"prefix"}, "str.removeprefix");
         const std::string& p = need_string(v[0], "str.removeprefix");
         return Value::string(s.compare(0, p.size(), p) == 0 && p.size() <= s.size() ? s.substr(p.size()) : s);
       }},
      {"removesuffix", [](const std::string& s, const CallArgs& a) {
         auto v = bind_args(a, {"suffix"}, "str.removesuffix");
         const std::string& p = need_string(v[0], "str.removesuffix");
         bool hit = !p.empty() && p.size() <= s.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
         return Value::string(hit ? s.substr(0, s.size() - p.size()) : s);
       }},
      {"isdigit", [](const std::string& s, const CallArgs& a) {
         bind_args(a, {}, "str.isdigit");
         return Value::boolean(!s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }));
       }},
  };
  return kMethods;
}

Value dict_method(const Value& obj, const std::string& name) {
  if (name == "items" || name == "keys" || name == "values") {
    return Value::callable(
        "dict." + name, [obj, name](CallArgs& a) {
      bind_args(a, {}, "dict." + name);
      ValueList out;
      for (const auto& [k, v] : obj.as_dict().entries) {
        if (name == "items") out.push_back(Value::tuple({Value::string(k), v}));
        if (name == "keys") out.push_back(Value::string(k));
        if (name == "values") out.push_back(v);
      }
      return Value::list(std::move(out));
        },
        obj.depth());
  }
  if (name == "get") {
    return Value::callable(
        "dict.get",
        [obj](CallArgs& a) {
          auto v = bind_args(a, {"key", "default"}, "dict.get");
          const Value* hit = v[0].is_string() ? obj.as_dict().find(v[0].as_string()) : nullptr;
          if (hit) return *hit;
          return v[1].is_undefined() ? Value::none() : v[1];
        },
        obj.depth());
  }
  return Value();
}

Value string_method(const Value& obj, const std::string& name) {
  auto it = string_methods().find(name);
  if (it == string_methods().end()) return Value();
  StrMethod fn = it->second;
  return Value::callable("str." + name, [obj, fn](CallArgs& a) {
    charge_work(obj.as_string().size());  // most methods scan the string
    return fn(obj.as_string(), a);
  });
}

Value no_attribute(const Value& obj, const std::string& name) {
  std::string hint = "'";  // built by appends: GCC 12 misreports -Wrestrict on "'" + std::string&&
  hint += type_name(obj);
  hint += " object' has no attribute '";
  hint += excerpt(name);
  hint += "'";
  return Value::undefined(hint);
}

// Python index normalisation; nullopt when out of range.
std::optional<size_t> normalize_index(int64_t i, size_t n) {
  if (i < 0) i += static_cast<int64_t>(n);
  if (i < 0 || i >= static_cast<int64_t>(n)) return std::nullopt;
  return static_cast<size_t>(i);
}

}  // namespace

void throw_undefined(const Value& undefined) {
  throw TypeError(undefined.undefined_hint().empty() ? std::string("value is undefined") : undefined.undefined_hint());
}

std::vector<Value> bind_args(const CallArgs& args, std::initializer_list<const char*> names,
                             const std::string& function) {
  std::vector<Value> out(names.size());
  if (args.positional.size() > names.size())
    throw TypeError(function + "() takes at most " + std::to_string(names.size()) + " arguments (" +
                    std::to_string(args.positional.size()) + " given)");
  for (size_t i = 0; i < args.positional.size(); ++i) out[i] = args.positional[i];
  for (const auto& [key, value] : args.keyword) {
    auto it = std::find_if(names.begin(), names.end(), [&](const char* n) { return key == n; });
    if (it == names.end())
      throw TypeError(function + "() got an unexpected keyword argument '" + excerpt(key) + "'");
    size_t idx = static_cast<size_t>(it - names.begin());
    if (idx < args.positional.size()) throw TypeError(function + "() got multiple values for '" + excerpt(key) + "'");
    out[idx] = value;
  }
  return out;
}

Value get_attr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined: throw_undefined(obj);
    case Value::Kind::kDict: {
      Value m = dict_method(obj, name);
      if (!m.is_undefined()) return m;
      const Value* hit = obj.as_dict().find(name);
      return hit ? *hit : Value::undefined("'dict object' has no attribute '" + excerpt(name) + "'");
    }
    case Value::Kind::kNamespace: {
      const Value* hit = obj.as_dict().find(name);
      return hit ? *hit : no_attribute(obj, name);
    }
    case Value::Kind::kString: {
      Value m = string_method(obj, name);
      return m.is_undefined() ? no_attribute(obj, name) : m;
    }
    default: return no_attribute(obj, name);
  }
}

Value get_item(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined: throw_undefined(obj);
    case Value::Kind::kDict:
    case Value::Kind::kNamespace:
      if (key.is_string()) {
        const Value* hit = obj.as_dict().find(key.as_string());
        if (hit) return *hit;
        if (obj.is_dict()) {
          Value m = dict_method(obj, key.as_string());
          if (!m.is_undefined()) return m;
        }
        return Value::undefined("'dict object' has no attribute '" + excerpt(key.as_string()) + "'");
      }
      return Value::undefined("'dict object' has no item " + repr_excerpt(key));
    case Value::Kind::kList:
      if (key.kind() == Value::Kind::kInt || key.kind() == Value::Kind::kBool) {
        auto i = normalize_index(key.as_int(), obj.as_list().size());
        return i ? obj.as_list()[*i] : Value::undefined("list index " + std::to_string(key.as_int()) + " out of range");
      }
      break;
    case Value::Kind::kString:
      if (key.kind() == Value::Kind::kInt || key.kind() == Value::Kind::kBool) {
        std::u32string u = utf8_decode(obj.as_string());
        auto i = normalize_index(key.as_int(), u.size());
        return i ? Value::string(utf8_encode(u.substr(*i, 1)))
                 : Value::undefined("string index " + std::to_string(key.as_int()) + " out of range");
      }
      break;
    default: break;
  }
  if (key.is_string()) return get_attr(obj, key.as_string());
  return Value::undefined("'" + type_name(obj) + " object' has no item " + repr_excerpt(key));
}

Value slice_value(const Value& obj, const std::optional<int64_t>& start, const std::optional<int64_t>& stop,
                  const std::optional<int64_t>& step_opt) {
  if (obj.is_undefined()) throw_undefined(obj);
  if (!obj.is_list() && !obj.is_string()) throw TypeError("'" + type_name(obj) + "' object is not subscriptable");
  int64_t step = step_opt.value_or(1);
  if (step == 0) throw TypeError("slice step cannot be zero");
  std::u32string chars = obj.is_string() ? utf8_decode(obj.as_string()) : std::u32string();
  int64_t n = obj.is_string() ? static_cast<int64_t>(chars.size()) : static_cast<int64_t>(obj.as_list().size());
  // CPython's PySlice_AdjustIndices.
  auto adjust = [&](const std::optional<int64_t>& v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= n) {
      x = step < 0 ? n - 1 : n;
    }
    return x;
  };
  int64_t b = adjust(start, step < 0 ? n - 1 : 0);
  int64_t e = adjust(stop, step < 0 ? -1 : n);
  // Visits b, b + step, ... while short of e; b and e lie in [-1, n], so only the step can
  // overflow, and an overflowing step is past e.
  auto next = [&](int64_t i, int64_t* out) { return !__builtin_add_overflow(i, step, out); };
  if (obj.is_string()) {
    std::u32string out;
    for (int64_t i = b; step > 0 ? i < e : i > e;) {
      out.push_back(chars[static_cast<size_t>(i)]);
      if (!next(i, &i)) break;
    }
    return Value::string(utf8_encode(out));
  }
  ValueList out;
  const ValueList& items = obj.as_list();
  for (int64_t i = b; step > 0 ? i < e : i > e;) {
    out.push_back(items[static_cast<size_t>(i)]);
    if (!next(i, &i)) break;
  }
  return Value::list(std::move(out));
}

ValueList iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return {};
    case Value::Kind::kList:
      charge_work(v.as_list().size() * kWorkPerItem);
      return v.as_list();
    case Value::Kind::kDict: {
      ValueList keys;
      keys.reserve(v.as_dict().entries.size());
      for (const auto& [k, x] : v.as_dict().entries) keys.push_back(Value::string(k));
      return keys;
    }
    case Value::Kind::kString: {
      check_list_size(static_cast<uint64_t>(utf8_length(v.as_string())));
      ValueList chars;
      for (char32_t c : utf8_decode(v.as_string())) chars.push_back(Value::string(utf8_encode(std::u32string(1, c))));
      return chars;
    }
    default: throw TypeError("'" + type_name(v) + "' object is not iterable");
  }
}

bool contains(const Value& container, const Value& needle) {
  switch (container.kind()) {
    case Value::Kind::kUndefined: return false;
    case Value::Kind::kString:
      if (!needle.is_string())
        throw TypeError("'in <string>' requires string as left operand, not " + type_name(needle));
      charge_work(container.as_string().size());
      return container.as_string().find(needle.as_string()) != std::string::npos;
    case Value::Kind::kList:
      charge_work(container.as_list().size() * kWorkPerItem);
      return std::any_of(container.as_list().begin(), container.as_list().end(),
                         [&](const Value& x) { return equals(x, needle); });
    case Value::Kind::kDict:
    case Value::Kind::kNamespace:
      charge_work(container.as_dict().entries.size() * kWorkPerItem);
      return needle.is_string() && container.as_dict().find(needle.as_string());
    default: throw TypeError("argument of type '" + type_name(container) + "' is not iterable");
  }
}

}  // namespace minivllm::jinja
