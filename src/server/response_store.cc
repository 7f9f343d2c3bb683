#include "server/response_store.h"

namespace minivllm::server {

std::optional<nlohmann::json> ResponseStore::find(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = items_.find(id);
  if (it == items_.end()) return std::nullopt;
  return it->second;
}

void ResponseStore::put(const std::string& id, nlohmann::json conversation) {
  std::lock_guard<std::mutex> lock(mu_);
  if (capacity_ == 0) return;
  auto [it, fresh] = items_.insert_or_assign(id, std::move(conversation));
  if (fresh) order_.push_back(id);
  while (order_.size() > capacity_) {
    items_.erase(order_.front());
    order_.pop_front();
  }
}

}  // namespace minivllm::server
