#include "server/responses_stream.h"

#include "server/responses_api.h"

namespace minivllm::server {

using nlohmann::json;

namespace {

// obj[key] when it is a string, else "" (a chunk's absent and null fields alike).
std::string text_of(const json& obj, const char* key) {
  return obj.is_object() && obj.contains(key) && obj[key].is_string() ? obj[key].get<std::string>() : "";
}

}  // namespace

std::string ResponsesStream::event(json e) {
  e["sequence_number"] = sequence_++;
  const std::string type = e["type"].get<std::string>();
  return "event: " + type + "\ndata: " + e.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

json ResponsesStream::item_json(const Item& item, bool done) const {
  const std::string status = done ? (finish_reason_ == "length" ? "incomplete" : "completed") : "in_progress";
  if (item.kind == "reasoning") {
    json content = done ? json::array({{{"type", "reasoning_text"}, {"text", item.text}}}) : json::array();
    return {{"type", "reasoning"}, {"id", item.id}, {"summary", json::array()}, {"content", std::move(content)}};
  }
  if (item.kind == "message") {
    json content = done ? json::array({{{"type", "output_text"}, {"text", item.text}, {"annotations", json::array()}}})
                        : json::array();
    return {{"type", "message"}, {"id", item.id}, {"status", status}, {"role", "assistant"}, {"content", content}};
  }
  return {{"type", "function_call"}, {"id", item.id},         {"call_id", item.call_id},
          {"name", item.name},       {"arguments", item.text}, {"status", done ? "completed" : "in_progress"}};
}

// The response as the events that carry it show it: nothing of the output until it is complete.
json ResponsesStream::snapshot(const std::string& status) const {
  const json completion = {
      {"id", "chatcmpl-" + suffix_},
      {"created", created_},
      {"model", model_},
      {"choices", json::array({{{"index", 0}, {"finish_reason", nullptr}, {"message", {{"role", "assistant"}}}}})},
      {"usage", {{"prompt_tokens", 0}, {"completion_tokens", 0}, {"total_tokens", 0}}}};
  json r = chat_completion_to_response(completion, body_);
  r["status"] = status;
  r["output"] = json::array();
  r["usage"] = nullptr;
  return r;
}

std::string ResponsesStream::open_item(const std::string& kind, const std::string& call_id, const std::string& name) {
  Item item{kind, "", "", call_id, name};
  const std::string n = std::to_string(items_.size());
  item.id = kind == "reasoning" ? "rs_" + suffix_ + "_" + n
            : kind == "message" ? "msg_" + suffix_ + "_" + n
                                : "fc_" + call_id;
  items_.push_back(item);
  const int index = static_cast<int>(items_.size()) - 1;
  std::string out = event({{"type", "response.output_item.added"}, {"output_index", index}, {"item", item_json(item, false)}});
  if (kind == "message") {
    out += event({{"type", "response.content_part.added"},
                  {"item_id", item.id},
                  {"output_index", index},
                  {"content_index", 0},
                  {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}}}});
  }
  return out;
}

std::string ResponsesStream::close_item(size_t index) {
  Item& item = items_[index];
  if (!item.open) return "";
  item.open = false;
  const int i = static_cast<int>(index);
  std::string out;
  if (item.kind == "reasoning") {
    out += event({{"type", "response.reasoning_text.done"}, {"item_id", item.id}, {"output_index", i},
                  {"content_index", 0}, {"text", item.text}});
  } else if (item.kind == "message") {
    out += event({{"type", "response.output_text.done"}, {"item_id", item.id}, {"output_index", i},
                  {"content_index", 0}, {"text", item.text}, {"logprobs", json::array()}});
    out += event({{"type", "response.content_part.done"}, {"item_id", item.id}, {"output_index", i},
                  {"content_index", 0},
                  {"part", {{"type", "output_text"}, {"text", item.text}, {"annotations", json::array()}}}});
  } else {
    out += event({{"type", "response.function_call_arguments.done"}, {"item_id", item.id}, {"output_index", i},
                  {"name", item.name}, {"arguments", item.text}});
  }
  return out + event({{"type", "response.output_item.done"}, {"output_index", i}, {"item", item_json(item, true)}});
}

// The reasoning and the message close when what follows them starts (calls come last).
std::string ResponsesStream::close_text_items() {
  std::string out;
  for (size_t i = 0; i < items_.size(); ++i) {
    if (items_[i].kind != "function_call") out += close_item(i);
  }
  return out;
}

