// ShmCommunicator across real processes: the test binary re-executes itself (/proc/self/exe,
// --gtest_filter=ShmWorker.Entry, the scenario in the environment) once per worker rank, with the
// memfd inherited, and plays rank 0 itself. World sizes 2 and 4; small slots so that messages go
// through many chunks, and the default slot for messages bigger than one. Every result is compared
// bit for bit with the sum in rank order; aborts (by a rank, from a thread, by rank 0's watchdog)
// and dead peers (found by the waiters themselves) must end pending calls within a second. Nothing
// may appear in /dev/shm, and no fd may stay open in rank 0.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/shm_communicator.h"
#include "common/check.h"
#include "common/dtype.h"

extern char** environ;

namespace minivllm {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// ---- deterministic per-rank data ----

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t bits_of(uint64_t seed, int rank, size_t i) {
  return splitmix(splitmix(seed * 131 + static_cast<uint64_t>(rank)) + i);
}

// Values over 16 binades, so that the order of the sum shows in the bits.
float f32_value(uint64_t seed, int rank, size_t i) {
  const uint64_t u = bits_of(seed, rank, i);
  const float m = static_cast<float>(u >> 40) / static_cast<float>(1 << 24) * 2.0f - 1.0f;
  return std::ldexp(m, static_cast<int>((u >> 8) & 15) - 8);
}
uint16_t bf16_value(uint64_t seed, int rank, size_t i) { return f32_to_bf16(f32_value(seed, rank, i)); }
int32_t i32_value(uint64_t seed, int rank, size_t i) { return static_cast<int32_t>(bits_of(seed, rank, i)); }

void check_bytes(const void* got, const void* want, size_t n, size_t esize, const std::string& what) {
  if (n == 0 || std::memcmp(got, want, n * esize) == 0) return;
  size_t i = 0;
  while (std::memcmp(static_cast<const char*>(got) + i * esize, static_cast<const char*>(want) + i * esize, esize) == 0)
    ++i;
  MINIVLLM_FAIL() << what << ": first differing element " << i << " of " << n;
}

template <typename T>
Tensor tensor_of(DType dtype, size_t n, const std::function<T(size_t)>& value) {
  Tensor t = host_tensor(dtype, {static_cast<int64_t>(n)});
  for (size_t i = 0; i < n; ++i) t.ptr<T>()[i] = value(i);
  return t;
}

// ---- scenarios: what every rank runs; they throw on failure ----

void all_reduce_cases(ShmCommunicator& comm, const std::vector<size_t>& sizes) {
  const int ws = comm.world_size(), me = comm.rank();
  for (size_t n : sizes) {
    const std::string at = "rank " + std::to_string(me) + " n " + std::to_string(n);
    {  // f32: ((x0 + x1) + x2) + x3 in fp32
      Tensor t = tensor_of<float>(DType::kF32, n, [&](size_t i) { return f32_value(n, me, i); });
      comm.all_reduce_sum(t);
      std::vector<float> want(n);
      for (size_t i = 0; i < n; ++i) {
        float acc = f32_value(n, 0, i);
        for (int r = 1; r < ws; ++r) acc += f32_value(n, r, i);
        want[i] = acc;
      }
      check_bytes(t.data(), want.data(), n, 4, "all_reduce_sum f32 " + at);
      // Bit-identical on every rank, seen from each rank.
      Tensor all = host_tensor(DType::kF32, {static_cast<int64_t>(n * ws)});
      comm.all_gather(t, all);
      for (int r = 0; r < ws; ++r)
        check_bytes(all.ptr<float>() + r * n, t.data(), n, 4, "sum of rank " + std::to_string(r) + " vs " + at);
    }
    {  // bf16: accumulated in fp32 in rank order, rounded once
      Tensor t = tensor_of<uint16_t>(DType::kBF16, n, [&](size_t i) { return bf16_value(n + 1, me, i); });
      comm.all_reduce_sum(t);
      std::vector<uint16_t> want(n);
      for (size_t i = 0; i < n; ++i) {
        float acc = bf16_to_f32(bf16_value(n + 1, 0, i));
        for (int r = 1; r < ws; ++r) acc += bf16_to_f32(bf16_value(n + 1, r, i));
        want[i] = f32_to_bf16(acc);
      }
      check_bytes(t.data(), want.data(), n, 2, "all_reduce_sum bf16 " + at);
    }
    {  // i32: wraps around
      Tensor t = tensor_of<int32_t>(DType::kI32, n, [&](size_t i) { return i32_value(n + 2, me, i); });
      comm.all_reduce_sum(t);
      std::vector<int32_t> want(n);
      for (size_t i = 0; i < n; ++i) {
        uint32_t acc = 0;
        for (int r = 0; r < ws; ++r) acc += static_cast<uint32_t>(i32_value(n + 2, r, i));
        want[i] = static_cast<int32_t>(acc);
      }
      check_bytes(t.data(), want.data(), n, 4, "all_reduce_sum i32 " + at);
    }
    {  // i32 min
      Tensor t = tensor_of<int32_t>(DType::kI32, n, [&](size_t i) { return i32_value(n + 3, me, i); });
      comm.all_reduce_min(t);
      std::vector<int32_t> want(n);
      for (size_t i = 0; i < n; ++i) {
        int32_t m = i32_value(n + 3, 0, i);
        for (int r = 1; r < ws; ++r) m = std::min(m, i32_value(n + 3, r, i));
        want[i] = m;
      }
      check_bytes(t.data(), want.data(), n, 4, "all_reduce_min i32 " + at);
    }
  }
}

void gather_cases(ShmCommunicator& comm, const std::vector<size_t>& sizes) {
  const int ws = comm.world_size(), me = comm.rank();
  for (size_t n : sizes) {
    const std::string at = "rank " + std::to_string(me) + " n " + std::to_string(n);
    Tensor in = tensor_of<float>(DType::kF32, n, [&](size_t i) { return f32_value(n + 4, me, i); });
    std::vector<float> want(n * ws);
    for (int r = 0; r < ws; ++r)
      for (size_t i = 0; i < n; ++i) want[r * n + i] = f32_value(n + 4, r, i);
    Tensor out = host_tensor(DType::kF32, {static_cast<int64_t>(n * ws)});
    std::fill(out.ptr<float>(), out.ptr<float>() + n * ws, -7.0f);
    comm.all_gather(in, out);
    check_bytes(out.data(), want.data(), n * ws, 4, "all_gather f32 " + at);

    // In place: in is out's block of this rank.
    Tensor out2 = host_tensor(DType::kF32, {static_cast<int64_t>(n * ws)});
    std::fill(out2.ptr<float>(), out2.ptr<float>() + n * ws, -7.0f);
    std::copy(in.ptr<float>(), in.ptr<float>() + n, out2.ptr<float>() + me * n);
    Tensor in2(out2.ptr<float>() + me * n, DType::kF32, {static_cast<int64_t>(n)});
    comm.all_gather(in2, out2);
    check_bytes(out2.data(), want.data(), n * ws, 4, "all_gather in place " + at);

    // Bytes: an odd count of u8.
    const size_t nb = n * 3 + 1;
    Tensor bin = tensor_of<uint8_t>(DType::kU8, nb, [&](size_t i) { return static_cast<uint8_t>(bits_of(n, me, i)); });
    Tensor bout = host_tensor(DType::kU8, {static_cast<int64_t>(nb * ws)});
    comm.all_gather(bin, bout);
    for (int r = 0; r < ws; ++r) {
      for (size_t i = 0; i < nb; ++i) {
        MINIVLLM_CHECK_EQ(int(bout.ptr<uint8_t>()[r * nb + i]), int(static_cast<uint8_t>(bits_of(n, r, i))))
            << "all_gather u8 " << at << " block " << r << " element " << i;
      }
    }

    // gather: only rank 0 receives; the others pass no output at all.
    Tensor gout;
    if (me == 0) {
      gout = host_tensor(DType::kF32, {static_cast<int64_t>(n * ws)});
      std::fill(gout.ptr<float>(), gout.ptr<float>() + n * ws, -7.0f);
    }
    comm.gather(in, gout);
    if (me == 0) check_bytes(gout.data(), want.data(), n * ws, 4, "gather " + at);
  }
}

void broadcast_cases(ShmCommunicator& comm, const std::vector<size_t>& sizes) {
  const int ws = comm.world_size(), me = comm.rank();
  for (int root : {ws - 1, 1, 0}) {
    for (size_t n : sizes) {
      const std::string at = "rank " + std::to_string(me) + " root " + std::to_string(root) + " n " + std::to_string(n);
      Tensor t = tensor_of<float>(DType::kF32, n, [&](size_t i) { return me == root ? f32_value(n + 5, root, i) : -1.0f; });
      comm.broadcast(t, root);
      std::vector<float> want(n);
      for (size_t i = 0; i < n; ++i) want[i] = f32_value(n + 5, root, i);
      check_bytes(t.data(), want.data(), n, 4, "broadcast " + at);
      Tensor b = tensor_of<uint16_t>(DType::kBF16, n, [&](size_t i) { return me == root ? bf16_value(n, root, i) : 0; });
      comm.broadcast(b, root);
      for (size_t i = 0; i < n; ++i) {
        MINIVLLM_CHECK_EQ(b.ptr<uint16_t>()[i], bf16_value(n, root, i)) << "broadcast bf16 " << at << " at " << i;
      }
    }
  }
}

void scenario_collectives(ShmCommunicator& comm) {
  const size_t c = comm.chunk_bytes() / 4;  // f32 elements of one chunk
  all_reduce_cases(comm, {0, 1, 3, 1000, 4097, c - 1, c, c + 1, 2 * c + 13});
  gather_cases(comm, {1, 7, 1000, c + 5});
  broadcast_cases(comm, {0, 5, 2 * c + 3});
  for (int i = 0; i < 200; ++i) comm.barrier();
  // Run to run: the same sum twice gives the same bits.
  const size_t n = 3 * c + 17;
  Tensor a = tensor_of<float>(DType::kF32, n, [&](size_t i) { return f32_value(99, comm.rank(), i); });
  Tensor b = tensor_of<float>(DType::kF32, n, [&](size_t i) { return f32_value(99, comm.rank(), i); });
  comm.all_reduce_sum(a);
  comm.barrier();
  comm.all_reduce_sum(b);
  check_bytes(a.data(), b.data(), n, 4, "repeated all_reduce_sum");
}

// Messages bigger than a default (8 MiB) slot, i.e. over two chunks of 4 MiB.
void scenario_big(ShmCommunicator& comm) {
  const size_t c = comm.chunk_bytes() / 4;
  all_reduce_cases(comm, {2 * c + 12345});
  gather_cases(comm, {c + 3});
  broadcast_cases(comm, {2 * c + 1});
}

template <typename F>
std::string expect_throw(F&& f, const char* what) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  throw Error(std::string(what) + " did not throw");
}

