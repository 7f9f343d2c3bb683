// Tensor parallelism on CUDA: NcclCommunicator's collectives (ranks as threads of this process, one
// GPU each, and as two processes: this one and a child running CudaCommWorker.Rank), the one-shot
// IPC all-reduce and its NCCL fallback, collectives captured in a CUDA graph, abort() waking a
// pending call, init abort / timeout, and CudaBackend::copy_into_columns. Multi-GPU tests skip
// unless at least 2 GPUs are visible.
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/nccl_communicator.h"
#include "common/check.h"
#include "cuda_test_util.h"
#include "scoped_env.h"

extern char** environ;

namespace minivllm::cuda_test {
namespace {

using Clock = std::chrono::steady_clock;

#define MINIVLLM_SKIP_WITHOUT_2_GPUS() \
  if (::minivllm::cuda_device_count() < 2) GTEST_SKIP() << "needs 2 GPUs, " << ::minivllm::cuda_device_count() << " visible"

// Communicators read their knobs when constructed.
using test::ScopedEnv;

// Rank q's input of a collective: bf16-exact normal values, the same in every process.
std::vector<float> rank_values(int q, int64_t n, uint32_t salt) {
  std::mt19937 rng(1000u * salt + static_cast<uint32_t>(q));
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = bf16_to_f32(f32_to_bf16(d(rng)));
  return v;
}

void upload_values(Backend& b, const Tensor& t, const std::vector<float>& v) {
  ASSERT_EQ(static_cast<int64_t>(v.size()), t.numel());
  if (t.dtype() == DType::kF32) {
    b.copy_from_host(t, v.data());
  } else if (t.dtype() == DType::kBF16) {
    std::vector<uint16_t> bf(v.size());
    convert_from_f32(v.data(), DType::kBF16, bf.data(), bf.size());
    b.copy_from_host(t, bf.data());
    b.synchronize();  // bf lives on this stack frame
    return;
  } else {
    std::vector<int32_t> iv(v.size());
    for (size_t i = 0; i < v.size(); ++i) iv[i] = static_cast<int32_t>(v[i]);
    b.copy_from_host(t, iv.data());
    b.synchronize();
    return;
  }
  b.synchronize();
}

std::vector<uint8_t> download_raw(Backend& b, const Tensor& t) {
  std::vector<uint8_t> raw(t.nbytes());
  b.copy_to_host(raw.data(), t);
  return raw;
}

// Checks t (after all_reduce_sum of every rank's rank_values(q, n, salt), times `scale`) against
// the host sum, and that every rank holds the same bits (all-gathered).
void check_sum(Backend& b, Communicator& c, const Tensor& t, uint32_t salt, const std::string& what,
               double scale = 1.0) {
  const int world = c.world_size();
  const int64_t n = t.numel();
  std::vector<double> ref(static_cast<size_t>(n), 0.0), mag(static_cast<size_t>(n), 0.0);
  for (int q = 0; q < world; ++q) {
    const std::vector<float> v = rank_values(q, n, salt);
    for (int64_t i = 0; i < n; ++i) {
      ref[i] += scale * v[i];
      mag[i] += scale * std::abs(v[i]);
    }
  }
  const std::vector<float> got = download(b, t);
  const double rel = t.dtype() == DType::kBF16 ? 1.0 / 64 : 1e-5;
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!(std::abs(got[i] - ref[i]) <= rel * mag[i] + 1e-6)) {
      if (bad++ < 5) ADD_FAILURE() << what << " rank " << c.rank() << " [" << i << "]: " << got[i] << " vs " << ref[i];
    }
  }
  EXPECT_EQ(bad, 0) << what << " rank " << c.rank() << ": " << bad << " of " << n << " elements off";
  // Identical on every rank.
  Tensor all = b.empty(t.dtype(), {world * n});
  c.all_gather(t.view({n}), all);
  const std::vector<uint8_t> mine = download_raw(b, t), gathered = download_raw(b, all);
  for (int q = 0; q < world; ++q) {
    EXPECT_EQ(std::memcmp(gathered.data() + q * mine.size(), mine.data(), mine.size()), 0)
        << what << ": rank " << q << " differs from rank " << c.rank();
  }
}

