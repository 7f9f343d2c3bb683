#include "server/request_deadline.h"

#include <chrono>
#include <cmath>

#include "server/api_error.h"

namespace minivllm::server {

namespace {
// A year: longer is no deadline at all, and the sum with `now` must not overflow the clock.
constexpr double kMaxTimeoutS = 365.0 * 24 * 3600;
}  // namespace

AsyncEngine::Clock::time_point request_deadline(const nlohmann::json& body, double default_timeout_s,
                                                AsyncEngine::Clock::time_point now) {
  double seconds = default_timeout_s;
  auto it = body.find("request_timeout");
  if (it != body.end() && !it->is_null()) {
    if (!it->is_number()) throw bad_param("request_timeout", "must be a number of seconds, got " + it->dump().substr(0, 40));
    seconds = it->get<double>();
    if (!std::isfinite(seconds) || seconds <= 0 || seconds > kMaxTimeoutS) {
      throw bad_param("request_timeout", "must be in (0, " + std::to_string(static_cast<int64_t>(kMaxTimeoutS)) +
                                             "] seconds, got " + it->dump());
    }
  }
  if (seconds <= 0) return AsyncEngine::kNoDeadline;
  return now + std::chrono::duration_cast<AsyncEngine::Clock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace minivllm::server
