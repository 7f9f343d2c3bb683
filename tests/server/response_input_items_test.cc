// GET /v1/responses/{id}/input_items (server/response_input_items.h): a request's input as listed
// items with ids, and its pages by limit, order, after and before; bad parameters refused by name.
#include <gtest/gtest.h>

#include <map>

#include "server/api_error.h"
#include "server/response_input_items.h"

namespace minivllm::server {
namespace {

using nlohmann::json;

json page(const json& items, const std::map<std::string, std::string>& query) {
  std::vector<std::string> names;
  for (const auto& [name, value] : query) names.push_back(name);
  return input_items_page(
      items,
      [&](const std::string& name) -> std::optional<std::string> {
        auto it = query.find(name);
        return it == query.end() ? std::nullopt : std::optional<std::string>(it->second);
      },
      names);
}

std::vector<std::string> ids(const json& p) {
  std::vector<std::string> out;
  for (const json& item : p.at("data")) out.push_back(item.at("id").get<std::string>());
  return out;
}

std::string refused_param(const json& items, const std::map<std::string, std::string>& query) {
  try {
    page(items, query);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400) << e.what();
    return e.param();
  }
  ADD_FAILURE() << "accepted";
  return "";
}

TEST(ResponseInputItems, AStringIsOneUserMessage) {
  const json items = responses_input_items({{"input", "Hi"}}, "abc");
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0], json::parse(R"({"type": "message", "role": "user", "id": "msg_abc_0",
                                      "content": [{"type": "input_text", "text": "Hi"}]})"));
}

TEST(ResponseInputItems, ItemsKeepTheirIdsOrGetOneByType) {
  const json body = json::parse(R"({"input": [
      {"role": "user", "content": "Weather?"},
      {"type": "message", "role": "assistant", "content": "Calling.", "id": "msg_mine"},
      {"type": "function_call", "call_id": "c1", "name": "w", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "c1", "output": "22 C"}]})");
  const json items = responses_input_items(body, "r1");
  ASSERT_EQ(items.size(), 4u);
  EXPECT_EQ(items[0]["id"], "msg_r1_0");
  EXPECT_EQ(items[0]["content"][0]["type"], "input_text");
  EXPECT_EQ(items[1]["id"], "msg_mine");
  EXPECT_EQ(items[1]["content"][0], json::parse(R"({"type": "output_text", "text": "Calling."})"));
  EXPECT_EQ(items[2]["id"], "fc_r1_2");
  EXPECT_EQ(items[3]["id"], "fco_r1_3");
  EXPECT_EQ(items[3]["output"], "22 C");
}

TEST(ResponseInputItems, PagesByLimitOrderAfterAndBefore) {
  json items = json::array();
  for (int i = 0; i < 5; ++i) items.push_back({{"type", "message"}, {"id", "m" + std::to_string(i)}});
  json p = page(items, {});  // desc by default: the last item first
  EXPECT_EQ(ids(p), (std::vector<std::string>{"m4", "m3", "m2", "m1", "m0"}));
  EXPECT_EQ(p["object"], "list");
  EXPECT_EQ(p["first_id"], "m4");
  EXPECT_EQ(p["last_id"], "m0");
  EXPECT_FALSE(p["has_more"]);
  p = page(items, {{"order", "asc"}, {"limit", "2"}});
  EXPECT_EQ(ids(p), (std::vector<std::string>{"m0", "m1"}));
  EXPECT_TRUE(p["has_more"]);
  p = page(items, {{"order", "asc"}, {"limit", "2"}, {"after", "m1"}});
  EXPECT_EQ(ids(p), (std::vector<std::string>{"m2", "m3"}));
  EXPECT_TRUE(p["has_more"]);
  p = page(items, {{"after", "m3"}, {"before", "m0"}});  // desc: m2, m1
  EXPECT_EQ(ids(p), (std::vector<std::string>{"m2", "m1"}));
  EXPECT_FALSE(p["has_more"]);
  p = page(items, {{"after", "m0"}});
  EXPECT_TRUE(p["data"].empty());
  EXPECT_TRUE(p["first_id"].is_null());
}

TEST(ResponseInputItems, BadParametersAreRefusedByName) {
  const json items = json::array({{{"type", "message"}, {"id", "m0"}}});
  EXPECT_EQ(refused_param(items, {{"limit", "0"}}), "limit");
  EXPECT_EQ(refused_param(items, {{"limit", "101"}}), "limit");
  EXPECT_EQ(refused_param(items, {{"limit", "ten"}}), "limit");
  EXPECT_EQ(refused_param(items, {{"order", "newest"}}), "order");
  EXPECT_EQ(refused_param(items, {{"after", "m9"}}), "after");
  EXPECT_EQ(refused_param(items, {{"include", "x"}}), "include");
  EXPECT_EQ(refused_param(items, {{"page", "2"}}), "page");
}

}  // namespace
}  // namespace minivllm::server
