// GET /metrics: the engine's counters and the serving histograms in Prometheus' text format
// (version 0.0.4), named after vLLM's metrics with a "minivllm:" prefix so its dashboards adapt.
#pragma once

#include <string>

#include "api/serving_stats.h"

namespace minivllm::server {

std::string prometheus_text(const ServingStats& stats, const std::string& model_name);

}  // namespace minivllm::server
