// RunnerGroup: the ranks of one model (seeds: ModelRunner's call / loop across processes). Rank 0's
// ModelRunner lives in this process; ranks 1..N-1 run the same ModelRunner in worker processes
// (`minivllm-worker`, runtime/worker.h) started here, one device each. Each call is written to the
// shared-memory control channel as [method, args] (the StepInput's bytes), mirrored by every worker,
// and run here; NCCL (or the CPU's shared-memory communicator) carries the tensors between ranks.
//
// Faults: a watchdog thread reaps the workers. One that dies (killed, crashed, out of memory) aborts
// the channel and the communicator, so rank 0 fails within a fraction of a second with an Error
// naming the rank, never hangs; later calls fail the same way. Workers die with rank 0
// (PR_SET_PDEATHSIG plus a parent check while they wait), and the segments are memfds: nothing is
// left in /dev/shm, whatever ends the processes.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/model_runner.h"
#include "runtime/shm_channel.h"

namespace minivllm {

class RunnerGroup {
 public:
  // `model_path` is what the workers open (the resolved checkpoint). world_size 1: no workers.
  RunnerGroup(const RunnerConfig& cfg, const ModelConfig& model_cfg, const WeightSource& weights,
              const std::string& model_path);
  ~RunnerGroup();

  SampledTokens run(const StepInput& in);
  // Async scheduling (ModelRunner::launch / collect): world_size 1 only overlaps; with workers,
  // launch() runs the step and collect() hands its tokens out.
  void launch(const StepInput& in);
  SampledTokens collect();
  // ModelRunner::sample_deferred on rank 0. No message: the workers sample nothing, and they
  // launched the step in full (their part of the sampler's collectives waits for rank 0's).
  void sample_deferred(std::vector<int32_t> bitmask, int words);
  std::vector<float> prefill_all_logits(const StepInput& in);
  // Tells the workers to leave and waits for them (SIGKILL after 10 s). Idempotent.
  void exit();

  const ModelRunner& runner() const { return *runner_; }
  int world_size() const { return cfg_.world_size; }
  // Why no step can run any more (a worker died: which rank, and how); "" while they can. A
  // server reads it to stop serving instead of failing every request that comes. Thread-safe.
  std::string death() const;
  std::vector<int> worker_pids() const;

 private:
  // Seeds: call(): the message to every worker, then the same method here.
  template <typename F>
  auto call(const std::string& method, const std::string& args, F&& local) -> decltype(local());
  void spawn_workers();
  void watch();
  [[noreturn]] void rethrow_with_cause(const std::exception& e) const;
  bool alive() const { return !dead_.load(); }

  RunnerConfig cfg_;
  std::unique_ptr<ModelRunner> runner_;
  ShmChannel channel_;
  std::vector<int> pids_;  // pids_[r - 1] is rank r
  std::thread watchdog_;
  std::atomic<bool> dead_{false}, exiting_{false}, all_reaped_{false};
  std::atomic<Communicator*> comm_{nullptr};
  mutable std::mutex death_mu_;
  std::string death_;
  std::string bootstrap_;  // the communicator's, from make_comm_bootstrap
  // Tests: MINIVLLM_STEP_FAULT=<token id> makes every step launch whose input holds that token throw on
  // rank 0 before it starts (as a device error would), -1 when unset.
  int64_t step_fault_token_ = -1;
};

// The worker executable's path: $MINIVLLM_WORKER, else `minivllm-worker` beside this program, else
// the one this build made.
std::string worker_executable();

}  // namespace minivllm