void expect_contains(const std::string& msg, const std::string& part) {
  MINIVLLM_CHECK(msg.find(part) != std::string::npos) << "message '" << msg << "' lacks '" << part << "'";
}

Tensor ones(size_t n) { return tensor_of<float>(DType::kF32, n, [](size_t) { return 1.0f; }); }

// The last rank aborts after 200 ms while the others wait in an all-reduce it never joins.
void scenario_abort_by_rank(ShmCommunicator& comm) {
  const int last = comm.world_size() - 1;
  comm.barrier();
  if (comm.rank() == last) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    comm.abort();
    const auto t0 = Clock::now();
    const std::string msg = expect_throw([&] { comm.barrier(); }, "barrier after abort()");
    // Generous bounds throughout: CI runs these on 2 busy cores; the engine promises 10 s.
    MINIVLLM_CHECK(seconds_since(t0) < 0.5) << "a call after abort() took " << seconds_since(t0) << " s";
    expect_contains(msg, "communicator aborted");
    return;
  }
  const auto t0 = Clock::now();
  Tensor t = ones(1000);
  const std::string msg = expect_throw([&] { comm.all_reduce_sum(t); }, "all_reduce_sum during abort");
  const double s = seconds_since(t0);
  MINIVLLM_CHECK(s < 1.2) << "pending all_reduce_sum threw only after " << s << " s";
  expect_contains(msg, "communicator aborted");
  expect_contains(msg, "abort() called on rank " + std::to_string(last));
  const auto t1 = Clock::now();
  expect_contains(expect_throw([&] { comm.barrier(); }, "a later call"), "communicator aborted");
  MINIVLLM_CHECK(seconds_since(t1) < 0.5) << "a call after the abort took " << seconds_since(t1) << " s";
}

