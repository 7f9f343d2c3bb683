// HostProfile: with MINIVLLM_PROFILE_HOST=1, named host-side scopes (the engine's step parts, the
// tensor-parallel control channel, a worker's read and launch, cuBLASLt's algorithm searches) add
// up their wall time, and each process prints its table to stderr at exit. Why: a step's host time
// decides whether the GPU waits for it, and the CUPTI kernel profiler slows the host enough to show
// gaps that are not there without it. Unlike MINIVLLM_PROFILE_STEPS it adds no synchronisation; a
// disabled scope costs one branch.
#pragma once

#include <chrono>
#include <cstdint>

namespace minivllm {

class HostProfile {
 public:
  static bool enabled();
  static void add(const char* name, int64_t ns);  // name: a string literal
};

class HostScope {
 public:
  explicit HostScope(const char* name) : name_(HostProfile::enabled() ? name : nullptr) {
    if (name_ != nullptr) start_ = std::chrono::steady_clock::now();
  }
  ~HostScope() {
    if (name_ == nullptr) return;
    const auto elapsed = std::chrono::steady_clock::now() - start_;
    HostProfile::add(name_, std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count());
  }
  HostScope(const HostScope&) = delete;
  HostScope& operator=(const HostScope&) = delete;

 private:
  const char* name_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace minivllm
