// StepProfiler: with MINIVLLM_PROFILE_STEPS=1, ModelRunner::run splits each decode step into parts
// timed by host clocks around extra backend synchronize() points (only while profiling, so the
// parts are GPU-complete times): engine gap (host time between two consecutive decode run() calls:
// scheduler, postprocess, caller; a prefill step between them voids that gap), input upload
// (prepare_decode + its copies), graph (replay to completion), sample (params upload, kernel, D2H,
// sync). The summary goes to stderr when the runner is destroyed.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "common/tuning.h"

namespace minivllm {

class StepProfiler {
 public:
  enum Part { kGap, kUpload, kGraph, kSample, kNumParts };
  using Clock = std::chrono::steady_clock;

  static bool enabled() { return knob_flag("MINIVLLM_PROFILE_STEPS"); }

  // Starts a decode step: the gap since the previous step's end counts as kGap.
  void begin() {
    const Clock::time_point now = Clock::now();
    if (have_end_) {
      add(kGap, now - last_);
      ++gaps_;
    }
    last_ = now;
    ++steps_;
  }
  // Ends part `p` now (it began at the previous mark).
  void mark(Part p) {
    const Clock::time_point now = Clock::now();
    add(p, now - last_);
    last_ = now;
  }
  void end() { have_end_ = true; }  // last_ is the step's end: the next begin() measures the gap
  // A prefill (or mixed) step ran: the next decode step's gap would hold all of it, so it is not
  // counted; gaps are decode-to-decode host time only.
  void interrupt() { have_end_ = false; }

  ~StepProfiler() {
    if (steps_ == 0) return;
    static const char* names[kNumParts] = {"engine gap", "input upload", "graph (GPU)", "sample"};
    double total = 0;
    for (int p = kUpload; p < kNumParts; ++p) total += sum_us_[p] / static_cast<double>(steps_);
    if (gaps_ > 0) total += sum_us_[kGap] / static_cast<double>(gaps_);
    std::fprintf(stderr, "[profile] %lld decode steps, mean us/step (synchronized parts):\n",
                 static_cast<long long>(steps_));
    for (int p = 0; p < kNumParts; ++p) {
      const int64_t n = p == kGap ? gaps_ : steps_;
      std::fprintf(stderr, "[profile]   %-13s %8.1f\n", names[p], n > 0 ? sum_us_[p] / static_cast<double>(n) : 0.0);
    }
    std::fprintf(stderr, "[profile]   %-13s %8.1f\n", "sum", total);
  }

 private:
  void add(Part p, Clock::duration d) { sum_us_[p] += std::chrono::duration<double, std::micro>(d).count(); }

  std::array<double, kNumParts> sum_us_{};
  int64_t steps_ = 0, gaps_ = 0;
  bool have_end_ = false;
  Clock::time_point last_{};
};

}  // namespace minivllm
