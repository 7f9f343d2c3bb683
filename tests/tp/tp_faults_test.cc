// Tensor parallelism's processes and faults, on the CPU backend (worker processes, the
// shared-memory communicator): workers exist, a dead worker is an error naming its rank within
// 10 s, rank 0's death or a signal takes every worker with it, and nothing is left in /dev/shm.
#include <gtest/gtest.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>

#include "../golden/engine_test_util.h"
#include "api/llm_engine.h"
#include "common/check.h"
#include "scoped_env.h"

extern char** environ;

namespace minivllm {
namespace {

using Clock = std::chrono::steady_clock;

// The golden tests' tiny CPU engine at world_size ranks, one compute thread a rank so that the rank
// processes do not oversubscribe the cores. MINIVLLM_TP_TEST_DEVICE=cuda runs the engines on the GPUs
// (a GPU machine's run of the fault tests: issue 51's four ranks with MINIVLLM_TP_TEST_WORLD=4), on
// dummy weights of tests/tp/qwen3-tiny-hd64-kv4: the golden model's head_dim 32 is below what the
// CUDA attention kernels take; this one keeps its 8 query and 4 KV heads.
EngineConfig tp_config(int world_size, const std::string& model = "qwen3-tiny-kv4") {
  EngineConfig c = tiny_config(model, world_size);
  c.num_threads = 1;
  if (const char* d = std::getenv("MINIVLLM_TP_TEST_DEVICE")) c.device = d;
  if (c.device == "cuda") {
    c.model = std::string(MINIVLLM_SOURCE_DIR) + "/tests/tp/qwen3-tiny-hd64-kv4";
    c.load_format = "dummy";
  }
  return c;
}

// The fault tests' world size: 2, or MINIVLLM_TP_TEST_WORLD (the tiny model's 4 kv heads allow 4).
int fault_world() {
  const char* w = std::getenv("MINIVLLM_TP_TEST_WORLD");
  return w != nullptr ? std::atoi(w) : 2;
}

// The tests that take four ranks on the CPU: on the GPUs, the fault world (as many as are lent).
int four_or_fault_world() { return std::getenv("MINIVLLM_TP_TEST_DEVICE") != nullptr ? fault_world() : 4; }

std::set<std::string> shm_entries() {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) out.insert(e.path().filename().string());
  return out;
}

bool process_gone(int pid) {
  // Gone, or a zombie waiting for its (new) parent to reap it: either way it holds no memory.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat.good()) return true;
  std::string line;
  std::getline(stat, line);
  const size_t close = line.rfind(')');
  return close != std::string::npos && line.size() > close + 2 && line[close + 2] == 'Z';
}

bool wait_gone(const std::vector<int>& pids, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    bool all = true;
    for (int p : pids) all = all && process_gone(p);
    if (all) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// The error of the first output that failed, or "".
std::string first_error(const std::vector<RequestOutput>& outs) {
  for (const RequestOutput& o : outs) {
    if (o.finish_reason == "error") return o.error;
  }
  return "";
}

TEST(TensorParallel, WorkersAreProcessesAndLeaveOnExit) {
  const auto shm_before = shm_entries();
  std::vector<int> pids;
  {
    const int world = four_or_fault_world();
    LLMEngine engine(tp_config(world));
    pids = engine.runners().worker_pids();
    ASSERT_EQ(pids.size(), static_cast<size_t>(world - 1));
    for (int p : pids) EXPECT_FALSE(process_gone(p)) << "worker " << p;
    auto outs = engine.generate(std::vector<std::vector<int32_t>>{{1, 2, 3}}, greedy(4));
    EXPECT_EQ(outs[0].token_ids.size(), 4u);
  }
  EXPECT_TRUE(wait_gone(pids, std::chrono::seconds(5)));
  EXPECT_EQ(shm_entries(), shm_before);
}

TEST(TensorParallel, KilledWorkerIsAnErrorNamingTheRank) {
  const auto shm_before = shm_entries();
  LLMEngine engine(tp_config(fault_world()));
  const int victim = engine.runners().worker_pids().at(0);
  std::vector<std::vector<int32_t>> prompts(8, std::vector<int32_t>{5, 6, 7, 8});
  std::thread killer([victim] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    kill(victim, SIGKILL);
  });
  const auto t0 = Clock::now();
  // The failed step fails its batch: every request of it ends with the error (LLMEngine::step).
  std::string error;
  for (int i = 0; i < 1000 && error.empty(); ++i) error = first_error(engine.generate(prompts, greedy(200)));
  killer.join();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_FALSE(error.empty()) << "the engine went on without rank 1";
  EXPECT_NE(error.find("rank 1"), std::string::npos) << error;
  EXPECT_NE(error.find("signal 9"), std::string::npos) << error;
  EXPECT_LT(secs, 10.0);
  // Every later call fails the same way, at once.
  for (const RequestOutput& o : engine.generate(prompts, greedy(2))) {
    EXPECT_EQ(o.finish_reason, "error");
    EXPECT_NE(o.error.find("rank 1"), std::string::npos) << o.error;
  }
  engine.exit();
  EXPECT_EQ(shm_entries(), shm_before);
}

TEST(TensorParallel, WorkerCrashingAtLoadFailsTheEngine) {
  const auto t0 = Clock::now();
  std::string error;
  try {
    const test::ScopedEnv fault("MINIVLLM_WORKER_FAULT", "1:init");
    LLMEngine engine(tp_config(fault_world()));
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("rank 1"), std::string::npos) << error;
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 10.0);
}

