// A streamed /v1/responses: the chat path's server-sent events (chat.completion.chunk, then [DONE])
// rewritten as the Responses API's typed events, as they arrive: response.created and in_progress;
// per output item (reasoning, the message, each function call) output_item.added, its deltas
// (reasoning_text, output_text, function_call_arguments) and .done events, output_item.done; then
// response.completed (or incomplete, at max_output_tokens) with the whole response, built by
// chat_completion_to_response from what streamed. An error event becomes Responses' error event.
// Pure text in and out (no sockets), so it is unit-tested on recorded chunks.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace minivllm::server {

class ResponsesStream {
 public:
  // on_complete (if set) gets the whole response when its stream completes (the store keeps it).
  explicit ResponsesStream(nlohmann::json request_body,
                           std::function<void(const nlohmann::json&)> on_complete = nullptr)
      : body_(std::move(request_body)), on_complete_(std::move(on_complete)) {}

  // The Responses events for the chat events in `sse` (whole events, as the chat path writes them;
  // a partial one waits for the rest). Keep-alive comments pass through.
  std::string rewrite(std::string_view sse);

 private:
  struct Item {
    std::string kind;  // "reasoning", "message" or "function_call"
    std::string id;
    std::string text;  // reasoning text, message text or call arguments
    std::string call_id, name;
    bool open = true;
  };
  std::string event(nlohmann::json e);
  std::string chunk(const nlohmann::json& c);
  std::string open_item(const std::string& kind, const std::string& call_id = "", const std::string& name = "");
  std::string close_item(size_t index);
  std::string close_text_items();
  std::string finish();
  nlohmann::json item_json(const Item& item, bool done) const;
  nlohmann::json snapshot(const std::string& status) const;

  nlohmann::json body_;
  std::function<void(const nlohmann::json&)> on_complete_;
  std::string pending_;
  std::string suffix_;  // of the chat completion's id: the response's and its items' ids
  nlohmann::json created_ = 0, model_ = "";
  int64_t sequence_ = 0;
  bool started_ = false, finished_ = false;
  std::vector<Item> items_;
  std::vector<int> call_item_;  // tool call index -> item index
  std::string finish_reason_;
  nlohmann::json usage_;
};

}  // namespace minivllm::server
