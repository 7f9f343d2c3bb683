// StreamIdleProbe: see stream_idle_probe.h.
#include "backend/cuda/stream_idle_probe.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "backend/cuda/cuda_check.h"
#include "common/tuning.h"

namespace minivllm::cuda {

namespace {
constexpr size_t kMaxSteps = 200000;  // a bound on the events a long run keeps
}

bool StreamIdleProbe::enabled_by_env() { return knob_flag("MINIVLLM_PROFILE_GPU_IDLE"); }

cudaEvent_t StreamIdleProbe::record(cudaStream_t stream) {
  cudaEvent_t e = nullptr;
  CUDA_CHECK(cudaEventCreate(&e));  // with timing
  CUDA_CHECK(cudaEventRecord(e, stream));
  return e;
}

void StreamIdleProbe::step_begins(cudaStream_t stream) {
  if (!armed_ || open_ || begins_.size() >= kMaxSteps) return;
  begins_.push_back(record(stream));
  open_ = true;
}

void StreamIdleProbe::step_ends(cudaStream_t stream) {
  armed_ = true;
  if (!open_) return;  // the first sampling, or one without an upload before it (tests)
  ends_.push_back(record(stream));
  open_ = false;
}

void StreamIdleProbe::report(cudaStream_t stream) {
  if (cudaStreamSynchronize(stream) != cudaSuccess) return;
  const size_t n = ends_.size();
  std::vector<float> busy, idle;
  for (size_t i = 0; i < n; ++i) {
    float ms = 0.0f;
    if (cudaEventElapsedTime(&ms, begins_[i], ends_[i]) == cudaSuccess) busy.push_back(ms * 1e3f);
    if (i + 1 < n && cudaEventElapsedTime(&ms, ends_[i], begins_[i + 1]) == cudaSuccess) idle.push_back(ms * 1e3f);
  }
  for (cudaEvent_t e : begins_) cudaEventDestroy(e);
  for (cudaEvent_t e : ends_) cudaEventDestroy(e);
  begins_.clear();
  ends_.clear();
  if (busy.empty()) return;
  auto sum = [](const std::vector<float>& v) {
    double s = 0;
    for (float x : v) s += x;
    return s;
  };
  auto median = [](std::vector<float> v) {
    if (v.empty()) return 0.0f;
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  std::fprintf(stderr, "[gpu-idle] %zu steps: device time %.3f s (mean %.1f us, median %.1f us a step)\n", busy.size(),
               sum(busy) * 1e-6, sum(busy) / busy.size(), median(busy));
  if (idle.empty()) return;
  int buckets[5] = {0, 0, 0, 0, 0};  // < 5, < 20, < 100, < 1000 us, longer
  double long_total = 0;
  for (float x : idle) {
    const int b = x < 5 ? 0 : x < 20 ? 1 : x < 100 ? 2 : x < 1000 ? 3 : 4;
    ++buckets[b];
    if (b == 4) long_total += x;
  }
  std::fprintf(stderr,
               "[gpu-idle] between steps: %.3f s idle (mean %.1f us, median %.1f us); gaps < 5 us %d, 5-20 us %d, "
               "20-100 us %d, 100-1000 us %d, longer %d (%.3f s of the idle)\n",
               sum(idle) * 1e-6, sum(idle) / idle.size(), median(idle), buckets[0], buckets[1], buckets[2], buckets[3],
               buckets[4], long_total * 1e-6);
}

}  // namespace minivllm::cuda