// The collectives every rank runs (threads or processes): sums on both paths, min, gathers,
// broadcast, barrier, and a captured graph of all-reduces replayed on new inputs.
void comm_script(Backend& b, Communicator& c) {
  const int world = c.world_size(), rank = c.rank();
  uint32_t salt = 1;
  // all_reduce_sum: small (one-shot IPC kernel when enabled), odd (NCCL: not a multiple of 16
  // bytes), large (NCCL: f32 2.5M is over the one-shot limit, 8 MiB for 2 ranks); bf16 and f32.
  for (DType dt : {DType::kBF16, DType::kF32}) {
    for (int64_t n : {int64_t{8}, int64_t{1024}, int64_t{5 * 4096}, int64_t{1001}, int64_t{65536}, int64_t{300000},
                      int64_t{2500000}}) {
      Tensor t = b.empty(dt, {n});
      upload_values(b, t, rank_values(rank, n, salt));
      c.all_reduce_sum(t);
      check_sum(b, c, t, salt, std::string("all_reduce_sum ") + dtype_name(dt) + " n=" + std::to_string(n));
      ++salt;
    }
  }
  // all_reduce_min (i32).
  {
    Tensor t = b.empty(DType::kI32, {5});
    std::vector<int32_t> v = {100 + rank, 7 * (world - rank), -rank, 3, rank == world - 1 ? -50 : 50};
    b.copy_from_host(t, v.data());
    c.all_reduce_min(t);
    std::vector<int32_t> got(5);
    b.copy_to_host(got.data(), t);
    EXPECT_EQ(got, (std::vector<int32_t>{100, 7, -(world - 1), 3, -50})) << "all_reduce_min rank " << rank;
  }
  // all_reduce_sum (i32): exact.
  {
    Tensor t = b.empty(DType::kI32, {3});
    std::vector<int32_t> v = {rank, 1, 1000 * rank};
    b.copy_from_host(t, v.data());
    c.all_reduce_sum(t);
    std::vector<int32_t> got(3);
    b.copy_to_host(got.data(), t);
    const int tri = world * (world - 1) / 2;
    EXPECT_EQ(got, (std::vector<int32_t>{tri, world, 1000 * tri})) << "all_reduce_sum i32 rank " << rank;
  }
  // all_gather and gather (f32, bf16, i32): odd sizes (NCCL), whole 16-byte vectors (the one-shot
  // kernel's gather when enabled: the vocabulary-parallel sampler's stats and picks).
  for (auto [dt, n] : {std::pair{DType::kF32, int64_t{777}}, std::pair{DType::kBF16, int64_t{777}},
                       std::pair{DType::kF32, int64_t{1024}}, std::pair{DType::kI32, int64_t{260}},
                       std::pair{DType::kBF16, int64_t{40000}}}) {
    Tensor in = b.empty(dt, {n});
    upload_values(b, in, rank_values(rank, n, salt));
    Tensor out = b.empty(dt, {world * n});
    b.fill_bytes(out, 0xFF);
    c.all_gather(in, out);
    std::vector<float> expect;
    for (int q = 0; q < world; ++q) {
      std::vector<float> v = rank_values(q, n, salt);
      if (dt == DType::kI32) {
        for (float& x : v) x = static_cast<float>(static_cast<int32_t>(x));  // as upload_values stores them
      }
      expect.insert(expect.end(), v.begin(), v.end());
    }
    auto as_floats = [&](const Tensor& t) {
      if (t.dtype() != DType::kI32) return download(b, t);
      std::vector<int32_t> iv(static_cast<size_t>(t.numel()));
      b.copy_to_host(iv.data(), t);
      return std::vector<float>(iv.begin(), iv.end());
    };
    EXPECT_EQ(as_floats(out), expect) << "all_gather " << dtype_name(dt) << " rank " << rank;
    Tensor gout = b.empty(dt, {world * n});
    b.fill_bytes(gout, 0xFF);
    c.gather(in, gout);
    if (rank == 0) {
      EXPECT_EQ(as_floats(gout), expect) << "gather " << dtype_name(dt);
    }
    ++salt;
  }
  // broadcast from the first and the last rank.
  for (int root : {0, world - 1}) {
    const int64_t n = 4099;
    Tensor t = b.empty(DType::kF32, {n});
    upload_values(b, t, rank_values(rank, n, salt));
    c.broadcast(t, root);
    EXPECT_EQ(download(b, t), rank_values(root, n, salt)) << "broadcast root " << root << " rank " << rank;
    ++salt;
  }
  for (int i = 0; i < 3; ++i) c.barrier();

  // A graph holding a small (one-shot) and a large (NCCL) all-reduce, replayed on new inputs,
  // with eager all-reduces between replays (the one-shot kernel's epochs advance in both).
  Tensor small = b.empty(DType::kBF16, {4, 1024});
  Tensor large = b.empty(DType::kBF16, {5000000});  // 10 MB: NCCL
  Tensor eager = b.empty(DType::kBF16, {2048});
  auto body = [&] {
    c.all_reduce_sum(small);
    c.all_reduce_sum(large);
  };
  upload_values(b, small, rank_values(rank, small.numel(), salt));
  upload_values(b, large, rank_values(rank, large.numel(), salt + 1));
  body();  // eager warm-up
  const int graph = b.capture_graph(body);
  ASSERT_GE(graph, 0);
  for (int iter = 0; iter < 4; ++iter) {
    salt += 2;
    upload_values(b, small, rank_values(rank, small.numel(), salt));
    upload_values(b, large, rank_values(rank, large.numel(), salt + 1));
    b.replay_graph(graph);
    check_sum(b, c, small, salt, "graph replay " + std::to_string(iter) + " small");
    check_sum(b, c, large, salt + 1, "graph replay " + std::to_string(iter) + " large");
    upload_values(b, eager, rank_values(rank, eager.numel(), salt + 100));
    c.all_reduce_sum(eager);
    check_sum(b, c, eager, salt + 100, "eager between replays " + std::to_string(iter));
  }
  // Replays back to back (no host sync between them): after the first, every rank holds the same
  // sum S, and each further replay multiplies it by world (exact in bf16 for world 2 and 4).
  salt += 2;
  upload_values(b, small, rank_values(rank, small.numel(), salt));
  upload_values(b, large, rank_values(rank, large.numel(), salt + 1));
  const int replays = 6;
  for (int i = 0; i < replays; ++i) b.replay_graph(graph);
  const double scale = std::pow(static_cast<double>(world), replays - 1);
  check_sum(b, c, small, salt, "back-to-back replays small", scale);
  check_sum(b, c, large, salt + 1, "back-to-back replays large", scale);
}

// Runs fn(rank, backend, communicator) on `world` threads, one GPU each. A rank that throws aborts
// every communicator of the process, so the others fail instead of waiting forever.
std::vector<std::string> run_ranks(int world, const std::function<void(int, Backend&, Communicator&)>& fn) {
  const std::string boot = make_cuda_comm_bootstrap();
  std::vector<std::string> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        std::unique_ptr<Backend> b = make_cuda_backend(r);
        std::unique_ptr<Communicator> c = b->create_communicator(r, world, boot);
        fn(r, *b, *c);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
        abort_cuda_comm_bootstrap(boot, std::string("rank ") + std::to_string(r) + " failed");
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return errors;
}

