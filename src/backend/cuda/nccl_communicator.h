// NcclCommunicator: the Communicator of CUDA ranks (one process, or one thread, per GPU) over a
// non-blocking NCCL communicator, every collective enqueued on the CudaBackend's stream (so the
// decode step's all-reduces are captured with it in a CUDA graph). Internal header: NCCL and CUDA
// types are allowed here; the runtime reaches it only through CudaBackend::create_communicator.
// all_reduce_sum of f32 / bf16 messages up to CustomAllReduce::max_bytes() (8 MiB for 2 ranks)
// takes a one-shot kernel over CUDA IPC (custom_all_reduce.h), everything else NCCL.
//
// Non-blocking NCCL (config.blocking = 0). Init and every enqueue may answer ncclInProgress: the
// work then goes on in an NCCL thread, and this class polls ncclCommGetAsyncError until it is done
// (before returning, so that the backend's next kernels land after the collective on the stream).
// Between polls it checks the abort flag and a deadline ($MINIVLLM_NCCL_TIMEOUT_S, default 600 s:
// how long init, or one enqueue, may wait for the peers). Nothing waits for the GPU except
// barrier() and the destructor.
//
// abort(), from any thread (rank 0's watchdog, when a worker process dies): sets the flag, takes
// the NCCL communicator away under the mutex (no other NCCL call can be using it then: calls hold
// the mutex only while inside NCCL, and non-blocking NCCL calls return at once) and runs
// ncclCommAbort on a helper thread. ncclCommAbort first raises NCCL's abort flags, so kernels that
// wait for a dead peer quit and a host blocked in a stream sync wakes; then it waits until every
// CUDA graph that captured one of its collectives is destroyed before freeing anything, which is
// why it cannot run on the caller's thread. Pending calls (polling init, an enqueue, barrier) throw
// minivllm::Error; later calls throw at once; CudaBackend::replay_graph throws for graphs that
// captured a collective of an aborted communicator. An NCCL error (returned, or reported
// asynchronously) or a timeout aborts the communicator the same way and throws. A communicator
// still in its constructor is reachable through abort_cuda_comm_bootstrap (cuda_backend.h).
//
// Teardown. ~NcclCommunicator waits (10 s at most) for the stream to drain, has the backend destroy
// the graphs that captured its collectives (NCCL cannot free a communicator a live graph uses),
// then ncclCommDestroy, or ncclCommAbort when the stream did not drain (a peer that will never
// join). If the backend goes first, ~CudaBackend destroys its graphs and calls
// on_backend_destroyed(), which releases the NCCL communicator; later calls throw.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "backend/communicator.h"

namespace minivllm::cuda {

class CudaBackend;
class CustomAllReduce;

class NcclCommunicator final : public Communicator {
 public:
  // Collective: every rank constructs its communicator with the same bootstrap (the hex string of
  // make_cuda_comm_bootstrap) at about the same time. Throws on timeout, abort() or NCCL errors.
  NcclCommunicator(CudaBackend& backend, int rank, int world_size, const std::string& bootstrap);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  void all_reduce_sum(const Tensor& t) override;
  bool all_reduce_sum_into(const Tensor& partial, const Tensor& accumulator) override;
  bool all_reduce_sum_into_norm(const Tensor& partial, const Tensor& accumulator, const Tensor& norm_weight, float eps,
                                const Tensor& normed) override;
  void all_reduce_min(const Tensor& t) override;
  void all_gather(const Tensor& in, const Tensor& out) override;
  void gather(const Tensor& in, const Tensor& out) override;
  void broadcast(const Tensor& t, int root) override;
  void barrier() override;
  void abort() override;
  void close() override;  // NCCL's finalize, polled (abort() or a peer that never comes ends it)

  // ~CudaBackend, after it destroyed its graphs and synchronised its stream.
  void on_backend_destroyed();
  // Whether all_reduce_sum takes the one-shot IPC kernel for small messages (custom_all_reduce.h).
  bool custom_all_reduce_enabled() const { return custom_ar_ != nullptr; }
  // abort() with a reason for the errors that follow.
  void abort_with_reason(const std::string& why);
  // Aborts this process's communicators of `bootstrap`, those still in their constructor included,
  // and remembers it so that later ones fail at once (abort_cuda_comm_bootstrap, cuda_backend.h).
  static bool abort_bootstrap(const std::string& bootstrap, const std::string& why);

 private:
  // Runs `enqueue` (NCCL calls on comm_, returning the last result) under the mutex, then waits
  // for a non-blocking launch to finish. Throws (and aborts the communicator) on errors.
  template <typename F>
  void run(const char* what, F&& enqueue);
  // Polls ncclCommGetAsyncError until the communicator leaves ncclInProgress; `lock` holds mu_
  // on entry and exit and is released between polls.
  void wait_nccl_locked(std::unique_lock<std::mutex>& lock, const char* what, double timeout_s);
  // The communicator, or throws if it was aborted / released. Caller holds mu_.
  ncclComm_t comm_locked(const char* what);
  // Takes comm_ away and runs ncclCommAbort on reaper_; records why. Caller holds mu_.
  void abort_locked(const std::string& why);
  [[noreturn]] void fail_locked(const std::string& why);
  // Tells the backend that the capture in progress (if any) holds a collective of this communicator.
  void note_capture();
  // Before a CustomAllReduce kernel (which NCCL never sees): throws once aborted, then note_capture.
  void before_custom_call(const char* what);
  // Teardown (destructor, failed constructor, on_backend_destroyed). drain: first wait (bounded)
  // for the stream; clean: the stream is known to be idle.
  void release_resources_locked(std::unique_lock<std::mutex>& lock, bool drain, bool clean = false);
  // Returns why the bootstrap was aborted already ("" if it was not).
  static std::string register_communicator(NcclCommunicator* c);
  static void unregister_communicator(NcclCommunicator* c);

  CudaBackend* backend_;
  const int rank_;
  const int world_;
  const int device_;
  const cudaStream_t stream_;
  const std::string bootstrap_;
  double timeout_s_ = 600.0;

  std::mutex mu_;
  ncclComm_t comm_ = nullptr;
  // Shared with the backend's graphs that captured our collectives (replay_graph checks it).
  std::shared_ptr<std::atomic<bool>> aborted_ = std::make_shared<std::atomic<bool>>(false);
  std::string abort_reason_;
  std::thread reaper_;
  int* barrier_buf_ = nullptr;
  std::unique_ptr<CustomAllReduce> custom_ar_;
};

}  // namespace minivllm::cuda
