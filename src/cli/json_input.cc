#include "cli/json_input.h"

#include <limits>
#include <vector>

#include "common/check.h"

namespace minivllm::cli {
namespace {

template <typename Json>
std::string dump_short_string(const std::string& s, size_t budget) {
  return Json(s.substr(0, budget)).dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

template <typename Json>
std::string excerpt_impl(const Json& j, size_t max_chars) {
  // Serialises without recursion and stops as soon as the text is known to be too long.
  const size_t budget = max_chars + 4;
  std::string out;
  struct Frame {
    typename Json::const_iterator it, end;
    bool object;
    bool first;
  };
  std::vector<Frame> stack;
  auto open = [&](const Json& v) {
    if (v.is_array() || v.is_object()) {
      out += v.is_array() ? '[' : '{';
      stack.push_back({v.cbegin(), v.cend(), v.is_object(), true});
    } else if (v.is_string()) {
      out += dump_short_string<Json>(v.template get_ref<const std::string&>(), budget);
    } else {
      out += v.dump();
    }
  };
  open(j);
  while (!stack.empty() && out.size() <= budget) {
    Frame& f = stack.back();
    if (f.it == f.end) {
      out += f.object ? '}' : ']';
      stack.pop_back();
      continue;
    }
    if (!f.first) out += ',';
    f.first = false;
    const auto it = f.it++;
    if (f.object) out += dump_short_string<Json>(it.key(), budget) + ":";
    open(*it);  // may grow `stack`: `f` is not used after this
  }
  return text_excerpt(out, max_chars);
}

template <typename Json>
std::optional<int32_t> token_id_impl(const Json& j) {
  if (j.is_number_unsigned()) {
    const auto v = j.template get<uint64_t>();
    if (v <= static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) return static_cast<int32_t>(v);
    return std::nullopt;
  }
  if (j.is_number_integer()) {
    const auto v = j.template get<int64_t>();
    if (v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max()) {
      return static_cast<int32_t>(v);
    }
  }
  return std::nullopt;
}

template <typename Json>
std::string not_a_token_id_impl(const Json& j) {
  if (j.is_number_integer()) return json_excerpt(j) + " is outside the 32-bit token id range";
  return json_excerpt(j) + " is not an integer token id";
}

}  // namespace

std::optional<size_t> json_too_deep_at(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

nlohmann::ordered_json parse_json_input(std::string_view text, const std::string& source, const std::string& what) {
  if (const std::optional<size_t> at = json_too_deep_at(text)) {
    MINIVLLM_FAIL() << source << " is nested more than " << kMaxJsonDepth << " arrays or objects deep (at byte "
                    << *at << "); expected " << what;
  }
  try {
    return nlohmann::ordered_json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for a number overflow
    MINIVLLM_FAIL() << source << " is not valid JSON (expected " << what << "): " << json_error_excerpt(e);
  }
}

std::string json_excerpt(const nlohmann::json& j, size_t max_chars) { return excerpt_impl(j, max_chars); }
std::string json_excerpt(const nlohmann::ordered_json& j, size_t max_chars) { return excerpt_impl(j, max_chars); }

std::optional<int32_t> json_token_id(const nlohmann::json& j) { return token_id_impl(j); }
std::optional<int32_t> json_token_id(const nlohmann::ordered_json& j) { return token_id_impl(j); }

std::string not_a_token_id(const nlohmann::json& j) { return not_a_token_id_impl(j); }
std::string not_a_token_id(const nlohmann::ordered_json& j) { return not_a_token_id_impl(j); }

}  // namespace minivllm::cli