void expect_no_errors(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(CudaComm, CopyIntoColumns) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  auto gpu = make_cuda_backend(0);
  std::mt19937 rng(7);
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const int64_t rows = 5, cols = 37, part = 11, start = 19;
    Tensor dst = gpu->empty(dt, {rows, cols});
    Tensor src = gpu->empty(dt, {rows, part});
    const Tensor src_vals = random_values({rows, part}, rng);
    std::vector<float> sv(src_vals.ptr<float>(), src_vals.ptr<float>() + src_vals.numel());
    upload_values(*gpu, src, sv);
    gpu->fill_bytes(dst, 0);
    gpu->copy_into_columns(dst, start, src);
    std::vector<float> got = download(*gpu, dst);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < cols; ++j) {
        const float expect = (j >= start && j < start + part) ? sv[r * part + (j - start)] : 0.0f;
        EXPECT_EQ(got[r * cols + j], expect) << dtype_name(dt) << " [" << r << ", " << j << "]";
      }
    }
    // Captured in a graph, replayed on new source values.
    const int graph = gpu->capture_graph([&] { gpu->copy_into_columns(dst, 0, src); });
    const Tensor src2 = random_values({rows, part}, rng);
    std::vector<float> sv2(src2.ptr<float>(), src2.ptr<float>() + src2.numel());
    upload_values(*gpu, src, sv2);
    gpu->replay_graph(graph);
    got = download(*gpu, dst);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < part; ++j) EXPECT_EQ(got[r * cols + j], sv2[r * part + j]) << "replay [" << r << ", " << j << "]";
      for (int64_t j = start; j < start + part; ++j) EXPECT_EQ(got[r * cols + j], sv[r * part + (j - start)]);
    }
  }
  Tensor dst = gpu->empty(DType::kF32, {4, 10});
  EXPECT_THROW(gpu->copy_into_columns(dst, 8, gpu->empty(DType::kF32, {4, 3})), Error);   // past the end
  EXPECT_THROW(gpu->copy_into_columns(dst, 0, gpu->empty(DType::kF32, {3, 3})), Error);   // rows differ
  EXPECT_THROW(gpu->copy_into_columns(dst, 0, gpu->empty(DType::kBF16, {4, 3})), Error);  // dtype differs
  EXPECT_THROW(gpu->copy_into_columns(dst, -1, gpu->empty(DType::kF32, {4, 3})), Error);
}

TEST(CudaComm, WorldOneIsSingleRank) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  auto gpu = make_cuda_backend(0);
  auto comm = gpu->create_communicator(0, 1, "");
  EXPECT_EQ(comm->world_size(), 1);
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_THROW(gpu->create_communicator(2, 2, make_cuda_comm_bootstrap()), Error);
  EXPECT_THROW(gpu->create_communicator(0, 2, "not hex"), Error);
}

TEST(CudaComm, BootstrapIsHex) {
  const std::string a = make_cuda_comm_bootstrap(), b = make_cuda_comm_bootstrap();
  EXPECT_EQ(a.size(), 256u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a, b);
}

// Rank 0 alone: its peer never comes. abort (through the bootstrap: no pointer to a communicator
// under construction exists) must end the constructor, and so must the timeout. A bootstrap
// aborted before its communicator is made fails the constructor at once.
TEST(CudaComm, InitAbortAndTimeout) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  auto gpu = make_cuda_backend(0);
  {
    const std::string boot = make_cuda_comm_bootstrap();
    std::atomic<bool> found{false};
    std::thread aborter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      found = abort_cuda_comm_bootstrap(boot, "test abort");
    });
    const Clock::time_point start = Clock::now();
    try {
      gpu->create_communicator(0, 2, boot);
      ADD_FAILURE() << "init without the peer succeeded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("test abort"), std::string::npos) << e.what();
    }
    aborter.join();
    EXPECT_TRUE(found.load());
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 30.0);
  }
  {
    const std::string boot = make_cuda_comm_bootstrap();
    EXPECT_FALSE(abort_cuda_comm_bootstrap(boot, "aborted early"));
    try {
      gpu->create_communicator(0, 2, boot);
      ADD_FAILURE() << "init of an aborted bootstrap succeeded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("aborted early"), std::string::npos) << e.what();
    }
  }
  {
    ScopedEnv timeout("MINIVLLM_NCCL_TIMEOUT_S", "1");
    const Clock::time_point start = Clock::now();
    try {
      gpu->create_communicator(0, 2, make_cuda_comm_bootstrap());
      ADD_FAILURE() << "init without the peer succeeded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("MINIVLLM_NCCL_TIMEOUT_S"), std::string::npos) << e.what();
    }
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 30.0);
  }
  gpu->synchronize();  // the backend is still usable
}

TEST(CudaComm, CollectivesThreads) {
  MINIVLLM_SKIP_WITHOUT_2_GPUS();
  const int world = std::min(cuda_device_count(), 8);
  expect_no_errors(run_ranks(world, [](int, Backend& b, Communicator& c) {
    auto* nccl = dynamic_cast<cuda::NcclCommunicator*>(&c);
    ASSERT_NE(nccl, nullptr);
    if (!nccl->custom_all_reduce_enabled()) std::printf("note: one-shot all-reduce not enabled (no peer access?)\n");
    comm_script(b, c);
  }));
}