std::string ResponsesStream::chunk(const json& c) {
  std::string out;
  if (!started_) {
    started_ = true;
    const std::string id = text_of(c, "id");
    suffix_ = id.substr(id.find('-') == std::string::npos ? 0 : id.find('-') + 1);
    created_ = c.contains("created") ? c["created"] : json(0);
    model_ = text_of(c, "model");
    out += event({{"type", "response.created"}, {"response", snapshot("in_progress")}});
    out += event({{"type", "response.in_progress"}, {"response", snapshot("in_progress")}});
  }
  if (c.contains("usage") && c["usage"].is_object()) usage_ = c["usage"];
  if (!c.contains("choices") || !c["choices"].is_array()) return out;
  for (const json& choice : c["choices"]) {
    const json delta = choice.is_object() && choice.contains("delta") ? choice["delta"] : json::object();
    const auto find_open = [&](const char* kind) -> int {
      for (size_t i = 0; i < items_.size(); ++i) {
        if (items_[i].kind == kind && items_[i].open) return static_cast<int>(i);
      }
      return -1;
    };
    if (const std::string piece = text_of(delta, "reasoning_content"); !piece.empty()) {
      if (find_open("reasoning") < 0) out += open_item("reasoning");
      const int i = find_open("reasoning");
      items_[i].text += piece;
      out += event({{"type", "response.reasoning_text.delta"}, {"item_id", items_[i].id}, {"output_index", i},
                    {"content_index", 0}, {"delta", piece}});
    }
    if (const std::string piece = text_of(delta, "content"); !piece.empty()) {
      if (find_open("message") < 0) {
        if (int r = find_open("reasoning"); r >= 0) out += close_item(static_cast<size_t>(r));
        out += open_item("message");
      }
      const int i = find_open("message");
      items_[i].text += piece;
      out += event({{"type", "response.output_text.delta"}, {"item_id", items_[i].id}, {"output_index", i},
                    {"content_index", 0}, {"delta", piece}, {"logprobs", json::array()}});
    }
    const json calls = delta.is_object() && delta.contains("tool_calls") && delta["tool_calls"].is_array()
                           ? delta["tool_calls"]
                           : json::array();
    for (const json& tc : calls) {
      const int k = tc.is_object() && tc.contains("index") && tc["index"].is_number_integer() ? tc["index"].get<int>() : 0;
      if (k < 0 || k > 1024) continue;
      if (k >= static_cast<int>(call_item_.size())) call_item_.resize(static_cast<size_t>(k) + 1, -1);
      if (call_item_[k] < 0) {  // a call's first piece names it
        out += close_text_items();
        const json fn = tc.contains("function") ? tc["function"] : json::object();
        out += open_item("function_call", text_of(tc, "id"), text_of(fn, "name"));
        call_item_[k] = static_cast<int>(items_.size()) - 1;
      }
      const int i = call_item_[k];
      const std::string piece = tc.contains("function") ? text_of(tc["function"], "arguments") : "";
      if (piece.empty()) continue;
      items_[i].text += piece;
      out += event({{"type", "response.function_call_arguments.delta"}, {"item_id", items_[i].id},
                    {"output_index", i}, {"delta", piece}});
    }
    if (const std::string reason = text_of(choice, "finish_reason"); !reason.empty()) finish_reason_ = reason;
  }
  return out;
}

std::string ResponsesStream::finish() {
  finished_ = true;
  std::string out;
  // An empty reply is an empty message, as a whole response's is.
  bool answered = false;
  for (const Item& item : items_) answered = answered || item.kind != "reasoning";
  if (!answered) out += open_item("message");
  for (size_t i = 0; i < items_.size(); ++i) out += close_item(i);
  // The whole response: its fields as a whole one's (chat_completion_to_response), its output the
  // items the events built.
  const json completion = {{"id", "chatcmpl-" + suffix_},
                           {"created", created_},
                           {"model", model_},
                           {"choices", json::array({{{"index", 0}, {"finish_reason", finish_reason_},
                                                     {"message", {{"role", "assistant"}, {"content", ""}}}}})},
                           {"usage", usage_.is_object() ? usage_
                                                        : json{{"prompt_tokens", 0}, {"completion_tokens", 0},
                                                               {"total_tokens", 0}}}};
  json r = chat_completion_to_response(completion, body_);
  r["output"] = json::array();
  for (const Item& item : items_) r["output"].push_back(item_json(item, true));
  const bool cut = finish_reason_ == "length";
  if (on_complete_) on_complete_(r);
  return out + event({{"type", cut ? "response.incomplete" : "response.completed"}, {"response", std::move(r)}});
}

std::string ResponsesStream::rewrite(std::string_view sse) {
  pending_.append(sse);
  std::string out;
  size_t end;
  while (!finished_ && (end = pending_.find("\n\n")) != std::string::npos) {
    const std::string ev = pending_.substr(0, end);
    pending_.erase(0, end + 2);
    if (ev.starts_with(":")) {  // a keep-alive comment
      out += ev + "\n\n";
      continue;
    }
    if (!ev.starts_with("data: ")) continue;
    const std::string_view data = std::string_view(ev).substr(6);
    if (data == "[DONE]") {
      out += finish();
      break;
    }
    const json c = json::parse(data, nullptr, /*allow_exceptions=*/false);
    if (c.is_object() && c.contains("error")) {
      const json& e = c["error"];
      out += event({{"type", "error"},
                    {"code", e.is_object() && e.contains("code") ? e["code"] : json(nullptr)},
                    {"message", text_of(e, "message")},
                    {"param", e.is_object() && e.contains("param") ? e["param"] : json(nullptr)}});
      finished_ = true;
      break;
    }
    if (c.is_object()) out += chunk(c);
  }
  return out;
}

}  // namespace minivllm::server
