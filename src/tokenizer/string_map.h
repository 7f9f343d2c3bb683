// unordered_map keyed on std::string that can be searched with a string_view (no allocation per
// lookup): the vocabulary maps and the BPE cache use it.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace minivllm {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

}  // namespace minivllm