// Rank 0 aborts from another thread while its own main thread waits in an all-reduce.
void scenario_abort_from_thread(ShmCommunicator& comm) {
  const int last = comm.world_size() - 1;
  comm.barrier();
  const auto t0 = Clock::now();
  if (comm.rank() == last) {  // never joins the all-reduce; its next call must throw at once
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    const auto t1 = Clock::now();
    expect_throw([&] { comm.barrier(); }, "barrier after abort");
    MINIVLLM_CHECK(seconds_since(t1) < 0.5) << "a call after abort took " << seconds_since(t1) << " s";
    return;
  }
  std::thread aborter;
  if (comm.rank() == 0) {
    aborter = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      comm.abort("the test's watchdog thread gave up");
    });
  }
  Tensor t = ones(4096);
  std::string msg;
  try {
    msg = expect_throw([&] { comm.all_reduce_sum(t); }, "all_reduce_sum during abort");
  } catch (...) {
    if (aborter.joinable()) aborter.join();
    throw;
  }
  if (aborter.joinable()) aborter.join();
  const double s = seconds_since(t0);
  MINIVLLM_CHECK(s > 0.25 && s < 1.3) << "pending all_reduce_sum threw after " << s << " s";
  expect_contains(msg, "the test's watchdog thread gave up");
}

