#include "runtime/runner_group.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>

#include "common/check.h"
#include "common/tuning.h"
#include "common/host_profile.h"
#include "runtime/backend_select.h"
#include "runtime/runner_config_json.h"

extern char** environ;

namespace minivllm {
namespace {

// Room for the largest StepInput: a full prefill's per-token arrays, every sequence's block table
// and sampling row, plus slack for the framing.
size_t control_capacity(const RunnerConfig& c) {
  const size_t blocks = static_cast<size_t>((c.max_model_length + c.block_size - 1) / c.block_size);
  return 64 * 1024 + 4 * (4 * static_cast<size_t>(c.max_num_batched_tokens) +
                          static_cast<size_t>(c.max_num_seqs) * (blocks + 16));
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  }
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "stopped";
}

}  // namespace

std::string worker_executable() {
  if (const std::optional<std::string> env = knob_text("MINIVLLM_WORKER")) return *env;
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto beside = self.parent_path() / "minivllm-worker";
    if (std::filesystem::exists(beside)) return beside.string();
  }
#ifdef MINIVLLM_WORKER_PATH
  if (std::filesystem::exists(MINIVLLM_WORKER_PATH)) return MINIVLLM_WORKER_PATH;
#endif
  MINIVLLM_FAIL() << "tensor parallelism needs the minivllm-worker program; it is neither beside " << self.string()
                  << " nor in the build tree; set MINIVLLM_WORKER to its path";
}

RunnerGroup::RunnerGroup(const RunnerConfig& cfg, const ModelConfig& model_cfg, const WeightSource& weights,
                         const std::string& model_path)
    : cfg_(cfg) {
  step_fault_token_ = knob_int("MINIVLLM_STEP_FAULT").value_or(step_fault_token_);
  MINIVLLM_CHECK(cfg_.world_size >= 1) << "world_size must be at least 1, got " << cfg_.world_size;
  if (cfg_.world_size == 1) {
    runner_ = std::make_unique<ModelRunner>(cfg_, model_cfg, weights);
    return;
  }
  check_tensor_parallel_shapes(model_cfg, cfg_.world_size, cfg_.enable_expert_parallel);
  cfg_.backend = resolve_backend_kind(cfg_.backend);
  if (cfg_.backend == BackendKind::kCuda) {
    const int gpus = visible_gpu_count();
    MINIVLLM_CHECK(cfg_.device_index + cfg_.world_size <= gpus)
        << "world_size " << cfg_.world_size << " needs " << cfg_.world_size << " GPUs but " << gpus
        << (cfg_.device_index > 0 ? " (from device " + std::to_string(cfg_.device_index) + ")" : std::string())
        << " are visible";
  }
  bootstrap_ = make_comm_bootstrap(cfg_.backend, cfg_.world_size);
  const std::string& bootstrap = bootstrap_;
  try {
    channel_ = ShmChannel::create(cfg_.world_size, control_capacity(cfg_));
    spawn_workers();
  } catch (...) {
    release_comm_bootstrap(cfg_.backend, bootstrap_);
    throw;
  }
  watchdog_ = std::thread([this] { watch(); });
  try {
    const nlohmann::json init = {
        {"model", model_path}, {"config", runner_config_to_json(cfg_)}, {"bootstrap", bootstrap}};
    channel_.write("init", init.dump(), [this] { return alive(); });
    runner_ = std::make_unique<ModelRunner>(cfg_, model_cfg, weights, 0, bootstrap, [this](Communicator& c) {
      comm_.store(&c);
      if (dead_.load()) c.abort();  // a worker died before the communicator existed
    });
  } catch (const std::exception& e) {
    try {
      rethrow_with_cause(e);
    } catch (...) {
      comm_.store(nullptr);
      exit();
      throw;
    }
  }
}

RunnerGroup::~RunnerGroup() {
  try {
    exit();
  } catch (...) {  // a destructor must not throw; exit() already killed what it could not stop
  }
}

void RunnerGroup::spawn_workers() {
  const std::string exe = worker_executable();
  const std::string fd = std::to_string(channel_.fd()), parent = std::to_string(getpid());
  for (int r = 1; r < cfg_.world_size; ++r) {
    const std::string rank = std::to_string(r);
    std::vector<std::string> args = {"minivllm-worker", "--control-fd", fd, "--rank", rank, "--parent", parent};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv.data(), environ);
    if (rc != 0) {
      channel_.abort();
      for (int p : pids_) kill(p, SIGKILL);
      for (int p : pids_) waitpid(p, nullptr, 0);
      pids_.clear();
      MINIVLLM_FAIL() << "could not start tensor-parallel rank " << r << " (" << exe << "): " << std::strerror(rc);
    }
    pids_.push_back(pid);
  }
}