// all_reduce_sum_into (the row-parallel linear's all-reduce fused with the residual add) against
// the unfused path on the same inputs: all_reduce_sum, then add_to_residual. Bit for bit, with fp32
// and with bf16 partial sums (an fp32 residual either way), on the push, pull and Lamport kernels.
TEST(CudaComm, AllReduceSumIntoEqualsUnfused) {
  MINIVLLM_SKIP_WITHOUT_2_GPUS();
  for (const char* kernel_name : {"push", "pull", "lamport", "two-shot"}) {
    const std::string k = kernel_name;
    ScopedEnv pull_env("MINIVLLM_CUSTOM_AR_PULL", k == "pull" ? "1" : "0");
    ScopedEnv lamport_env("MINIVLLM_CUSTOM_AR_LAMPORT", k == "lamport" || k == "two-shot" ? "1" : "0");
    // two-shot: every size here past the one-shot limit.
    ScopedEnv one_shot_env("MINIVLLM_CUSTOM_AR_MAX_BYTES", k == "two-shot" ? "16" : nullptr);
    ScopedEnv two_shot_env("MINIVLLM_CUSTOM_AR_TWO_SHOT_BYTES", k == "two-shot" ? "16777216" : nullptr);
    expect_no_errors(run_ranks(2, [kernel_name](int rank, Backend& b, Communicator& c) {
      for (DType dt : {DType::kF32, DType::kBF16}) {
        for (int64_t n : {int64_t{1024}, int64_t{5 * 4096 + 8}, int64_t{262144}, int64_t{1 << 21}}) {
          SCOPED_TRACE(std::string(dtype_name(dt)) + " n=" + std::to_string(n) + " kernel " + kernel_name);
          Tensor partial = b.empty(dt, {n}), fused = b.empty(DType::kF32, {n});
          Tensor partial2 = b.empty(dt, {n}), unfused = b.empty(DType::kF32, {n});
          const std::vector<float> residual = rank_values(7, n, 42);  // the same on both ranks
          upload_values(b, partial, rank_values(rank, n, 43));
          upload_values(b, partial2, rank_values(rank, n, 43));
          upload_values(b, fused, residual);
          upload_values(b, unfused, residual);
          ASSERT_TRUE(c.all_reduce_sum_into(partial, fused)) << "the one-shot path should fuse " << n << " elements";
          c.all_reduce_sum(partial2);
          b.add_to_residual(partial2, unfused);
          const std::vector<uint8_t> a = download_raw(b, fused), u = download_raw(b, unfused);
          EXPECT_EQ(std::memcmp(a.data(), u.data(), a.size()), 0) << "rank " << rank;
          const std::vector<float> got = download(b, fused);
          double worst = 0;
          const std::vector<float> p0 = rank_values(0, n, 43), p1 = rank_values(1, n, 43);
          for (int64_t i = 0; i < n; ++i) {
            worst = std::max(worst, static_cast<double>(std::abs(got[i] - (residual[i] + (p0[i] + p1[i])))));
          }
          EXPECT_LT(worst, dt == DType::kF32 ? 1e-5 : 2e-2) << "rank " << rank;
        }
      }
    }));
  }
}

// The earlier pull kernel (MINIVLLM_CUSTOM_AR_PULL=1, a flag kernel), kept for comparison: the same script.
TEST(CudaComm, CollectivesThreadsPull) {
  MINIVLLM_SKIP_WITHOUT_2_GPUS();
  ScopedEnv pull("MINIVLLM_CUSTOM_AR_PULL", "1");
  ScopedEnv flag("MINIVLLM_CUSTOM_AR_LAMPORT", "0");
  expect_no_errors(run_ranks(2, [](int, Backend& b, Communicator& c) { comm_script(b, c); }));
}

// all_reduce_sum_into_norm (the row-parallel all-reduce with the next block's RMSNorm in the
// Lamport kernel) against the unfused pair, bit for bit: the residual (the same add) and the
// normed rows (rms_norm's order of sums). Row widths 256 to 2,048, 1 to 2,048 rows (8 MiB: several
// tiles a block), the output apart from and in place of the partial sums (as the Transformer
// calls it); fp32 partials, 4,096-wide rows, rows of 1,000 and the flag kernel refused.
TEST(CudaComm, AllReduceSumIntoNormMatchesUnfused) {
  MINIVLLM_SKIP_WITHOUT_2_GPUS();
  expect_no_errors(run_ranks(2, [](int rank, Backend& b, Communicator& c) {
    for (int64_t h : {int64_t{256}, int64_t{1024}, int64_t{2048}}) {
      for (int64_t rows : {int64_t{1}, int64_t{7}, int64_t{256}, int64_t{300}, int64_t{2048}}) {
        if (rows * h * 2 > (int64_t{8} << 20)) continue;
        for (bool in_place : {false, true}) {
          SCOPED_TRACE("h=" + std::to_string(h) + " rows=" + std::to_string(rows) + (in_place ? " in place" : ""));
          const int64_t n = rows * h;
          Tensor partial = b.empty(DType::kBF16, {rows, h}), partial2 = b.empty(DType::kBF16, {rows, h});
          Tensor fused = b.empty(DType::kF32, {rows, h}), unfused = b.empty(DType::kF32, {rows, h});
          Tensor normed = in_place ? partial : b.empty(DType::kBF16, {rows, h});
          Tensor normed2 = b.empty(DType::kBF16, {rows, h});
          Tensor weight = b.empty(DType::kBF16, {h});
          upload_values(b, weight.view({h}), rank_values(9, h, 44));
          const std::vector<float> residual = rank_values(7, n, 42);
          upload_values(b, partial.view({n}), rank_values(rank, n, 43));
          upload_values(b, partial2.view({n}), rank_values(rank, n, 43));
          upload_values(b, fused.view({n}), residual);
          upload_values(b, unfused.view({n}), residual);
          ASSERT_TRUE(c.all_reduce_sum_into_norm(partial, fused, weight, 1e-6f, normed));
          ASSERT_TRUE(c.all_reduce_sum_into(partial2, unfused));
          b.rms_norm(unfused, weight, 1e-6f, normed2);
          const std::vector<uint8_t> f = download_raw(b, fused), u = download_raw(b, unfused);
          EXPECT_EQ(std::memcmp(f.data(), u.data(), f.size()), 0) << "rank " << rank << ": the residuals differ";
          const std::vector<uint8_t> got = download_raw(b, normed), want = download_raw(b, normed2);
          int64_t bad = 0;
          for (size_t i = 0; i < got.size(); i += 2) {
            if (std::memcmp(&got[i], &want[i], 2) != 0 && bad++ < 5) {
              ADD_FAILURE() << "rank " << rank << ": normed value " << i / 2 << " differs";
            }
          }
          EXPECT_EQ(bad, 0);
        }
      }
    }
    auto refused = [&](DType dt, int64_t h) {
      Tensor p = b.empty(dt, {4, h}), r = b.empty(DType::kF32, {4, h});
      Tensor o = b.empty(DType::kBF16, {4, h}), w = b.empty(DType::kBF16, {h});
      return !c.all_reduce_sum_into_norm(p, r, w, 1e-6f, o);
    };
    EXPECT_TRUE(refused(DType::kF32, 1024));
    EXPECT_TRUE(refused(DType::kBF16, 4096));
    EXPECT_TRUE(refused(DType::kBF16, 1000));
  }));
  ScopedEnv flag("MINIVLLM_CUSTOM_AR_LAMPORT", "0");
  expect_no_errors(run_ranks(2, [](int, Backend& b, Communicator& c) {
    Tensor p = b.empty(DType::kBF16, {4, 1024}), r = b.empty(DType::kF32, {4, 1024});
    Tensor o = b.empty(DType::kBF16, {4, 1024}), w = b.empty(DType::kBF16, {1024});
    EXPECT_FALSE(c.all_reduce_sum_into_norm(p, r, w, 1e-6f, o));
  }));
}

