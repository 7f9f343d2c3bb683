#include "server/response_input_items.h"

#include <algorithm>
#include <string_view>

#include "server/api_error.h"

namespace minivllm::server {

using nlohmann::json;

namespace {

// The id prefix OpenAI's items of each type carry.
std::string id_prefix(const std::string& type) {
  if (type == "message") return "msg";
  if (type == "function_call") return "fc";
  if (type == "function_call_output") return "fco";
  if (type == "reasoning") return "rs";
  return "item";
}

}  // namespace

json responses_input_items(const json& body, const std::string& suffix) {
  const json& input = body.at("input");
  json items = input.is_string() ? json::array({{{"role", "user"}, {"content", input}}}) : input;
  for (size_t i = 0; i < items.size(); ++i) {
    json& item = items[i];
    if (!item.contains("type")) item["type"] = "message";  // EasyInputMessage: role and content alone
    const std::string type = item["type"].get<std::string>();
    if (type == "message" && item.contains("content") && item["content"].is_string()) {
      const bool reply = item.value("role", "") == "assistant";
      item["content"] = json::array({{{"type", reply ? "output_text" : "input_text"}, {"text", item["content"]}}});
    }
    if (!item.contains("id") || item["id"].is_null()) {
      item["id"] = id_prefix(type) + "_" + suffix + "_" + std::to_string(i);
    }
  }
  return items;
}

json input_items_page(const json& items, const std::function<std::optional<std::string>(const std::string&)>& param,
                      const std::vector<std::string>& query_names) {
  for (const std::string& name : query_names) {
    if (name == "limit" || name == "order" || name == "after" || name == "before") continue;
    if (name == "include") throw ApiError(400, "include: no extra item data is supported", name);
    throw ApiError(400, name + ": unknown parameter of input_items (limit, order, after, before)", name);
  }
  int64_t limit = 20;
  if (const auto l = param("limit")) {
    const bool digits = !l->empty() && l->size() <= 3 &&
                        std::all_of(l->begin(), l->end(), [](char c) { return c >= '0' && c <= '9'; });
    limit = digits ? std::stoll(*l) : 0;
    if (limit < 1 || limit > 100) throw ApiError(400, "limit: must be an integer from 1 to 100, got " + *l, "limit");
  }
  const std::string order = param("order").value_or("desc");
  if (order != "asc" && order != "desc") throw ApiError(400, "order: must be asc or desc, got " + order, "order");
  std::vector<json> ordered(items.begin(), items.end());
  if (order == "desc") std::reverse(ordered.begin(), ordered.end());
  auto position = [&](const char* name) -> std::optional<size_t> {
    const auto id = param(name);
    if (!id) return std::nullopt;
    for (size_t i = 0; i < ordered.size(); ++i) {
      if (ordered[i].value("id", "") == *id) return i;
    }
    throw ApiError(400, std::string(name) + ": no input item '" + *id + "' in this response", name);
  };
  const std::optional<size_t> after = position("after"), before = position("before");
  const size_t begin = after ? *after + 1 : 0;
  const size_t end = std::max(begin, before ? *before : ordered.size());
  const size_t stop = std::min(end, begin + static_cast<size_t>(limit));
  json data = json::array();
  for (size_t i = begin; i < stop; ++i) data.push_back(ordered[i]);
  return {{"object", "list"},
          {"data", data},
          {"first_id", data.empty() ? json(nullptr) : data.front()["id"]},
          {"last_id", data.empty() ? json(nullptr) : data.back()["id"]},
          {"has_more", stop < end}};
}

}  // namespace minivllm::server
