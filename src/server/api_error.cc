#include "server/api_error.h"

#include "common/error_text.h"

namespace minivllm::server {

namespace {
std::string default_type(int status) {
  if (status == 401) return "authentication_error";
  if (status == 404) return "not_found_error";
  if (status >= 500) return status == 503 ? "service_unavailable" : "server_error";
  return "invalid_request_error";
}
}  // namespace

std::string ApiError::type() const { return type_.empty() ? default_type(status_) : type_; }

ApiError bad_param(const std::string& param, const std::string& problem) {
  return ApiError(400, std::string(param).append(": ").append(problem), param);
}

nlohmann::json error_json(int status, const std::string& message, const std::string& param, const std::string& type) {
  nlohmann::json err = {{"message", message},
                        {"type", type.empty() ? default_type(status) : type},
                        {"param", nullptr},
                        {"code", status}};
  if (!param.empty()) err["param"] = param;
  return {{"error", std::move(err)}};
}

nlohmann::json error_json(const ApiError& e) { return error_json(e.status(), e.what(), e.param(), e.type()); }

std::string public_message(const std::exception& e) { return message_for_users(e.what()); }

}  // namespace minivllm::server