TEST(CudaComm, CollectivesThreadsNcclOnly) {
  MINIVLLM_SKIP_WITHOUT_2_GPUS();
  ScopedEnv off("MINIVLLM_NO_CUSTOM_AR", "1");
  expect_no_errors(run_ranks(2, [](int, Backend& b, Communicator& c) {
    auto* nccl = dynamic_cast<cuda::NcclCommunicator*>(&c);
    ASSERT_NE(nccl, nullptr);
    EXPECT_FALSE(nccl->custom_all_reduce_enabled());
    comm_script(b, c);
  }));
}

// Rank 0 enqueues collectives rank 1 never joins; abort() from a third thread must end rank 0's
// barrier with an Error (and let its stream drain: the kernels quit), for the one-shot kernel and
// for NCCL's. Later calls and replays of graphs holding its collectives throw at once.
TEST(CudaComm, AbortWakesPendingCall) {
  MINIVLLM_SKIP_WITHOUT_2_GPUS();
  for (int64_t n : {int64_t{2048}, int64_t{1} << 20}) {
    std::atomic<Communicator*> comm0{nullptr};
    std::promise<void> rank0_done;
    std::shared_future<void> rank0_done_f = rank0_done.get_future().share();
    std::thread aborter;
    const std::vector<std::string> errors = run_ranks(2, [&](int rank, Backend& b, Communicator& c) {
      Tensor t = b.empty(DType::kBF16, {n});
      b.fill_bytes(t, 0);
      c.all_reduce_sum(t);  // both ranks: connections made
      const int graph = b.capture_graph([&] { c.all_reduce_sum(t); });
      b.replay_graph(graph);
      b.synchronize();
      c.barrier();
      if (rank == 1) {
        rank0_done_f.wait();  // sits out rank 0's next collectives
        return;
      }
      comm0 = &c;
      aborter = std::thread([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        comm0.load()->abort();
      });
      const Clock::time_point start = Clock::now();
      c.all_reduce_sum(t);  // enqueued: its kernel waits for rank 1
      EXPECT_THROW(c.barrier(), Error);
      const double waited = std::chrono::duration<double>(Clock::now() - start).count();
      EXPECT_GT(waited, 0.3);
      EXPECT_LT(waited, 30.0);
      b.synchronize();  // the kernels quit
      EXPECT_THROW(c.all_reduce_sum(t), Error);
      EXPECT_THROW(c.broadcast(t, 0), Error);
      EXPECT_THROW(b.replay_graph(graph), Error);
      rank0_done.set_value();
    });
    if (aborter.joinable()) aborter.join();
    expect_no_errors(errors);
  }
}

