#include "server/json_body.h"

#include <string>

#include "common/error_text.h"
#include "server/api_error.h"

namespace minivllm::server {

namespace {
// Thrown from the parser's callback to stop at the first container past the limit.
struct TooDeep {};
}  // namespace

nlohmann::json parse_json_body(std::string_view body, int max_depth) {
  // The callback sees every container as it opens, with the depth of its parent.
  const nlohmann::json::parser_callback_t limit_depth = [max_depth](int depth, nlohmann::json::parse_event_t event,
                                                                    nlohmann::json&) {
    const bool opens = event == nlohmann::json::parse_event_t::object_start ||
                       event == nlohmann::json::parse_event_t::array_start;
    if (opens && depth >= max_depth) throw TooDeep{};
    return true;
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(body.begin(), body.end(), limit_depth);
  } catch (const TooDeep&) {
    throw ApiError(400, "the request body is nested more than " + std::to_string(max_depth) +
                            " arrays or objects deep");
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for a number overflow
    // (the fuzzer's find: 1e666 is out_of_range, not a parse_error); the message quotes the token
    // the parser stopped in, which may be long: an excerpt of it, as the CLI gives.
    throw ApiError(400, std::string("the request body is not valid JSON: ").append(json_error_excerpt(e)));
  }
  if (!j.is_object()) throw ApiError(400, "the request body must be a JSON object");
  return j;
}

}  // namespace minivllm::server
