#include "api/request_stream.h"

#include <algorithm>

namespace minivllm {

namespace {
bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }
}  // namespace

void RequestStream::push(StreamEvent e) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (contains(ended_choices_, e.index)) return;
    if (e.final) ended_choices_.push_back(e.index);
    events_.push_back(std::move(e));
  }
  cv_.notify_all();
}

void RequestStream::end_all(const std::string& finish_reason, const std::string& error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (int i = 0; i < num_choices_; ++i) {
      if (contains(ended_choices_, i)) continue;
      ended_choices_.push_back(i);
      StreamEvent e;
      e.index = i;
      e.final = RequestOutput{};
      e.final->finish_reason = finish_reason;
      e.final->error = error;
      events_.push_back(std::move(e));
    }
  }
  cv_.notify_all();
}

std::vector<StreamEvent> RequestStream::pop(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait_for(lock, timeout, [&] { return !events_.empty(); });
  std::vector<StreamEvent> out(std::make_move_iterator(events_.begin()), std::make_move_iterator(events_.end()));
  events_.clear();
  return out;
}

bool RequestStream::ended() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(ended_choices_.size()) == num_choices_;
}

bool RequestStream::drained() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(ended_choices_.size()) == num_choices_ && events_.empty();
}

}  // namespace minivllm