// The last rank dies (SIGKILL) after joining; the others' pending all-reduce must throw within
// seconds (about 0.1-0.2 s when the machine is idle), found by the waiters' liveness check (dead_peer) or by rank 0's watchdog (watchdog_kill).
void scenario_peer_dies(ShmCommunicator& comm, bool by_watchdog) {
  const int last = comm.world_size() - 1;
  comm.barrier();
  if (comm.rank() == last) raise(SIGKILL);
  const auto t0 = Clock::now();
  Tensor t = ones(1000);
  const std::string msg = expect_throw([&] { comm.all_reduce_sum(t); }, "all_reduce_sum with a dead peer");
  const double s = seconds_since(t0);
  MINIVLLM_CHECK(s < 5.0) << "pending all_reduce_sum threw only after " << s << " s";
  expect_contains(msg, "communicator aborted");
  if (!by_watchdog) expect_contains(msg, "rank " + std::to_string(last) + " (pid");
}

// Rank 1 passes 12 elements where the others pass 10: every rank throws, naming both calls.
void scenario_mismatch(ShmCommunicator& comm) {
  comm.barrier();
  Tensor t = ones(comm.rank() == 1 ? 12 : 10);
  const std::string msg = expect_throw([&] { comm.all_reduce_sum(t); }, "mismatched all_reduce_sum");
  expect_contains(msg, "collective mismatch");
}

struct Latency {
  double median_us = 0, mean_us = 0, p90_us = 0;
};
Latency g_all_reduce_latency, g_barrier_latency, g_big_all_reduce_latency;

