// RunnerConfig to JSON and back: what rank 0 sends its workers in the "init" message.
#pragma once

#include <nlohmann/json.hpp>

#include "runtime/runner_config.h"

namespace minivllm {

nlohmann::json runner_config_to_json(const RunnerConfig& c);
RunnerConfig runner_config_from_json(const nlohmann::json& j);

}  // namespace minivllm
