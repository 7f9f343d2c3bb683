// Value construction, truthiness, str/repr, equality, ordering and JSON conversion with Python's
// rules (see value.h).
#include "template/value.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"
#include "template/limits.h"
#include "template/py_string.h"

namespace minivllm::jinja {

namespace {

uint16_t nested_depth(int deepest_item) {
  int depth = deepest_item + 1;
  if (depth > kMaxValueDepth)
    throw TypeError("value nested too deeply: over " + std::to_string(kMaxValueDepth) + " levels (kMaxValueDepth)");
  return static_cast<uint16_t>(depth);
}

int deepest(const ValueList& items) {
  int d = 0;
  for (const Value& v : items) d = std::max(d, v.depth());
  return d;
}

int deepest(const ValueDict& dict) {
  int d = 0;
  for (const auto& [k, v] : dict.entries) d = std::max(d, v.depth());
  return d;
}

}  // namespace

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
  check_string_size(s.size());
  charge_work(s.size());
  Value v;
  v.kind_ = Kind::kString;
  v.data_ = std::make_shared<const std::string>(std::move(s));
  return v;
}
Value Value::list(ValueList items) {
  check_list_size(items.size());
  charge_work(items.size() * kWorkPerNewItem);
  Value v;
  v.kind_ = Kind::kList;
  v.depth_ = nested_depth(deepest(items));
  v.data_ = std::make_shared<ValueList>(std::move(items));
  return v;
}
Value Value::tuple(ValueList items) {
  Value v = list(std::move(items));
  v.tuple_ = true;
  return v;
}
Value Value::dict(ValueDict d) {
  check_list_size(d.entries.size());
  charge_work(d.entries.size() * kWorkPerNewItem);
  Value v;
  v.kind_ = Kind::kDict;
  v.depth_ = nested_depth(deepest(d));
  v.data_ = std::make_shared<ValueDict>(std::move(d));
  return v;
}
Value Value::make_namespace(ValueDict d) {
  check_list_size(d.entries.size());  // not charged: namespace() calls and loop objects are small
  Value v;
  v.kind_ = Kind::kNamespace;
  // Attributes assigned later are at most kMaxNamespaceAttrDepth deep (check_namespace_attr), so
  // this stays an upper bound of the namespace's nesting.
  v.depth_ = nested_depth(std::max(deepest(d), kMaxNamespaceAttrDepth));
  v.data_ = std::make_shared<ValueDict>(std::move(d));
  return v;
}
Value Value::callable(std::string name, NativeFn fn, int captured_depth) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.depth_ = nested_depth(captured_depth);
  v.data_ = std::make_shared<Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

void Value::wrong_kind(const char* wanted) const {
  throw TypeError(std::string("expected ") + wanted + ", got " + type_name(*this));
}

int64_t Value::as_int() const {
  if (kind_ == Kind::kBool) return std::get<bool>(data_) ? 1 : 0;
  if (kind_ != Kind::kInt) wrong_kind("an integer");
  return std::get<int64_t>(data_);
}