Latency measure(ShmCommunicator& comm, int iterations, const std::function<void()>& op) {
  for (int i = 0; i < iterations / 5; ++i) op();  // warm-up
  std::vector<double> us(iterations);
  for (int i = 0; i < iterations; ++i) {
    const auto t0 = Clock::now();
    op();
    us[i] = seconds_since(t0) * 1e6;
  }
  Latency l;
  for (double u : us) l.mean_us += u / iterations;
  std::sort(us.begin(), us.end());
  l.median_us = us[us.size() / 2];
  l.p90_us = us[us.size() * 9 / 10];
  return l;
}

// A decode-sized all-reduce (1024 f32 = 4 KiB), a bare barrier and a 1 MiB all-reduce.
void scenario_latency(ShmCommunicator& comm) {
  Tensor small = ones(1024);
  Tensor big = ones(256 * 1024);
  comm.barrier();
  g_all_reduce_latency = measure(comm, 5000, [&] { comm.all_reduce_sum(small); });
  g_barrier_latency = measure(comm, 5000, [&] { comm.barrier(); });
  g_big_all_reduce_latency = measure(comm, 100, [&] { comm.all_reduce_sum(big); });
}

const std::map<std::string, std::function<void(ShmCommunicator&)>>& scenarios() {
  static const std::map<std::string, std::function<void(ShmCommunicator&)>> m = {
      {"collectives", scenario_collectives},
      {"big", scenario_big},
      {"abort_by_rank", scenario_abort_by_rank},
      {"abort_from_thread", scenario_abort_from_thread},
      {"dead_peer", [](ShmCommunicator& c) { scenario_peer_dies(c, false); }},
      {"watchdog_kill", [](ShmCommunicator& c) { scenario_peer_dies(c, true); }},
      {"mismatch", scenario_mismatch},
      {"latency", scenario_latency},
  };
  return m;
}

// One rank of a scenario, in the parent (rank 0) or a worker. "die_before_join": the last rank is
// killed before it joins; the others' constructors must throw once rank 0's watchdog aborts.
void run_rank(const std::string& scenario, int rank, int ws, const std::string& bootstrap, int threads) {
  if (scenario == "die_before_join") {
    if (rank == ws - 1) raise(SIGKILL);
    const auto t0 = Clock::now();
    const std::string msg = expect_throw([&] { ShmCommunicator comm(rank, ws, bootstrap, threads); }, "join");
    MINIVLLM_CHECK(seconds_since(t0) < 5.0) << "the join threw only after " << seconds_since(t0) << " s";
    expect_contains(msg, "communicator aborted");
    return;
  }
  auto it = scenarios().find(scenario);
  MINIVLLM_CHECK(it != scenarios().end()) << "unknown scenario " << scenario;
  ShmCommunicator comm(rank, ws, bootstrap, threads);
  try {
    it->second(comm);
  } catch (const std::exception& e) {
    comm.abort("rank " + std::to_string(rank) + " failed: " + e.what());
    throw;
  }
}

// ---- the harness ----

std::set<std::string> list_dir(const char* path) {
  std::set<std::string> names;
  if (DIR* d = opendir(path)) {
    while (dirent* e = readdir(d)) names.insert(e->d_name);
    closedir(d);
  }
  return names;
}

pid_t spawn_worker(const std::string& scenario, int rank, int ws, const std::string& bootstrap, int threads) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    if (kv.rfind("GTEST_", 0) == 0 || kv.rfind("MINIVLLM_COMM_TEST_", 0) == 0) continue;
    env.push_back(kv);
  }
  env.push_back("MINIVLLM_COMM_TEST_SCENARIO=" + scenario);
  env.push_back("MINIVLLM_COMM_TEST_RANK=" + std::to_string(rank));
  env.push_back("MINIVLLM_COMM_TEST_WORLD=" + std::to_string(ws));
  env.push_back("MINIVLLM_COMM_TEST_BOOTSTRAP=" + bootstrap);
  env.push_back("MINIVLLM_COMM_TEST_THREADS=" + std::to_string(threads));
  std::vector<char*> envp;
  for (std::string& kv : env) envp.push_back(kv.data());
  envp.push_back(nullptr);
  std::string exe = "/proc/self/exe", filter = "--gtest_filter=ShmWorker.Entry";
  char* argv[] = {exe.data(), filter.data(), nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);  // gtest's chatter
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  MINIVLLM_CHECK_EQ(rc, 0) << "posix_spawn: " << std::strerror(rc);
  return pid;
}

