#include "api/worker.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "api/model_source.h"
#include "common/check.h"
#include "common/host_profile.h"
#include "common/tuning.h"
#include "runtime/backend_select.h"
#include "runtime/model_runner.h"
#include "runtime/runner_config_json.h"
#include "runtime/shm_channel.h"

namespace minivllm {
namespace {

struct WorkerArgs {
  int control_fd = -1, rank = -1;
  pid_t parent = -1;
};

WorkerArgs parse(int argc, char** argv) {
  WorkerArgs a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--control-fd") a.control_fd = std::stoi(v);
    else if (k == "--rank") a.rank = std::stoi(v);
    else if (k == "--parent") a.parent = static_cast<pid_t>(std::stoi(v));
    else MINIVLLM_FAIL() << "unknown argument '" << k << "'";
  }
  MINIVLLM_CHECK(a.control_fd >= 0 && a.rank >= 1 && a.parent > 0)
      << "usage: minivllm-worker --control-fd FD --rank R --parent PID (started by minivllm, not by hand)";
  return a;
}

// Fault injection for the tests: MINIVLLM_WORKER_FAULT="<rank>:<method>" makes that rank crash
// (abort, as a segfault or a failed allocation would) when it receives that method.
void maybe_inject_fault(int rank, const std::string& method) {
  const std::optional<std::string> f = knob_text("MINIVLLM_WORKER_FAULT");
  if (f && *f == std::to_string(rank) + ":" + method) std::abort();
}

// Rank 0 aborts the channel when a peer dies or it gives up on the group. A worker inside the
// communicator (its init waiting for a rank that will never join, a collective waiting for a dead
// peer) reads no channel, so this thread carries the abort to this process's communicator: the
// worker then fails and leaves at once instead of rank 0 killing it after its grace period.
class AbortRelay {
 public:
  AbortRelay(const ShmChannel& channel, BackendKind backend, std::string bootstrap)
      : thread_([this, &channel, backend, bootstrap = std::move(bootstrap)] {
          while (!stop_.load()) {
            if (channel.aborted()) {
              abort_comm_bootstrap(backend, bootstrap, "rank 0 aborted the tensor-parallel group");
              return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          }
        }) {}
  ~AbortRelay() {
    stop_.store(true);
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace

int worker_main(int argc, char** argv) {
  WorkerArgs args;
  try {
    args = parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "minivllm-worker: %s\n", e.what());
    return 2;
  }
  // Die with rank 0; the parent check closes the race with a parent that died before prctl.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != args.parent) return 3;
  signal(SIGINT, SIG_IGN);
  const int rank = args.rank;
  ShmChannel channel;
  try {
    channel = ShmChannel::attach(args.control_fd);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "minivllm-worker rank %d: %s\n", rank, e.what());
    return 1;
  }
  const pid_t parent = args.parent;
  auto alive = [parent] { return getppid() == parent; };
  ModelSource source;
  std::unique_ptr<ModelRunner> runner;
  std::unique_ptr<AbortRelay> relay;  // declared after the runner: it stops before the runner goes
  std::string method, payload;
  try {
    for (;;) {
      {
        HostScope t("worker.read");
        channel.read(rank, &method, &payload, alive);
      }
      if (method == "exit") {
        try {
          if (runner != nullptr) runner->communicator().close();  // together with rank 0's
        } catch (const std::exception&) {  // leaving anyway: the destructors release the rest
        }
        break;
      }
      maybe_inject_fault(rank, method);
      if (method == "init") {
        const nlohmann::json init = nlohmann::json::parse(payload);
        const RunnerConfig cfg = runner_config_from_json(init.at("config"));
        const std::string bootstrap = init.at("bootstrap").get<std::string>();
        relay = std::make_unique<AbortRelay>(channel, resolve_backend_kind(cfg.backend), bootstrap);
        source = open_model(init.at("model").get<std::string>(), /*with_weights=*/true,
                            LoadOptions{cfg.load_format, cfg.dummy_seed, cfg.hf_overrides});
        runner = std::make_unique<ModelRunner>(cfg, source.config, *source.weights, rank, bootstrap);
      } else if (method == "launch") {
        MINIVLLM_CHECK(runner != nullptr) << "'launch' before 'init'";
        const StepInput in = [&] {
          HostScope t("worker.deserialize");
          return StepInput::deserialize(payload);
        }();
        HostScope t("worker.launch");
        runner->launch_detached(in);
      } else if (method == "prefill_all_logits") {
        MINIVLLM_CHECK(runner != nullptr) << "'prefill_all_logits' before 'init'";
        runner->prefill_all_logits(StepInput::deserialize(payload));
      } else {
        MINIVLLM_FAIL() << "unknown method '" << method << "'";
      }
    }
  } catch (const std::exception& e) {
    channel.set_error(rank, e.what());
    std::fprintf(stderr, "minivllm-worker rank %d: %s\n", rank, e.what());
    std::fflush(stderr);
    _exit(1);  // no destructors: a communicator may be mid-collective
  }
  return 0;
}

}  // namespace minivllm
