// Value construction, truthiness, str/repr, equality, ordering and JSON conversion with Python's
// rules (see value.h).
#include "template/value.h"

#include <cmath>

#include "template/py_string.h"

namespace minivllm::jinja {

Value Value::undefined(std::string hint) {
  Value v;
  v.data_ = std::move(hint);
  return v;
}
Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.data_ = b;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.data_ = i;
  return v;
}
Value Value::number(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.data_ = d;
  return v;
}
Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.data_ = std::move(s);
  return v;
}
Value Value::list(ValueList items) {
  Value v;
  v.kind_ = Kind::kList;
  v.data_ = std::make_shared<ValueList>(std::move(items));
  return v;
}
Value Value::tuple(ValueList items) {
  Value v = list(std::move(items));
  v.tuple_ = true;
  return v;
}
Value Value::dict(ValueDict d) {
  Value v;
  v.kind_ = Kind::kDict;
  v.data_ = std::make_shared<ValueDict>(std::move(d));
  return v;
}
Value Value::make_namespace(ValueDict d) {
  Value v;
  v.kind_ = Kind::kNamespace;
  v.data_ = std::make_shared<ValueDict>(std::move(d));
  return v;
}
Value Value::callable(std::string name, NativeFn fn) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.data_ = std::make_shared<Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

int64_t Value::as_int() const {
  if (kind_ == Kind::kBool) return as_bool() ? 1 : 0;
  return std::get<int64_t>(data_);
}

double Value::as_float() const {
  if (kind_ == Kind::kFloat) return std::get<double>(data_);
  return static_cast<double>(as_int());
}

const Value* ValueDict::find(const std::string& key) const {
  for (const auto& [k, v] : entries)
    if (k == key) return &v;
  return nullptr;
}

void ValueDict::set(const std::string& key, Value v) {
  for (auto& [k, old] : entries) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  entries.emplace_back(key, std::move(v));
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "undefined";
    case Value::Kind::kNone: return "NoneType";
    case Value::Kind::kBool: return "bool";
    case Value::Kind::kInt: return "int";
    case Value::Kind::kFloat: return "float";
    case Value::Kind::kString: return "str";
    case Value::Kind::kList: return "list";
    case Value::Kind::kDict: return "dict";
    case Value::Kind::kNamespace: return "Namespace";
    case Value::Kind::kCallable: return "function";
  }
  return "?";
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return false;
    case Value::Kind::kBool: return v.as_bool();
    case Value::Kind::kInt: return v.as_int() != 0;
    case Value::Kind::kFloat: return v.as_float() != 0.0;
    case Value::Kind::kString: return !v.as_string().empty();
    case Value::Kind::kList: return !v.as_list().empty();
    case Value::Kind::kDict: return !v.as_dict().entries.empty();
    case Value::Kind::kNamespace:
    case Value::Kind::kCallable: return true;
  }
  return false;
}

static std::string repr_dict(const ValueDict& d) {
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : d.entries) {
    if (!first) out += ", ";
    first = false;
    out += py_repr_string(k) + ": " + repr(v);
  }
  return out + "}";
}

