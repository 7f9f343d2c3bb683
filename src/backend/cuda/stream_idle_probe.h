// StreamIdleProbe (MINIVLLM_PROFILE_GPU_IDLE=1): how long the backend's stream sits idle between
// steps, measured on the device. A step opens at its first upload after the previous step's
// sampling and closes behind its sampled tokens' copy back; a timing event is recorded at both
// ends, and at teardown the summary goes to stderr: the steps' device time, and the gaps between
// one step's end and the next one's start, i.e. the host time the device waited for. Unlike the
// step profiler (MINIVLLM_PROFILE_STEPS) it adds no synchronisation, so it measures async
// scheduling as it runs. Counting starts after the first sampling (loading and warm-up come
// before it). Gaps include everything else the host did between steps (the engine, the caller).
#pragma once

#include <cuda_runtime.h>

#include <vector>

namespace minivllm::cuda {

class StreamIdleProbe {
 public:
  static bool enabled_by_env();

  void step_begins(cudaStream_t stream);  // called by every upload: only the first after an end counts
  void step_ends(cudaStream_t stream);    // called behind each sampling's copy back
  // Waits for the stream and prints the summary (nothing if no step was seen). Errors are ignored:
  // it runs at teardown.
  void report(cudaStream_t stream);

 private:
  cudaEvent_t record(cudaStream_t stream);

  bool armed_ = false;  // the first sampling was seen
  bool open_ = false;
  std::vector<cudaEvent_t> begins_, ends_;  // step i: begins_[i] .. ends_[i]
};

}  // namespace minivllm::cuda
