// The built-in vocabulary of the chat-template interpreter: filters, tests (`is ...`), attribute
// and item access (including the str/dict methods templates call), iteration and slicing, all with
// the behaviour of jinja2 in Hugging Face's sandboxed environment.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "template/value.h"

namespace minivllm::jinja {

using FilterFn = Value (*)(const Value& input, CallArgs& args);
using TestFn = bool (*)(const Value& input, CallArgs& args);

// nullptr when unknown.
FilterFn find_filter(const std::string& name);
TestFn find_test(const std::string& name);

// `obj.name` (attribute first, then item) and `obj[key]` (item first, then attribute). Missing
// yields undefined with a hint; access on undefined throws TypeError.
Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
// Python slicing of a str (by code point) or list.
Value slice_value(const Value& obj, const std::optional<int64_t>& start, const std::optional<int64_t>& stop,
                  const std::optional<int64_t>& step);
// The items of a for loop: list items, dict keys, str characters; undefined is empty.
ValueList iterate(const Value& v);
// `needle in container`.
bool contains(const Value& container, const Value& needle);
[[noreturn]] void throw_undefined(const Value& undefined);

// Binds positional and keyword arguments to `names` in order; missing ones are undefined.
std::vector<Value> bind_args(const CallArgs& args, std::initializer_list<const char*> names,
                             const std::string& function);

}  // namespace minivllm::jinja
