// ServingStats: what the serving layer measures about requests (latency histograms, how requests
// ended) next to the engine's own counters. The engine thread records; readers take a copy.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "api/llm_engine.h"

namespace minivllm {

// A Prometheus-style histogram: counts per upper bound (not cumulative here; the text format adds
// them up), plus the sum and count of every observation.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);

  const std::vector<double>& upper_bounds() const { return bounds_; }
  // counts()[i]: observations in (bounds[i-1], bounds[i]]; the last entry counts those above all.
  const std::vector<uint64_t>& counts() const { return counts_; }
  double sum() const { return sum_; }
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

struct ServingStats {
  EngineStats engine;
  int num_requests_in_flight = 0;             // submitted and not ended, as the serving layer sees them
  std::map<std::string, int64_t> finished_by_reason;  // "stop", "length", "abort", "error" (per choice)
  int64_t num_requests_rejected = 0;   // refused: the waiting queue was full (the server's 503)
  int64_t num_requests_timed_out = 0;  // ended by their deadline (also counted as "error" above)
  // Seconds. Buckets as vLLM's metrics, so dashboards built for it read these too.
  Histogram time_to_first_token{{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                                 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}};
  Histogram inter_token_latency{{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                                 10.0, 20.0, 40.0, 80.0}};
  Histogram e2e_request_latency{{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
                                 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}};
};

}  // namespace minivllm