struct WorldSpec {
  std::string scenario;
  int world_size = 2;
  size_t slot_bytes = 64 << 10;
  int threads = 1;
  bool watchdog_aborts = true;  // rank 0 aborts the segment when a worker exits other than cleanly
  bool last_rank_dies = false;  // the last rank is expected to die of SIGKILL
};

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("signal ") + strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

void run_world(const WorldSpec& spec) {
  const int ws = spec.world_size;
  const std::set<std::string> shm_before = list_dir("/dev/shm");
  const size_t fds_before = list_dir("/proc/self/fd").size();
  const std::string bootstrap = make_cpu_comm_bootstrap(ws, spec.slot_bytes);
  std::vector<pid_t> pids(ws, -1);
  for (int r = 1; r < ws; ++r) pids[r] = spawn_worker(spec.scenario, r, ws, bootstrap, spec.threads);

  // Rank 0's watchdog: reaps the workers (not before rank 0 is done when the waiters themselves
  // must find the dead peer, which stays a zombie meanwhile), aborts on a failed worker, and
  // kills everything after 120 s.
  std::vector<int> status(ws, 0);
  std::atomic<bool> rank0_done{false};
  std::thread watchdog([&] {
    const auto t0 = Clock::now();
    std::vector<bool> reaped(ws, false);
    reaped[0] = true;
    bool killed = false;
    while (std::count(reaped.begin(), reaped.end(), false) > 0) {
      if (spec.watchdog_aborts || rank0_done.load()) {
        for (int r = 1; r < ws; ++r) {
          if (reaped[r] || waitpid(pids[r], &status[r], WNOHANG) != pids[r]) continue;
          reaped[r] = true;
          if (spec.watchdog_aborts && !(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0))
            abort_cpu_comm_bootstrap(bootstrap, "worker rank " + std::to_string(r) + " exited (" +
                                                    describe_status(status[r]) + ")");
        }
      }
      if (!killed && seconds_since(t0) > 120) {
        killed = true;
        for (int r = 1; r < ws; ++r)
          if (!reaped[r]) kill(pids[r], SIGKILL);
        abort_cpu_comm_bootstrap(bootstrap, "test deadline");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });

  std::string error;
  try {
    run_rank(spec.scenario, 0, ws, bootstrap, spec.threads);
  } catch (const std::exception& e) {
    error = e.what();
    abort_cpu_comm_bootstrap(bootstrap, "rank 0 failed");
  }
  rank0_done.store(true);
  watchdog.join();
  release_cpu_comm_bootstrap(bootstrap);  // no-op unless rank 0 never made its communicator

  EXPECT_EQ(error, "") << "rank 0";
  for (int r = 1; r < ws; ++r) {
    if (spec.last_rank_dies && r == ws - 1) {
      EXPECT_TRUE(WIFSIGNALED(status[r]) && WTERMSIG(status[r]) == SIGKILL)
          << "rank " << r << ": " << describe_status(status[r]);
    } else {
      EXPECT_TRUE(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0)
          << "rank " << r << ": " << describe_status(status[r]) << " (its stderr says why)";
    }
  }
  std::set<std::string> shm_new;
  for (const std::string& name : list_dir("/dev/shm"))
    if (!shm_before.count(name)) shm_new.insert(name);
  EXPECT_TRUE(shm_new.empty()) << "new in /dev/shm: " << *shm_new.begin();
  EXPECT_EQ(list_dir("/proc/self/fd").size(), fds_before) << "rank 0 leaks file descriptors";
}

// The workers' entry point; skipped when the binary runs normally.
TEST(ShmWorker, Entry) {
  const char* scenario = std::getenv("MINIVLLM_COMM_TEST_SCENARIO");
  if (scenario == nullptr) GTEST_SKIP() << "entry point of the worker processes of the ShmCommunicator tests";
  const int rank = std::atoi(std::getenv("MINIVLLM_COMM_TEST_RANK"));
  int code = 0;
  try {
    run_rank(scenario, rank, std::atoi(std::getenv("MINIVLLM_COMM_TEST_WORLD")),
             std::getenv("MINIVLLM_COMM_TEST_BOOTSTRAP"), std::atoi(std::getenv("MINIVLLM_COMM_TEST_THREADS")));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[comm worker rank %d, scenario %s] %s\n", rank, scenario, e.what());
    code = 1;
  }
  std::fflush(stderr);
  _exit(code);
}

class ShmWorld : public testing::TestWithParam<int> {};

TEST_P(ShmWorld, Collectives) { run_world({.scenario = "collectives", .world_size = GetParam()}); }

TEST_P(ShmWorld, CollectivesWithThreads) {
  run_world({.scenario = "collectives", .world_size = GetParam(), .slot_bytes = 2 << 20, .threads = 2});
}

TEST_P(ShmWorld, AbortByRank) { run_world({.scenario = "abort_by_rank", .world_size = GetParam()}); }

TEST_P(ShmWorld, AbortFromThread) { run_world({.scenario = "abort_from_thread", .world_size = GetParam()}); }

TEST_P(ShmWorld, DeadPeerFoundByWaiters) {
  run_world({.scenario = "dead_peer", .world_size = GetParam(), .watchdog_aborts = false, .last_rank_dies = true});
}

TEST_P(ShmWorld, DeadPeerAbortedByWatchdog) {
  run_world({.scenario = "watchdog_kill", .world_size = GetParam(), .last_rank_dies = true});
}

TEST_P(ShmWorld, DeathBeforeJoin) {
  run_world({.scenario = "die_before_join", .world_size = GetParam(), .last_rank_dies = true});
}

TEST_P(ShmWorld, Mismatch) { run_world({.scenario = "mismatch", .world_size = GetParam()}); }

INSTANTIATE_TEST_SUITE_P(WorldSizes, ShmWorld, testing::Values(2, 4),
                         [](const testing::TestParamInfo<int>& info) { return "ws" + std::to_string(info.param); });

TEST(ShmCommunicator, MessagesBiggerThanTheDefaultSlot) {
  run_world({.scenario = "big", .world_size = 2, .slot_bytes = kShmDefaultSlotBytes});
}

TEST(ShmCommunicator, Latency) {
  for (int ws : {2, 4}) {
    run_world({.scenario = "latency", .world_size = ws});
    std::printf("world %d: all_reduce_sum 4 KiB median %.1f us (mean %.1f, p90 %.1f); barrier median %.1f us; "
                "all_reduce_sum 1 MiB median %.0f us\n",
                ws, g_all_reduce_latency.median_us, g_all_reduce_latency.mean_us, g_all_reduce_latency.p90_us,
                g_barrier_latency.median_us, g_big_all_reduce_latency.median_us);
    // Loose: a loaded CI host may be slow, yet never sleeping-slow when both ranks are ready.
    if (ws == 2) {
      EXPECT_LT(g_all_reduce_latency.median_us, 200.0);
    }
  }
}

// Ranks as threads of the creating process (allowed there): the factory of CpuBackend and the
// collectives without another process.
TEST(ShmCommunicator, ThreadsOfTheCreatingProcess) {
  const size_t fds_before = list_dir("/proc/self/fd").size();
  for (int ws : {2, 3}) {
    const std::string bootstrap = make_cpu_comm_bootstrap(ws, 64 << 10);
    std::vector<std::string> errors(ws);
    std::vector<std::thread> threads;
    for (int r = 0; r < ws; ++r) {
      threads.emplace_back([&, r] {
        try {
          CpuBackend backend(1);
          std::unique_ptr<Communicator> comm = backend.create_communicator(r, ws, bootstrap);
          auto* shm = dynamic_cast<ShmCommunicator*>(comm.get());
          MINIVLLM_CHECK(shm != nullptr) << "create_communicator of world " << ws << " is no ShmCommunicator";
          MINIVLLM_CHECK(comm->rank() == r && comm->world_size() == ws) << "rank / world size";
          try {
            scenario_collectives(*shm);
          } catch (const std::exception& e) {
            shm->abort(e.what());
            throw;
          }
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
      });
    }
    for (std::thread& t : threads) t.join();
    for (int r = 0; r < ws; ++r) EXPECT_EQ(errors[r], "") << "world " << ws << " rank " << r;
  }
  EXPECT_EQ(list_dir("/proc/self/fd").size(), fds_before) << "fds leaked";
}

TEST(ShmCommunicator, Bootstrap) {
  const std::string a = make_cpu_comm_bootstrap(2), b = make_cpu_comm_bootstrap(3, 1 << 16);
  EXPECT_NE(a, b);
  int fd_a = -1, ws_a = 0, fd_b = -1, ws_b = 0;
  ASSERT_EQ(std::sscanf(a.c_str(), "memfd:%d:%d:", &fd_a, &ws_a), 2) << a;
  ASSERT_EQ(std::sscanf(b.c_str(), "memfd:%d:%d:", &fd_b, &ws_b), 2) << b;
  EXPECT_EQ(ws_a, 2);
  EXPECT_EQ(ws_b, 3);
  EXPECT_NE(fd_a, fd_b);
  for (int fd : {fd_a, fd_b}) {
    const int flags = fcntl(fd, F_GETFD);
    ASSERT_GE(flags, 0) << "fd " << fd << " is not open";
    EXPECT_EQ(flags & FD_CLOEXEC, 0) << "the workers must inherit fd " << fd;
    char link[256] = {};
    ASSERT_GT(readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), link, sizeof(link) - 1), 0);
    EXPECT_EQ(std::string(link).rfind("/memfd:", 0), 0u) << link;
  }
  // Bad bootstraps and arguments throw before touching anything.
  EXPECT_THROW(ShmCommunicator(0, 2, "shm:3:2:0", 1), Error);
  EXPECT_THROW(ShmCommunicator(0, 2, "memfd:x:2:0", 1), Error);
  EXPECT_THROW(ShmCommunicator(0, 3, a, 1), Error);  // world size differs
  EXPECT_THROW(ShmCommunicator(2, 2, a, 1), Error);  // rank out of range
  EXPECT_THROW(ShmCommunicator(0, 2, "memfd:987:2:0123456789abcdef", 1), Error);  // fd not open
  EXPECT_THROW(make_cpu_comm_bootstrap(1), Error);
  EXPECT_THROW(make_cpu_comm_bootstrap(65), Error);

  EXPECT_TRUE(abort_cpu_comm_bootstrap(a, "test"));
  release_cpu_comm_bootstrap(a);
  release_cpu_comm_bootstrap(a);  // idempotent
  release_cpu_comm_bootstrap(b);
  EXPECT_FALSE(abort_cpu_comm_bootstrap(a, "test"));
  EXPECT_EQ(fcntl(fd_a, F_GETFD), -1);
  EXPECT_EQ(fcntl(fd_b, F_GETFD), -1);
}

// A segment aborted before anyone joined: the constructor throws at once with the reason.
TEST(ShmCommunicator, JoinOfAnAbortedSegmentThrows) {
  const std::string bs = make_cpu_comm_bootstrap(2, 1 << 16);
  ASSERT_TRUE(abort_cpu_comm_bootstrap(bs, "worker failed to load"));
  try {
    ShmCommunicator comm(0, 2, bs, 1);
    ADD_FAILURE() << "joined an aborted segment";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("worker failed to load"), std::string::npos) << e.what();
  }
  release_cpu_comm_bootstrap(bs);
}

}  // namespace
}  // namespace minivllm