TEST(TensorParallel, WorkerCrashingMidStepFailsTheStep) {
  const int world = four_or_fault_world(), victim = world - 1;
  const std::string fault = std::to_string(victim) + ":launch";
  LLMEngine engine =
      test::with_env({{"MINIVLLM_WORKER_FAULT", fault.c_str()}}, [&] { return LLMEngine(tp_config(world)); });
  const std::string error =
      first_error(engine.generate(std::vector<std::vector<int32_t>>{{1, 2, 3}}, greedy(4)));
  EXPECT_NE(error.find("rank " + std::to_string(victim)), std::string::npos) << error;
}

TEST(TensorParallel, IndivisibleShapesAreRejectedNamingBothNumbers) {
  try {
    LLMEngine engine(tp_config(3));
    FAIL() << "world_size 3 accepted for 8 heads";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("world_size 3"), std::string::npos) << msg;
    EXPECT_NE(msg.find("(8)"), std::string::npos) << msg;
  }
}

// Rank 0 in a child process (this binary, re-run with one test selected): it builds an engine,
// reports its workers' pids, then waits to be killed or signalled.
TEST(TensorParallelChild, HoldEngine) {
  const char* out = std::getenv("MINIVLLM_TP_CHILD_OUT");
  if (out == nullptr) GTEST_SKIP() << "run by the rank-0 death tests only";
  LLMEngine engine(tp_config(fault_world()));
  {
    std::ofstream f(std::string(out) + ".tmp");
    for (int p : engine.runners().worker_pids()) f << p << "\n";
  }
  std::filesystem::rename(std::string(out) + ".tmp", out);
  for (;;) engine.generate(std::vector<std::vector<int32_t>>{{1, 2, 3}}, greedy(50));
}

class RankZeroDeath : public ::testing::TestWithParam<int> {};

TEST_P(RankZeroDeath, TakesEveryWorkerWithIt) {
  const auto shm_before = shm_entries();
  const std::string out = ::testing::TempDir() + "tp_child_" + std::to_string(getpid()) + "_" + std::to_string(GetParam());
  std::filesystem::remove(out);
  std::string env_out = "MINIVLLM_TP_CHILD_OUT=" + out;
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e) env.push_back(*e);
  env.push_back(env_out.data());
  env.push_back(nullptr);
  std::string self = std::filesystem::read_symlink("/proc/self/exe").string(), filter =
                                                                                   "--gtest_filter=TensorParallelChild.HoldEngine";
  char* argv[] = {self.data(), filter.data(), nullptr};
  pid_t child = -1;
  ASSERT_EQ(posix_spawn(&child, self.c_str(), nullptr, nullptr, argv, env.data()), 0);
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (!std::filesystem::exists(out) && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(std::filesystem::exists(out)) << "the child engine did not start";
  std::vector<int> workers;
  std::ifstream f(out);
  for (int p; f >> p;) workers.push_back(p);
  ASSERT_EQ(workers.size(), static_cast<size_t>(fault_world() - 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // mid-generation
  kill(child, GetParam());
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == GetParam()) << "status " << status;
  EXPECT_TRUE(wait_gone(workers, std::chrono::seconds(5))) << "a worker outlived rank 0";
  EXPECT_EQ(shm_entries(), shm_before);
  std::filesystem::remove(out);
}

INSTANTIATE_TEST_SUITE_P(Signals, RankZeroDeath, ::testing::Values(SIGKILL, SIGTERM, SIGINT),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == SIGKILL ? std::string("SIGKILL")
                                  : info.param == SIGTERM ? std::string("SIGTERM")
                                                          : std::string("SIGINT");
                         });

}  // namespace
}  // namespace minivllm