double Value::as_float() const {
  if (kind_ == Kind::kFloat) return std::get<double>(data_);
  if (kind_ != Kind::kInt && kind_ != Kind::kBool) wrong_kind("a number");
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

void check_namespace_attr(const std::string& attr, const Value& v) {
  if (v.depth() <= kMaxNamespaceAttrDepth) return;
  throw TypeError("cannot assign namespace attribute '" + excerpt(attr) +
                  "': a namespace attribute may hold values nested at most " +
                  std::to_string(kMaxNamespaceAttrDepth) + " deep and no namespace (kMaxNamespaceAttrDepth)");
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

namespace {

// Appends repr(v) to `out`. Past `max` bytes it stops (truncate: an excerpt for an error message)
// or throws naming the string length limit.
class ReprWriter {
 public:
  ReprWriter(std::string& out, size_t max, bool truncate) : out_(out), max_(max), truncate_(truncate) {}

  void write(const Value& v) {
    if (full()) return;
    switch (v.kind()) {
      case Value::Kind::kUndefined: out_ += "Undefined"; break;
      case Value::Kind::kString: write_string(v.as_string()); break;
      case Value::Kind::kList: {
        const ValueList& items = v.as_list();
        out_ += v.is_tuple() ? "(" : "[";
        for (size_t i = 0; i < items.size() && !full(); ++i) {
          if (i) out_ += ", ";
          write(items[i]);
        }
        if (v.is_tuple() && items.size() == 1) out_ += ",";
        out_ += v.is_tuple() ? ")" : "]";
        break;
      }
      case Value::Kind::kDict: write_dict(v.as_dict()); break;
      case Value::Kind::kNamespace:
        out_ += "<Namespace ";
        write_dict(v.as_dict());
        out_ += ">";
        break;
      default: out_ += to_str(v);
    }
    full();
  }

 private:
  // True when past `max_` (only in truncate mode: otherwise that throws).
  bool full() {
    if (out_.size() <= max_) return false;
    if (!truncate_) check_string_size(out_.size());
    return true;
  }

  void write_string(const std::string& s) {
    // An excerpt needs only the start of a long string.
    out_ += py_repr_string(truncate_ && s.size() > max_ ? std::string_view(s).substr(0, max_ + 1) : s);
  }

  void write_dict(const ValueDict& d) {
    out_ += "{";
    for (size_t i = 0; i < d.entries.size() && !full(); ++i) {
      if (i) out_ += ", ";
      write_string(d.entries[i].first);
      out_ += ": ";
      write(d.entries[i].second);
    }
    out_ += "}";
  }

  std::string& out_;
  size_t max_;
  bool truncate_;
};

}  // namespace

std::string repr(const Value& v) {
  std::string out;
  ReprWriter(out, active_limits().max_string_bytes, false).write(v);
  return out;
}

std::string repr_excerpt(const Value& v, size_t max) {
  std::string out;
  ReprWriter(out, max, true).write(v);
  return excerpt(out, max);
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
    case Value::Kind::kString:
      charge_work(std::min(a.as_string().size(), b.as_string().size()));
      return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      const ValueList &x = a.as_list(), &y = b.as_list();
      if (x.size() != y.size()) return false;
      charge_work(x.size() * kWorkPerItem);
      for (size_t i = 0; i < x.size(); ++i)
        if (!equals(x[i], y[i])) return false;
      return true;
    }
    case Value::Kind::kDict: {
      const ValueDict &x = a.as_dict(), &y = b.as_dict();
      if (x.entries.size() != y.entries.size()) return false;
      charge_work(x.entries.size() * x.entries.size() * kWorkPerItem);  // a linear find per key
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
    charge_work(std::min(a.as_string().size(), b.as_string().size()));
    int c = a.as_string().compare(b.as_string());  // UTF-8 byte order is code point order
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list()) {
    const ValueList &x = a.as_list(), &y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      charge_work(kWorkPerItem);
      if (equals(x[i], y[i])) continue;
      return compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  throw TypeError("'<' not supported between instances of '" + type_name(a) + "' and '" +
                  type_name(b) + "'");
}

namespace {

// json.dumps into `out`, which may not grow past the string length limit.
class JsonWriter {
 public:
  JsonWriter(std::string& out, int indent) : out_(out), indent_(indent), max_(active_limits().max_string_bytes) {}

  void write(const Value& v, int depth) {
    const char* item_sep = indent_ < 0 ? ", " : ",";
    switch (v.kind()) {
      case Value::Kind::kNone: out_ += "null"; break;
      case Value::Kind::kBool: out_ += v.as_bool() ? "true" : "false"; break;
      case Value::Kind::kInt: out_ += std::to_string(v.as_int()); break;
      case Value::Kind::kFloat: {
        double d = v.as_float();
        out_ += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : py_float_repr(d);
        break;
      }
      case Value::Kind::kString: out_ += json_quote(v.as_string()); break;
      case Value::Kind::kList: {
        const ValueList& items = v.as_list();
        if (items.empty()) {
          out_ += "[]";
          break;
        }
        out_.push_back('[');
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out_ += item_sep;
          newline(depth + 1);
          write(items[i], depth + 1);
        }
        newline(depth);
        out_.push_back(']');
        break;
      }
      case Value::Kind::kDict: {
        const ValueDict& d = v.as_dict();
        if (d.entries.empty()) {
          out_ += "{}";
          break;
        }
        out_.push_back('{');
        for (size_t i = 0; i < d.entries.size(); ++i) {
          if (i) out_ += item_sep;
          newline(depth + 1);
          out_ += json_quote(d.entries[i].first);
          out_ += ": ";
          write(d.entries[i].second, depth + 1);
        }
        newline(depth);
        out_.push_back('}');
        break;
      }
      default:
        throw TypeError("Object of type " + type_name(v) + " is not JSON serializable");
    }
    if (out_.size() > max_) check_string_size(out_.size());
  }

 private:
  void newline(int depth) {
    if (indent_ < 0) return;
    uint64_t pad = static_cast<uint64_t>(indent_) * static_cast<uint64_t>(depth);
    if (out_.size() + 1 + pad > max_) check_string_size(out_.size() + 1 + pad);
    out_.push_back('\n');
    out_.append(pad, ' ');
  }

  std::string& out_;
  int indent_;
  size_t max_;
};

// JSON variables -> values, refusing what would break the limits (limits.h).
template <typename Json>
Value convert_json(const Json& j, int depth) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value::boolean(j.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value::integer(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      uint64_t u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX))
        throw TypeError("integer " + std::to_string(u) + " does not fit in 64 bits");
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float: return Value::number(j.template get<double>());
    case nlohmann::json::value_t::string: {
      const auto& s = j.template get_ref<const std::string&>();
      check_string_size(s.size());
      return Value::string(s);
    }
    case nlohmann::json::value_t::array:
    case nlohmann::json::value_t::object: {
      if (depth >= kMaxJsonDepth)
        throw TypeError("nested deeper than " + std::to_string(kMaxJsonDepth) + " levels (kMaxJsonDepth)");
      check_list_size(j.size());
      if (j.is_array()) {
        ValueList items;
        items.reserve(j.size());
        for (const auto& e : j) items.push_back(convert_json(e, depth + 1));
        return Value::list(std::move(items));
      }
      ValueDict d;
      d.entries.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) d.entries.emplace_back(it.key(), convert_json(it.value(), depth + 1));
      return Value::dict(std::move(d));
    }
    default: throw TypeError("unsupported JSON value (binary or discarded)");
  }
}

template <typename Json>
Value convert_variable(const Json& j, std::string_view name) {
  try {
    return convert_json(j, 0);
  } catch (const TypeError& e) {
    MINIVLLM_FAIL() << "chat template variable '" << excerpt(name) << "': " << e.what();
  }
  return Value();
}

}  // namespace

std::string to_json_text(const Value& v, int indent) {
  std::string out;
  JsonWriter(out, indent).write(v, 0);
  return out;
}

Value from_json(const nlohmann::json& j, std::string_view name) { return convert_variable(j, name); }
Value from_json(const nlohmann::ordered_json& j, std::string_view name) { return convert_variable(j, name); }

}  // namespace minivllm::jinja