// Many back-to-back all-reduces of random sizes (one-shot ones of 1..32 blocks under a 512 KiB
// limit, every tenth one through NCCL), in place on distinct slices, no host sync between them.
// The values are small integers, so every sum is exact: a block reading a stale half or a wrong
// epoch's data shows.
void all_reduce_stress(const char* one_shot_max = "524288", const char* two_shot_max = nullptr) {
  ScopedEnv limit("MINIVLLM_CUSTOM_AR_MAX_BYTES", one_shot_max);
  ScopedEnv two_shot("MINIVLLM_CUSTOM_AR_TWO_SHOT_BYTES", two_shot_max);
  const int world = std::min(cuda_device_count(), 8);
  expect_no_errors(run_ranks(world, [&](int rank, Backend& b, Communicator& c) {
    std::mt19937 rng(99);  // the same sizes on every rank
    const int iters = 600;
    std::vector<int64_t> sizes, offsets;
    int64_t total = 0;
    for (int it = 0; it < iters; ++it) {
      const int64_t n = it % 10 == 9 ? 300000 + 8 * static_cast<int64_t>(rng() % 128)
                                     : 8 * (1 + static_cast<int64_t>(rng() % (256 * 1024 / 8)));
      sizes.push_back(n);
      offsets.push_back(total);
      total += n;
    }
    auto value = [](int q, int it, int64_t i) { return static_cast<float>((q * 7 + it * 13 + i) % 17) - 8.0f; };
    std::vector<uint16_t> in(static_cast<size_t>(total));
    for (int it = 0; it < iters; ++it) {
      for (int64_t i = 0; i < sizes[it]; ++i) in[offsets[it] + i] = f32_to_bf16(value(rank, it, i));
    }
    Tensor data = b.empty(DType::kBF16, {total});
    b.copy_from_host(data, in.data());
    b.synchronize();
    for (int it = 0; it < iters; ++it) c.all_reduce_sum(data.rows(offsets[it], offsets[it] + sizes[it]));
    const std::vector<float> got = download(b, data);
    int64_t bad = 0;
    for (int it = 0; it < iters; ++it) {
      for (int64_t i = 0; i < sizes[it]; ++i) {
        float expect = 0.0f;
        for (int q = 0; q < world; ++q) expect += value(q, it, i);
        if (got[offsets[it] + i] != expect && bad++ < 5) {
          ADD_FAILURE() << "rank " << rank << " iteration " << it << " (" << sizes[it] << " values) [" << i
                        << "]: " << got[offsets[it] + i] << " vs " << expect;
        }
      }
    }
    EXPECT_EQ(bad, 0);
  }));
}

// The Lamport kernel (the default for sums): 600 all-reduces of random sizes back to back rotate
// its three buffers with messages larger and smaller than the last (each call empties what the one
// before filled).
TEST(CudaComm, AllReduceStressThreads) {
  MINIVLLM_SKIP_WITHOUT_2_GPUS();
  all_reduce_stress();
}

// The Lamport kernel's two-shot form between 64 and 512 KiB: the random sizes take one-shot (up to
// 64 KiB), two-shot and NCCL calls in turn, so each call empties what a call of the other form
// filled.
TEST(CudaComm, AllReduceStressThreadsTwoShot) {
  MINIVLLM_SKIP_WITHOUT_2_GPUS();
  all_reduce_stress("65536", "524288");
}

// The collectives' script with every sum past 4 KB on the two-shot form (up to 16 MiB: the
// graph's 10 MB all-reduce too).
TEST(CudaComm, CollectivesThreadsTwoShot) {
  MINIVLLM_SKIP_WITHOUT_2_GPUS();
  ScopedEnv limit("MINIVLLM_CUSTOM_AR_MAX_BYTES", "4096");
  ScopedEnv two_shot("MINIVLLM_CUSTOM_AR_TWO_SHOT_BYTES", "16777216");
  const int world = std::min(cuda_device_count(), 8);
  expect_no_errors(run_ranks(world, [](int, Backend& b, Communicator& c) { comm_script(b, c); }));
}

// The same on the flag kernel (MINIVLLM_CUSTOM_AR_LAMPORT=0), which all-gathers always take.
TEST(CudaComm, AllReduceStressThreadsFlag) {
  MINIVLLM_SKIP_WITHOUT_2_GPUS();
  ScopedEnv flag("MINIVLLM_CUSTOM_AR_LAMPORT", "0");
  all_reduce_stress();
}

// All-gathers (the stamped kernel up to 16 KB a rank, the flag kernel above): 600 gathers of random
// sizes back to back, no host sync between them, of words that take any 32-bit value (0, ~0, the
// Lamport sentinel, hashes), then the same calls replayed from a graph with
// eager gathers between replays, so the stamped kernel's halves and epochs turn in both. Every
// gathered word is checked.
TEST(CudaComm, AllGatherStressThreads) {
  MINIVLLM_SKIP_WITHOUT_2_GPUS();
  const int world = std::min(cuda_device_count(), 8);
  expect_no_errors(run_ranks(world, [&](int rank, Backend& b, Communicator& c) {
    std::mt19937 rng(123);  // the same sizes on every rank
    const int iters = 600;
    std::vector<int64_t> sizes, in_off, out_off;
    int64_t in_total = 0, out_total = 0;
    for (int it = 0; it < iters; ++it) {
      const int64_t n = it % 25 == 24 ? 4 * (4097 + static_cast<int64_t>(rng() % 64))  // past 16 KB: the flag kernel
                                      : 1 + static_cast<int64_t>(rng() % 4096);
      sizes.push_back(n);
      in_off.push_back(in_total);
      out_off.push_back(out_total);
      in_total += (n + 3) / 4 * 4;  // 16-byte aligned starts
      out_total += (world * n + 3) / 4 * 4;
    }
    auto word = [](int q, int it, int64_t i, int round) -> int32_t {
      const uint32_t k = static_cast<uint32_t>(q * 1000003 + it * 7919 + i * 31 + round * 65537);
      switch (k % 5) {
        case 0: return 0;
        case 1: return -1;
        case 2: return static_cast<int32_t>(0x80008000u);
        case 3: return static_cast<int32_t>(k * 2654435761u);
        default: return static_cast<int32_t>(i);
      }
    };
    Tensor in = b.empty(DType::kI32, {in_total}), out = b.empty(DType::kI32, {out_total});
    int g = -1;  // the graph of the 600 calls, captured in the first graph round
    auto run_round = [&](int round, bool graph) {
      std::vector<int32_t> host(static_cast<size_t>(in_total));
      for (int it = 0; it < iters; ++it) {
        for (int64_t i = 0; i < sizes[it]; ++i) host[in_off[it] + i] = word(rank, it, i, round);
      }
      b.copy_from_host(in, host.data());
      b.fill_bytes(out, 0xAB);
      auto body = [&] {
        for (int it = 0; it < iters; ++it) {
          c.all_gather(in.rows(in_off[it], in_off[it] + sizes[it]),
                       out.rows(out_off[it], out_off[it] + world * sizes[it]));
        }
      };
      if (!graph) {
        body();
      } else {
        if (g < 0) g = b.capture_graph(body);
        ASSERT_GE(g, 0);
        b.replay_graph(g);
      }
      std::vector<int32_t> got(static_cast<size_t>(out_total));
      b.copy_to_host(got.data(), out);
      int64_t bad = 0;
      for (int it = 0; it < iters; ++it) {
        for (int q = 0; q < world; ++q) {
          for (int64_t i = 0; i < sizes[it]; ++i) {
            const int32_t expect = word(q, it, i, round), v = got[out_off[it] + q * sizes[it] + i];
            if (v != expect && bad++ < 5) {
              ADD_FAILURE() << "rank " << rank << " round " << round << " call " << it << " (" << sizes[it]
                            << " words) rank " << q << "'s [" << i << "]: " << v << " vs " << expect;
            }
          }
        }
      }
      EXPECT_EQ(bad, 0) << "round " << round << (graph ? " (graph)" : " (eager)");
    };
    run_round(0, false);
    run_round(1, false);
    for (int round = 2; round < 6; ++round) {
      run_round(round, true);
      // 2 to 5 eager gathers between replays: the replays start on either half.
      Tensor x = b.empty(DType::kI32, {8}), xs = b.empty(DType::kI32, {world * 8});
      b.fill_bytes(x, 0);
      for (int i = 0; i < round; ++i) c.all_gather(x, xs);
    }
  }));
}