std::string repr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "Undefined";
    case Value::Kind::kString: return py_repr_string(v.as_string());
    case Value::Kind::kList: {
      const ValueList& items = v.as_list();
      std::string out = v.is_tuple() ? "(" : "[";
      for (size_t i = 0; i < items.size(); ++i) out.append(i ? ", " : "").append(repr(items[i]));
      if (v.is_tuple() && items.size() == 1) out += ",";
      return out + (v.is_tuple() ? ")" : "]");
    }
    case Value::Kind::kDict: return repr_dict(v.as_dict());
    case Value::Kind::kNamespace: return "<Namespace " + repr_dict(v.as_dict()) + ">";
    default: return to_str(v);
  }
}

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "";
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return v.as_bool() ? "True" : "False";
    case Value::Kind::kInt: return std::to_string(v.as_int());
    case Value::Kind::kFloat: return py_float_repr(v.as_float());
    case Value::Kind::kString: return v.as_string();
    case Value::Kind::kCallable: return "<function " + v.as_callable().name + ">";
    default: return repr(v);
  }
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Value::Kind::kFloat || b.kind() == Value::Kind::kFloat)
      return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      const ValueList &x = a.as_list(), &y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!equals(x[i], y[i])) return false;
      return true;
    }
    case Value::Kind::kDict: {
      const ValueDict &x = a.as_dict(), &y = b.as_dict();
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [k, v] : x.entries) {
        const Value* other = y.find(k);
        if (!other || !equals(v, *other)) return false;
      }
      return true;
    }
    case Value::Kind::kNamespace: return &a.as_dict() == &b.as_dict();
    case Value::Kind::kCallable: return &a.as_callable() == &b.as_callable();
    default: return false;
  }
}

int compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Value::Kind::kFloat || b.kind() == Value::Kind::kFloat) {
      double x = a.as_float(), y = b.as_float();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    int c = a.as_string().compare(b.as_string());  // UTF-8 byte order is code point order
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list()) {
    const ValueList &x = a.as_list(), &y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i])) continue;
      return compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  throw TypeError("'<' not supported between instances of '" + type_name(a) + "' and '" +
                  type_name(b) + "'");
}

static void dump_json(const Value& v, int indent, int depth, std::string& out) {
  auto newline = [&](int d) {
    if (indent < 0) return;
    out.push_back('\n');
    out.append(static_cast<size_t>(indent) * d, ' ');
  };
  const char* item_sep = indent < 0 ? ", " : ",";
  switch (v.kind()) {
    case Value::Kind::kNone: out += "null"; return;
    case Value::Kind::kBool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::kInt: out += std::to_string(v.as_int()); return;
    case Value::Kind::kFloat: {
      double d = v.as_float();
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : py_float_repr(d);
      return;
    }
    case Value::Kind::kString: out += json_quote(v.as_string()); return;
    case Value::Kind::kList: {
      const ValueList& items = v.as_list();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out.push_back('[');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        newline(depth + 1);
        dump_json(items[i], indent, depth + 1, out);
      }
      newline(depth);
      out.push_back(']');
      return;
    }
    case Value::Kind::kDict: {
      const ValueDict& d = v.as_dict();
      if (d.entries.empty()) {
        out += "{}";
        return;
      }
      out.push_back('{');
      for (size_t i = 0; i < d.entries.size(); ++i) {
        if (i) out += item_sep;
        newline(depth + 1);
        out += json_quote(d.entries[i].first) + ": ";
        dump_json(d.entries[i].second, indent, depth + 1, out);
      }
      newline(depth);
      out.push_back('}');
      return;
    }
    default:
      throw TypeError("Object of type " + type_name(v) + " is not JSON serializable");
  }
}

std::string to_json_text(const Value& v, int indent) {
  std::string out;
  dump_json(v, indent, 0, out);
  return out;
}

template <typename Json>
static Value convert_json(const Json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value::boolean(j.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value::integer(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return Value::integer(static_cast<int64_t>(j.template get<uint64_t>()));
    case nlohmann::json::value_t::number_float: return Value::number(j.template get<double>());
    case nlohmann::json::value_t::string: return Value::string(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      ValueList items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(convert_json(e));
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      ValueDict d;
      for (auto it = j.begin(); it != j.end(); ++it) d.entries.emplace_back(it.key(), convert_json(it.value()));
      return Value::dict(std::move(d));
    }
    default: throw TypeError("unsupported JSON value (binary or discarded)");
  }
}

Value from_json(const nlohmann::json& j) { return convert_json(j); }
Value from_json(const nlohmann::ordered_json& j) { return convert_json(j); }

}  // namespace minivllm::jinja