// Reaps the workers. An exit while the group is not exiting is a death: everything is aborted so
// that rank 0's pending wait (the channel, a collective) throws instead of waiting forever.
void RunnerGroup::watch() {
  std::vector<bool> reaped(pids_.size(), false);
  size_t left = pids_.size();
  while (left > 0) {
    bool any = false;
    for (size_t i = 0; i < pids_.size(); ++i) {
      if (reaped[i]) continue;
      int status = 0;
      if (waitpid(pids_[i], &status, WNOHANG) != pids_[i]) continue;
      reaped[i] = true;
      --left;
      any = true;
      if (exiting_.load()) continue;
      const int rank = static_cast<int>(i) + 1;
      std::string msg = "tensor-parallel rank " + std::to_string(rank) + " (pid " + std::to_string(pids_[i]) + ") " +
                        describe_status(status);
      const std::string last = channel_.error(rank);
      if (!last.empty()) msg += ": " + last;
      {
        std::lock_guard<std::mutex> lock(death_mu_);
        if (death_.empty()) death_ = msg;
      }
      dead_.store(true);
      channel_.abort();
      if (Communicator* c = comm_.load()) c->abort();
      abort_comm_bootstrap(cfg_.backend, bootstrap_, msg);  // rank 0 may still be joining
    }
    if (!any) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  all_reaped_.store(true);
}

std::string RunnerGroup::death() const {
  if (!dead_.load()) return "";
  std::lock_guard<std::mutex> lock(death_mu_);
  return death_.empty() ? "a tensor-parallel worker died" : death_;
}

void RunnerGroup::rethrow_with_cause(const std::exception& e) const {
  std::string death;
  {
    std::lock_guard<std::mutex> lock(death_mu_);
    death = death_;
  }
  if (death.empty() && dead_.load()) death = "a tensor-parallel worker died";
  if (!death.empty()) MINIVLLM_FAIL() << death << " (rank 0 saw: " << e.what() << ")";
  throw;
}

template <typename F>
auto RunnerGroup::call(const std::string& method, const std::string& args, F&& local) -> decltype(local()) {
  if (cfg_.world_size == 1) return local();
  MINIVLLM_CHECK(!exiting_.load()) << "the tensor-parallel group has exited";
  if (dead_.load()) {
    std::lock_guard<std::mutex> lock(death_mu_);
    MINIVLLM_FAIL() << death_;
  }
  try {
    {
      HostScope t("group.write");
      channel_.write(method, args, [this] { return alive(); });
    }
    HostScope t("group.local");
    return local();
  } catch (const std::exception& e) {
    // A peer that dies mid-step shows up here as an aborted wait; give some time for the watchdog
    // to name it when rank 0 noticed first (a failed collective).
    for (int i = 0; i < 50 && !dead_.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    rethrow_with_cause(e);
  }
}

SampledTokens RunnerGroup::run(const StepInput& in) {
  launch(in);
  return collect();
}

void RunnerGroup::launch(const StepInput& in) {
  if (step_fault_token_ >= 0 &&
      std::find(in.input_ids.begin(), in.input_ids.end(), step_fault_token_) != in.input_ids.end()) {
    MINIVLLM_FAIL() << "injected step fault (MINIVLLM_STEP_FAULT=" << step_fault_token_ << ")";
  }
  if (cfg_.world_size == 1) {
    runner_->launch(in);
    return;
  }
  // The workers launch it too and go on to read the next message while their devices compute.
  std::string image = [&] {
    HostScope t("group.serialize");
    return in.serialize();
  }();
  call("launch", image, [&] { runner_->launch(in); });
}

SampledTokens RunnerGroup::collect() {
  if (cfg_.world_size == 1) return runner_->collect();
  SampledTokens out;
  try {
    out = runner_->collect();
  } catch (const std::exception& e) {
    rethrow_with_cause(e);
  }
  // A peer that died mid-step leaves its collectives aborted and this step's tokens garbage.
  if (dead_.load()) {
    std::lock_guard<std::mutex> lock(death_mu_);
    MINIVLLM_FAIL() << death_;
  }
  return out;
}

void RunnerGroup::sample_deferred(std::vector<int32_t> bitmask, int words) {
  if (cfg_.world_size == 1) return runner_->sample_deferred(std::move(bitmask), words);
  try {
    runner_->sample_deferred(std::move(bitmask), words);
  } catch (const std::exception& e) {
    rethrow_with_cause(e);
  }
}

std::vector<float> RunnerGroup::prefill_all_logits(const StepInput& in) {
  return call("prefill_all_logits", cfg_.world_size > 1 ? in.serialize() : std::string(),
              [&] { return runner_->prefill_all_logits(in); });
}

void RunnerGroup::exit() {
  if (cfg_.world_size == 1 || pids_.empty() || exiting_.exchange(true)) return;
  if (!dead_.load()) {
    try {
      channel_.write("exit", "", [this] { return alive(); });
      // Collective with the workers' close on "exit" (the watchdog still aborts it if one dies).
      if (runner_) runner_->communicator().close();
    } catch (...) {  // a worker is gone already: the kill below covers the rest
    }
  }
  // The watchdog reaps; give the workers 10 s to leave on their own, then kill them.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool killed = false;
  while (watchdog_.joinable() && !all_reaped_.load()) {
    if (!killed && std::chrono::steady_clock::now() > deadline) {
      channel_.abort();
      for (int p : pids_) kill(p, SIGKILL);
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (watchdog_.joinable()) watchdog_.join();
  runner_.reset();  // the communicator's segment goes with it
}

std::vector<int> RunnerGroup::worker_pids() const { return pids_; }

}  // namespace minivllm
