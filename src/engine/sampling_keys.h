// The sampling table's rows (for the CLI and the server) and keys with their defaults (for the
// Python bindings and docs). The table itself is in sampling_keys.cc.
#pragma once

#include <span>
#include <string_view>

#include "common/config_table.h"
#include "engine/sampling_params.h"

namespace minivllm {

std::span<const KeyRow<SamplingParams>> sampling_rows();
std::span<const ConfigKey> sampling_keys();
// Sampling errors name the key alone ("top_p must be in (0, 1], got 1.5").
inline constexpr std::string_view kSamplingKeyKind = "";

}  // namespace minivllm