// The same with MINIVLLM_STAMPED_GATHER=0: every gather on the flag kernel.
TEST(CudaComm, AllGatherStressThreadsFlag) {
  MINIVLLM_SKIP_WITHOUT_2_GPUS();
  ScopedEnv off("MINIVLLM_STAMPED_GATHER", "0");
  const int world = std::min(cuda_device_count(), 8);
  expect_no_errors(run_ranks(world, [&](int rank, Backend& b, Communicator& c) {
    const int64_t n = 1024;  // 4 KB: the stamped kernel's size, here on the flag kernel
    Tensor in = b.empty(DType::kI32, {n}), out = b.empty(DType::kI32, {world * n});
    std::vector<int32_t> host(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) host[i] = static_cast<int32_t>(rank * 100000 + i);
    b.copy_from_host(in, host.data());
    for (int it = 0; it < 50; ++it) c.all_gather(in, out);
    std::vector<int32_t> got(static_cast<size_t>(world * n));
    b.copy_to_host(got.data(), out);
    for (int q = 0; q < world; ++q) {
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[q * n + i], q * 100000 + i) << "rank " << rank;
    }
  }));
}

TEST(CudaComm, CollectivesThreadsFlag) {
  MINIVLLM_SKIP_WITHOUT_2_GPUS();
  ScopedEnv flag("MINIVLLM_CUSTOM_AR_LAMPORT", "0");
  expect_no_errors(run_ranks(2, [](int, Backend& b, Communicator& c) { comm_script(b, c); }));
}

// close() is collective: ranks that close together return at once (NCCL's finalize waits for
// every rank; a worker that tore down alone used to wait out rank 0's 10 s exit timeout), and a
// collective after it throws.
TEST(CudaComm, CloseTogetherReturnsAtOnce) {
  MINIVLLM_SKIP_WITHOUT_2_GPUS();
  expect_no_errors(run_ranks(2, [](int, Backend& b, Communicator& c) {
    Tensor t = b.empty(DType::kF32, {64});
    b.fill_bytes(t, 0);
    c.all_reduce_sum(t);
    b.synchronize();
    const Clock::time_point start = Clock::now();
    c.close();
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 5.0);
    EXPECT_THROW(c.all_reduce_sum(t), std::exception);
  }));
}

// Microseconds per call of one collective (every rank calls it): in a graph of 50 calls (median of
// 7 replays, each after a barrier) and 50 eager calls (the host's enqueue cost included).
struct CallTimes {
  double graph = 0, eager = 0;
};
CallTimes time_calls(Backend& b, Communicator& c, const std::function<void()>& call) {
  const int calls = 50;
  call();
  b.synchronize();
  const int graph = b.capture_graph([&] {
    for (int i = 0; i < calls; ++i) call();
  });
  b.replay_graph(graph);
  b.synchronize();
  std::vector<double> times;
  for (int rep = 0; rep < 7; ++rep) {
    c.barrier();
    const Clock::time_point t0 = Clock::now();
    b.replay_graph(graph);
    b.synchronize();
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count() / calls);
  }
  std::sort(times.begin(), times.end());
  c.barrier();
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < calls; ++i) call();
  b.synchronize();
  const double eager = std::chrono::duration<double>(Clock::now() - t0).count() / calls;
  return {times[times.size() / 2] * 1e6, eager * 1e6};
}

