#include "server/response_store.h"

#include <algorithm>

namespace minivllm::server {

std::optional<ResponseStore::Stored> ResponseStore::find(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = items_.find(id);
  if (it == items_.end()) return std::nullopt;
  return it->second;
}

void ResponseStore::put(const std::string& id, Stored stored) {
  std::lock_guard<std::mutex> lock(mu_);
  if (capacity_ == 0) return;
  auto [it, fresh] = items_.insert_or_assign(id, std::move(stored));
  if (fresh) order_.push_back(id);
  while (order_.size() > capacity_) {
    items_.erase(order_.front());
    order_.pop_front();
  }
}

std::optional<nlohmann::json> ResponseStore::find_item(const std::string& item_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto id = order_.rbegin(); id != order_.rend(); ++id) {
    const Stored& s = items_.at(*id);
    const nlohmann::json* output = s.response.is_object() && s.response.contains("output") ? &s.response.at("output")
                                                                                            : nullptr;
    for (const nlohmann::json* items : {&s.input_items, output}) {
      if (items == nullptr || !items->is_array()) continue;
      for (const nlohmann::json& item : *items) {
        if (item.is_object() && item.contains("id") && item["id"] == item_id) return item;
      }
    }
  }
  return std::nullopt;
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (items_.erase(id) == 0) return false;
  order_.erase(std::find(order_.begin(), order_.end(), id));
  return true;
}

}  // namespace minivllm::server
