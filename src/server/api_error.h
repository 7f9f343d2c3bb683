// ApiError: a request the server refuses, with the HTTP status and OpenAI's error fields. Thrown by
// request parsing and the handlers; the HTTP layer turns it into OpenAI's error JSON
// ({"error": {"message", "type", "param", "code"}}), which the official clients raise as
// BadRequestError (400), AuthenticationError (401), NotFoundError (404) and so on.
#pragma once

#include <exception>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace minivllm::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = "", std::string type = "")
      : std::runtime_error(message), status_(status), param_(std::move(param)), type_(std::move(type)) {}

  int status() const { return status_; }
  const std::string& param() const { return param_; }  // the offending parameter, "" when none
  std::string type() const;                              // OpenAI's error type for the status
  // Seconds after which the same request may succeed (the Retry-After header of a 503); 0: none.
  int retry_after_s() const { return retry_after_s_; }
  ApiError& with_retry_after(int seconds) {
    retry_after_s_ = seconds;
    return *this;
  }

 private:
  int status_;
  int retry_after_s_ = 0;
  std::string param_;
  std::string type_;
};

// 400 naming the parameter: the message starts with it, so a client that shows only the message
// still sees which field was wrong.
ApiError bad_param(const std::string& param, const std::string& problem);

// {"error": {"message", "type", "param", "code"}}; param and code are null when empty.
nlohmann::json error_json(int status, const std::string& message, const std::string& param = "",
                          const std::string& type = "");
nlohmann::json error_json(const ApiError& e);

// An engine Error's message without the "file:line: check failed: cond: " prefix (source paths are
// for developers, not for API clients).
std::string public_message(const std::exception& e);

}  // namespace minivllm::server
