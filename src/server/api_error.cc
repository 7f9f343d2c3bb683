#include "server/api_error.h"

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

std::string public_message(const std::exception& e) {
  const std::string what = e.what();
  const std::string check = ": check failed: ";
  const size_t at = what.find(check);
  if (at == std::string::npos) return what;
  // The condition's text follows the marker and ends at the next ": ".
  const size_t message_at = what.find(": ", at + check.size());
  return message_at == std::string::npos ? what : what.substr(message_at + 2);
}

}  // namespace minivllm::server