// Time per bf16 all-reduce, the one-shot Lamport (default) and flag kernels vs NCCL: graphs of 50
// calls (median of 7 replays) and 50 eager calls (the host's enqueue cost included). Not pass/fail.
// The one-shot rows take every size (the limit raised to 32 MiB: where should the default be?), the
// two-shot row every size past 16 bytes.
// MINIVLLM_COMM_BENCH_WORLD ranks (default 2; 4 on a four-GPU machine).
TEST(CudaCommBench, AllReduce) {
  MINIVLLM_SKIP_WITHOUT_2_GPUS();
  const char* w = std::getenv("MINIVLLM_COMM_BENCH_WORLD");
  const int world = std::min(w != nullptr ? std::atoi(w) : 2, cuda_device_count());
  std::printf("all_reduce bench at world_size %d\n", world);
  const char* names[] = {"one-shot Lamport", "one-shot flag", "NCCL only", "two-shot Lamport"};
  for (int mode : {0, 3, 1, 2}) {
    ScopedEnv limit("MINIVLLM_CUSTOM_AR_MAX_BYTES", mode == 3 ? "16" : "33554432");
    ScopedEnv two_shot("MINIVLLM_CUSTOM_AR_TWO_SHOT_BYTES", mode == 3 ? "33554432" : nullptr);
    ScopedEnv env("MINIVLLM_NO_CUSTOM_AR", mode == 2 ? "1" : nullptr);
    ScopedEnv flag("MINIVLLM_CUSTOM_AR_LAMPORT", mode == 1 ? "0" : nullptr);
    expect_no_errors(run_ranks(world, [&](int rank, Backend& b, Communicator& c) {
      for (int64_t bytes : {int64_t{2} << 10, int64_t{16} << 10, int64_t{128} << 10, int64_t{512} << 10,
                            int64_t{1} << 20, int64_t{2} << 20, int64_t{4} << 20, int64_t{8} << 20,
                            int64_t{32} << 20}) {
        Tensor t = b.empty(DType::kBF16, {bytes / 2});
        b.fill_bytes(t, 0);
        const CallTimes us = time_calls(b, c, [&] { c.all_reduce_sum(t); });
        if (rank == 0) {
          std::printf("all_reduce bf16 %9lld B, %-24s: graph %8.2f us/call, eager %8.2f us/call\n",
                      static_cast<long long>(bytes), names[mode], us.graph, us.eager);
        }
      }
    }));
  }
}

// Time per all-gather of the sampler's sizes (1 KB: a step's picks; 4 and 16 KB: its stats at 256
// and 1,024 rows), the stamped kernel (default) against the flag kernel (MINIVLLM_STAMPED_GATHER=0):
// graphs of 50 calls (median of 7 replays) and 50 eager calls. Not pass/fail.
TEST(CudaCommBench, AllGather) {
  MINIVLLM_SKIP_WITHOUT_2_GPUS();
  for (int mode : {0, 1}) {
    ScopedEnv env("MINIVLLM_STAMPED_GATHER", mode == 1 ? "0" : nullptr);
    expect_no_errors(run_ranks(2, [&](int rank, Backend& b, Communicator& c) {
      for (int64_t bytes : {int64_t{1} << 10, int64_t{4} << 10, int64_t{16} << 10}) {
        Tensor in = b.empty(DType::kF32, {bytes / 4}), out = b.empty(DType::kF32, {2 * bytes / 4});
        b.fill_bytes(in, 0);
        const CallTimes us = time_calls(b, c, [&] { c.all_gather(in, out); });
        if (rank == 0) {
          std::printf("all_gather %6lld B a rank, %-8s: graph %8.2f us/call, eager %8.2f us/call\n",
                      static_cast<long long>(bytes), mode == 0 ? "stamped" : "flag", us.graph, us.eager);
        }
      }
    }));
  }
}

// Rank 1 in a child process (this test binary, filtered to CudaCommWorker.Rank), rank 0 here: the
// engine's layout, and the one-shot kernel over cudaIpcOpenMemHandle mappings. A watchdog aborts
// rank 0's communicator if the child dies, as the engine's does.
TEST(CudaComm, CollectivesTwoProcesses) {
  MINIVLLM_SKIP_WITHOUT_2_GPUS();
  const std::string boot = make_cuda_comm_bootstrap();
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  env_strings.push_back("MINIVLLM_COMM_TEST_BOOTSTRAP=" + boot);
  env_strings.push_back("MINIVLLM_COMM_TEST_RANK=1");
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string exe = "/proc/self/exe", filter = "--gtest_filter=CudaCommWorker.Rank";
  char* argv[] = {exe.data(), filter.data(), nullptr};
  pid_t child = -1;
  ASSERT_EQ(posix_spawn(&child, exe.c_str(), nullptr, nullptr, argv, envp.data()), 0);

  std::atomic<bool> finished{false};
  std::atomic<int> child_status{-1};
  std::thread watchdog([&] {
    const Clock::time_point start = Clock::now();
    for (;;) {
      int status = 0;
      const pid_t r = waitpid(child, &status, WNOHANG);
      if (r == child) {
        child_status = status;
        if (!finished.load() && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
          abort_cuda_comm_bootstrap(boot, "rank 1 (child process) died");
        }
        return;
      }
      if (std::chrono::duration<double>(Clock::now() - start).count() > 300) {
        kill(child, SIGKILL);
        abort_cuda_comm_bootstrap(boot, "timeout");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  try {
    auto b = make_cuda_backend(0);
    auto c = b->create_communicator(0, 2, boot);
    auto* nccl = dynamic_cast<cuda::NcclCommunicator*>(c.get());
    ASSERT_NE(nccl, nullptr);
    if (!nccl->custom_all_reduce_enabled()) std::printf("note: one-shot all-reduce not enabled (no peer access?)\n");
    comm_script(*b, *c);
    c->barrier();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "rank 0: " << e.what();
  }
  finished = true;
  watchdog.join();
  const int status = child_status.load();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
}

// The child's side of CollectivesTwoProcesses (skips when run on its own).
TEST(CudaCommWorker, Rank) {
  const char* boot = std::getenv("MINIVLLM_COMM_TEST_BOOTSTRAP");
  const char* rank = std::getenv("MINIVLLM_COMM_TEST_RANK");
  if (boot == nullptr || rank == nullptr) GTEST_SKIP() << "rank 1 of CudaComm.CollectivesTwoProcesses";
  const int r = std::atoi(rank);
  auto b = make_cuda_backend(r);
  auto c = b->create_communicator(r, 2, boot);
  comm_script(*b, *c);
  c->barrier();
}

}  // namespace
}  // namespace minivllm::cuda_test
