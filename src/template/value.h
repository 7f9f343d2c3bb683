// The value model of the chat-template interpreter: Jinja/Python semantics (undefined distinct
// from none, int distinct from float, insertion-ordered dicts, namespaces shared by reference,
// callables for globals, methods and macros) over a small tagged union.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace minivllm::jinja {

// A Python TypeError / ValueError inside the interpreter; the renderer turns it into an
// minivllm::Error naming the template line.
class TypeError : public std::runtime_error {
 public:
  explicit TypeError(const std::string& what) : std::runtime_error(what) {}
};

class Value;
struct ValueDict;
using ValueList = std::vector<Value>;

// Positional and keyword arguments of a call, a filter or a test.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};
using NativeFn = std::function<Value(CallArgs&)>;

struct Callable {
  std::string name;
  NativeFn fn;
};

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kCallable };

  Value() = default;  // undefined
  // `hint` names what was looked up ("'foo'", "'dict object' has no attribute 'x'").
  static Value undefined(std::string hint);
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double d);
  static Value string(std::string s);
  static Value list(ValueList items);
  static Value tuple(ValueList items);  // a list that prints as a Python tuple
  static Value dict(ValueDict d);
  static Value make_namespace(ValueDict d);
  // `captured_depth`: the nesting depth of a value the function holds on to (dict.items holds its
  // dict), so that values holding callables stay within kMaxValueDepth too.
  static Value callable(std::string name, NativeFn fn, int captured_depth = 0);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_mapping() const { return kind_ == Kind::kDict || kind_ == Kind::kNamespace; }
  bool is_tuple() const { return tuple_; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }

  // The accessors throw TypeError when the value is of another kind.
  bool as_bool() const {
    if (kind_ != Kind::kBool) wrong_kind("bool");
    return std::get<bool>(data_);
  }
  int64_t as_int() const;   // bool and int
  double as_float() const;  // bool, int and float
  const std::string& as_string() const {
    if (kind_ != Kind::kString) wrong_kind("str");
    return *std::get<std::shared_ptr<const std::string>>(data_);
  }
  const std::string& undefined_hint() const {  // "" when there is none
    if (kind_ != Kind::kUndefined) wrong_kind("undefined");
    static const std::string kNoHint;
    const std::string* hint = std::get_if<std::string>(&data_);
    return hint ? *hint : kNoHint;
  }
  const ValueList& as_list() const {
    if (kind_ != Kind::kList) wrong_kind("list");
    return *std::get<std::shared_ptr<ValueList>>(data_);
  }
  const ValueDict& as_dict() const {
    if (!is_mapping()) wrong_kind("dict");
    return *std::get<std::shared_ptr<ValueDict>>(data_);
  }
  ValueDict& mutable_namespace() const {
    if (kind_ != Kind::kNamespace) wrong_kind("Namespace");
    return *std::get<std::shared_ptr<ValueDict>>(data_);
  }
  const Callable& as_callable() const {
    if (kind_ != Kind::kCallable) wrong_kind("function");
    return *std::get<std::shared_ptr<Callable>>(data_);
  }

  // Nesting depth: 0 for scalars, 1 + the deepest item for lists and dicts (see limits.h; a
  // namespace counts as at least kMaxNamespaceAttrDepth + 1 whatever it holds now).
  int depth() const { return depth_; }

 private:
  [[noreturn]] void wrong_kind(const char* wanted) const;

  Kind kind_ = Kind::kUndefined;
  bool tuple_ = false;
  uint16_t depth_ = 0;
  // Strings are immutable and shared: copying a value never copies its text.
  std::variant<std::monostate, bool, int64_t, double, std::string, std::shared_ptr<const std::string>,
               std::shared_ptr<ValueList>, std::shared_ptr<ValueDict>, std::shared_ptr<Callable>>
      data_;
};

// Insertion-ordered string-keyed dict (chat messages have a handful of keys: linear search wins).
struct ValueDict {
  std::vector<std::pair<std::string, Value>> entries;
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value v);
};

// The checks of {% set ns.attr = v %}: v may be nested at most kMaxNamespaceAttrDepth deep and
// hold no namespace (limits.h says why). Throws TypeError naming the attribute.
void check_namespace_attr(const std::string& attr, const Value& v);

// Python-ish type name for messages: "str", "int", "list", "dict", "undefined"...
std::string type_name(const Value& v);
bool truthy(const Value& v);
std::string to_str(const Value& v);  // str(v); undefined prints as ""
std::string repr(const Value& v);
// repr(v) cut to about `max` bytes (for error messages): stops building once past it.
std::string repr_excerpt(const Value& v, size_t max = 80);
bool equals(const Value& a, const Value& b);
int compare(const Value& a, const Value& b);  // <0, 0, >0; throws TypeError when unordered
// Python json.dumps(v, ensure_ascii=False, indent=indent) (indent < 0: one line).
std::string to_json_text(const Value& v, int indent);

// A JSON variable as a value; `name` (the variable) is for error messages. Throws Error when the
// JSON breaks a limit of limits.h (nesting, string or list length, integers beyond int64).
Value from_json(const nlohmann::json& j, std::string_view name = "value");
Value from_json(const nlohmann::ordered_json& j, std::string_view name = "value");

}  // namespace minivllm::jinja
