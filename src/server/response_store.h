// The responses kept for previous_response_id (POST /v1/responses): each stored response's
// conversation as chat messages (the conversation it continued, its input, then its reply), in
// memory, the newest kResponseStoreCapacity of them (the oldest forgotten first). OpenAI keeps them
// for 30 days; this server keeps none across a restart, and says so when asked for a missing one.
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

  // The conversation stored under `id`, if it is still kept. Thread-safe.
  std::optional<nlohmann::json> find(const std::string& id) const;
  // Keeps `conversation` (a JSON array of chat messages) under `id`, forgetting the oldest past the
  // capacity. Thread-safe.
  void put(const std::string& id, nlohmann::json conversation);

 private:
  size_t capacity_;
  mutable std::mutex mu_;
  std::deque<std::string> order_;  // oldest first
  std::unordered_map<std::string, nlohmann::json> items_;
};

}  // namespace minivllm::server
