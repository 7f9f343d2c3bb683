// The responses kept for previous_response_id (POST /v1/responses) and GET / DELETE
// /v1/responses/{id} (and its input_items): each stored response object with its conversation as chat
// messages (the conversation it continued, its input, then its reply) and its input items, in memory, the newest
// kResponseStoreCapacity of them (the oldest forgotten first). OpenAI keeps them for 30 days; this
// server keeps none across a restart, and says so when asked for a missing one.
#pragma once

#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace minivllm::server {

inline constexpr size_t kResponseStoreCapacity = 1024;

class ResponseStore {
 public:
  explicit ResponseStore(size_t capacity = kResponseStoreCapacity) : capacity_(capacity) {}
  size_t capacity() const { return capacity_; }

  struct Stored {
    nlohmann::json response;      // the response object, as it was returned
    nlohmann::json conversation;  // chat messages: what a request continuing it goes on from
    nlohmann::json input_items;   // the request's input as items (server/response_input_items.h)
  };
  // What is stored under `id`, if it is still kept. Thread-safe, as the others.
  std::optional<Stored> find(const std::string& id) const;
  // Keeps `stored` under `id`, forgetting the oldest past the capacity.
  void put(const std::string& id, Stored stored);
  // Forgets `id`; false when it was not kept.
  bool erase(const std::string& id);
  // The item with id `item_id` among the kept responses' input items and output items (the newest
  // response's first), for an input item_reference; nullopt when none is kept.
  std::optional<nlohmann::json> find_item(const std::string& item_id) const;

 private:
  size_t capacity_;
  mutable std::mutex mu_;
  std::deque<std::string> order_;  // oldest first
  std::unordered_map<std::string, Stored> items_;
};

}  // namespace minivllm::server
