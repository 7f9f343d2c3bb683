// NcclCommunicator (see nccl_communicator.h for the design: non-blocking NCCL, abort, teardown),
// and the plain-C++ helpers of cuda_backend.h: make_cuda_comm_bootstrap, cuda_device_count.
#include "backend/cuda/nccl_communicator.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/custom_all_reduce.h"
#include "backend/cuda/nccl_check.h"
#include "common/tuning.h"

namespace minivllm::cuda {
namespace {

using Clock = std::chrono::steady_clock;

// How long the destructor waits for the stream to drain before it aborts instead of destroying.
constexpr double kDrainTimeoutS = 10.0;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Polling back-off: yield for the first millisecond (a launch thread finishes in tens of
// microseconds), then short sleeps, then 1 ms sleeps.
void pause_after(double elapsed_s) {
  if (elapsed_s < 1e-3) {
    std::this_thread::yield();
  } else if (elapsed_s < 0.1) {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

ncclDataType_t nccl_type(const Tensor& t, const char* op) {
  switch (t.dtype()) {
    case DType::kF32: return ncclFloat32;
    case DType::kBF16: return ncclBfloat16;
    case DType::kF16: return ncclFloat16;
    case DType::kI32: return ncclInt32;
    default: break;
  }
  MINIVLLM_FAIL() << op << ": " << t.describe() << ": dtype not supported by the communicator (f32, bf16, i32)";
}

void check_comm_tensor(const Tensor& t, const char* op, const char* what) {
  MINIVLLM_CHECK(t.defined()) << op << ": " << what << " is undefined";
  MINIVLLM_CHECK(t.device() == DeviceKind::kCuda) << op << ": " << what << " " << t.describe() << " is not on the GPU";
  MINIVLLM_CHECK(t.numel() == 0 || !t.empty()) << op << ": " << what << " " << t.describe() << " has no memory";
}

double timeout_from_env() {
  return knob_seconds("MINIVLLM_NCCL_TIMEOUT_S").value_or(600.0);  // 0: no timeout
}

ncclUniqueId parse_bootstrap(const std::string& hex) {
  ncclUniqueId id;
  MINIVLLM_CHECK(hex.size() == 2 * sizeof(id.internal))
      << "NCCL bootstrap: expected " << 2 * sizeof(id.internal) << " hex digits (make_cuda_comm_bootstrap), got "
      << hex.size() << " characters";
  auto nibble = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    MINIVLLM_FAIL() << "NCCL bootstrap: '" << c << "' is not a hex digit";
  };
  for (size_t i = 0; i < sizeof(id.internal); ++i) {
    id.internal[i] = static_cast<char>(nibble(hex[2 * i]) * 16 + nibble(hex[2 * i + 1]));
  }
  return id;
}

// The thread's current device is `device` for the scope (NCCL and the IPC helpers use it).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    CUDA_CHECK(cudaGetDevice(&saved_));
    if (saved_ != device) CUDA_CHECK(cudaSetDevice(device));
  }
  ~DeviceGuard() {
    int cur = -1;
    if (cudaGetDevice(&cur) == cudaSuccess && cur != saved_) cudaSetDevice(saved_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int saved_ = 0;
};

}  // namespace

NcclCommunicator::NcclCommunicator(CudaBackend& backend, int rank, int world_size, const std::string& bootstrap)
    : backend_(&backend), rank_(rank), world_(world_size), device_(backend.device_index()),
      stream_(backend.stream()), bootstrap_(bootstrap) {
  MINIVLLM_CHECK(world_size >= 2 && rank >= 0 && rank < world_size)
      << "NcclCommunicator: rank " << rank << " of world_size " << world_size;
  timeout_s_ = timeout_from_env();
  const ncclUniqueId id = parse_bootstrap(bootstrap);
  DeviceGuard device(device_);
  CUDA_CHECK(cudaMalloc(&barrier_buf_, sizeof(int)));
  const std::string aborted_before = register_communicator(this);
  try {
    std::unique_lock<std::mutex> lock(mu_);
    if (!aborted_before.empty()) fail_locked(aborted_before);
    if (aborted_->load()) fail_locked(abort_reason_.empty() ? "aborted" : abort_reason_);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    config.commName = "minivllm-tp";
    ncclComm_t c = nullptr;
    const ncclResult_t r = ncclCommInitRankConfig(&c, world_, id, rank_, &config);
    comm_ = c;  // set even when r is ncclInProgress (non-blocking init) or an error
    if (r != ncclSuccess && r != ncclInProgress) {
      fail_locked(std::string("ncclCommInitRankConfig: ") + nccl_error_text(r));
    }
    MINIVLLM_CHECK(comm_ != nullptr) << "ncclCommInitRankConfig returned no communicator";
    wait_nccl_locked(lock, "ncclCommInitRankConfig", timeout_s_);
  } catch (...) {
    std::unique_lock<std::mutex> lock(mu_);
    release_resources_locked(lock, /*drain=*/false);
    lock.unlock();
    unregister_communicator(this);
    throw;
  }
  backend.attach_communicator(this);
  try {
    custom_ar_ = CustomAllReduce::create_if_enabled(*this, device_, stream_);
  } catch (...) {
    backend.detach_communicator(this);
    std::unique_lock<std::mutex> lock(mu_);
    release_resources_locked(lock, /*drain=*/false);
    lock.unlock();
    unregister_communicator(this);
    throw;
  }
}

NcclCommunicator::~NcclCommunicator() {
  if (backend_ != nullptr) backend_->detach_communicator(this);
  try {
    std::unique_lock<std::mutex> lock(mu_);
    release_resources_locked(lock, /*drain=*/true);
  } catch (...) {
    // a destructor must not throw; the resources are released as far as they could be
  }
  unregister_communicator(this);
}

void NcclCommunicator::on_backend_destroyed() {
  std::unique_lock<std::mutex> lock(mu_);
  // ~CudaBackend synchronised the stream and destroyed its graphs: nothing pending, nothing
  // captured, so the NCCL communicator can be destroyed now.
  backend_ = nullptr;
  if (abort_reason_.empty()) abort_reason_ = "its CUDA backend was destroyed";
  try {
    release_resources_locked(lock, /*drain=*/false, /*clean=*/true);
  } catch (...) {
    // called from ~CudaBackend: must not throw
  }
  aborted_->store(true);
}

void NcclCommunicator::release_resources_locked(std::unique_lock<std::mutex>& lock, bool drain, bool clean) {
  // Polls the stream until it is idle; false after `limit_s` or on abort (when `stop_on_abort`).
  auto wait_idle = [&](double limit_s, bool stop_on_abort) {
    const Clock::time_point start = Clock::now();
    for (;;) {
      const cudaError_t e = cudaStreamQuery(stream_);
      if (e == cudaSuccess) return true;
      if (e != cudaErrorNotReady) {
        cudaGetLastError();
        return false;
      }
      if ((stop_on_abort && aborted_->load()) || seconds_since(start) > limit_s) return false;
      lock.unlock();
      pause_after(seconds_since(start));
      lock.lock();
    }
  };
  bool drained = clean;
  if (!drained && drain && comm_ != nullptr && !aborted_->load()) {
    // Let what is enqueued finish (the peers normally make the same calls), but do not wait for
    // a peer that will never come.
    drained = wait_idle(kDrainTimeoutS, /*stop_on_abort=*/true);
  }
  // Kernels may wait for a peer that will never come: the one-shot kernels quit on this flag,
  // NCCL's on ncclCommAbort below.
  if (!drained && custom_ar_ != nullptr) custom_ar_->abort();
  // NCCL frees a communicator only once every graph that captured its collectives is destroyed.
  if (backend_ != nullptr) backend_->drop_graphs_of(aborted_.get());
  ncclComm_t c = comm_;
  comm_ = nullptr;
  if (c != nullptr) {
    if (!drained) aborted_->store(true);
    if (abort_reason_.empty()) abort_reason_ = "communicator destroyed";
    lock.unlock();
    int saved = -1;
    cudaGetDevice(&saved);
    cudaSetDevice(device_);
    // Finalising waits for every rank (recent NCCL): on this non-blocking communicator it is
    // polled, so that abort() or a peer that never comes ends in ncclCommAbort, not a hang.
    bool finalized = false;
    if (drained) {
      const ncclResult_t f = ncclCommFinalize(c);
      ncclResult_t state = f;
      const Clock::time_point start = Clock::now();
      while (state == ncclInProgress && !aborted_->load() && seconds_since(start) < kDrainTimeoutS) {
        pause_after(seconds_since(start));
        if (ncclCommGetAsyncError(c, &state) != ncclSuccess) state = ncclInternalError;
      }
      finalized = (f == ncclSuccess || f == ncclInProgress) && state == ncclSuccess;
    }
    if (!finalized || ncclCommDestroy(c) != ncclSuccess) ncclCommAbort(c);
    if (saved >= 0) cudaSetDevice(saved);
    lock.lock();
  }
  if (reaper_.joinable()) {
    // ncclCommAbort from abort() or an error: it returns once the graphs are gone (dropped above,
    // or by ~CudaBackend before on_backend_destroyed).
    std::thread t = std::move(reaper_);
    lock.unlock();
    t.join();
    lock.lock();
  }
  // With every kernel told to quit, the stream empties; if it does not, keep the memory that a
  // running kernel may still touch (leaked: better than a fault on this GPU or a peer's).
  const bool idle = drained || backend_ == nullptr || wait_idle(2.0, /*stop_on_abort=*/false);
  if (custom_ar_ != nullptr) {
    if (!idle) custom_ar_->leak();
    custom_ar_.reset();
  }
  if (barrier_buf_ != nullptr && idle) {
    cudaFree(barrier_buf_);
    barrier_buf_ = nullptr;
  }
  cudaGetLastError();
}

ncclComm_t NcclCommunicator::comm_locked(const char* what) {
  if (aborted_->load() || comm_ == nullptr) {
    std::ostringstream s;
    s << "NCCL rank " << rank_ << "/" << world_ << ": " << what << ": communicator aborted";
    if (!abort_reason_.empty()) s << " (" << abort_reason_ << ")";
    throw Error(s.str());
  }
  return comm_;
}

void NcclCommunicator::abort_locked(const std::string& why) {
  aborted_->store(true);
  if (abort_reason_.empty()) abort_reason_ = why;
  if (custom_ar_ != nullptr) custom_ar_->abort();
  ncclComm_t c = comm_;
  comm_ = nullptr;
  if (c == nullptr || reaper_.joinable()) return;
  const int device = device_;
  // ncclCommAbort raises NCCL's abort flags at once (kernels waiting for a dead peer quit), then
  // blocks until the graphs that captured this communicator are destroyed: a thread of its own.
  reaper_ = std::thread([c, device] {
    cudaSetDevice(device);
    ncclCommAbort(c);
  });
}

void NcclCommunicator::fail_locked(const std::string& why) {
  abort_locked(why);
  std::ostringstream s;
  s << "NCCL rank " << rank_ << "/" << world_ << ": " << why;
  throw Error(s.str());
}

void NcclCommunicator::abort() { abort_with_reason("abort() called"); }

void NcclCommunicator::abort_with_reason(const std::string& why) {
  aborted_->store(true);  // first, so that pollers outside the mutex stop at once
  std::unique_lock<std::mutex> lock(mu_);
  abort_locked(why);
}

void NcclCommunicator::wait_nccl_locked(std::unique_lock<std::mutex>& lock, const char* what, double timeout_s) {
  const Clock::time_point start = Clock::now();
  for (;;) {
    ncclComm_t c = comm_locked(what);
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(c, &state);
    if (r != ncclSuccess) fail_locked(std::string(what) + ": ncclCommGetAsyncError: " + nccl_error_text(r));
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) fail_locked(std::string(what) + ": " + nccl_error_text(state));
    const double elapsed = seconds_since(start);
    if (timeout_s > 0.0 && elapsed > timeout_s) {
      std::ostringstream s;
      s << what << " did not complete within " << timeout_s
        << " s (MINIVLLM_NCCL_TIMEOUT_S): a rank that never joined?";
      fail_locked(s.str());
    }
    lock.unlock();
    pause_after(elapsed);
    lock.lock();
  }
}

void NcclCommunicator::note_capture() {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(stream_, &status));
  if (status == cudaStreamCaptureStatusActive && backend_ != nullptr) backend_->note_captured_collective(aborted_);
}

void NcclCommunicator::before_custom_call(const char* what) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    comm_locked(what);  // throws once aborted
  }
  note_capture();
}

template <typename F>
void NcclCommunicator::run(const char* what, F&& enqueue) {
  std::unique_lock<std::mutex> lock(mu_);
  ncclComm_t c = comm_locked(what);
  // An error NCCL found asynchronously since the last call (a peer's proxy, the network).
  ncclResult_t state = ncclSuccess;
  const ncclResult_t q = ncclCommGetAsyncError(c, &state);
  if (q != ncclSuccess) fail_locked(std::string(what) + ": ncclCommGetAsyncError: " + nccl_error_text(q));
  if (state != ncclSuccess) fail_locked(std::string(what) + ": earlier asynchronous error: " + nccl_error_text(state));
  DeviceGuard device(device_);
  note_capture();
  const ncclResult_t r = enqueue(c);
  if (r != ncclSuccess && r != ncclInProgress) fail_locked(std::string(what) + ": " + nccl_error_text(r));
  // ncclInProgress: an NCCL thread is launching the kernels on our stream. Wait for it, so that
  // what the caller enqueues next comes after the collective.
  wait_nccl_locked(lock, what, timeout_s_);
}

void NcclCommunicator::all_reduce_sum(const Tensor& t) {
  check_comm_tensor(t, "all_reduce_sum", "t");
  const ncclDataType_t type = nccl_type(t, "all_reduce_sum");
  if (t.numel() == 0) return;
  if (custom_ar_ != nullptr && custom_ar_->handles(t)) {
    before_custom_call("all_reduce_sum");
    custom_ar_->all_reduce_sum(t);
    return;
  }
  run("ncclAllReduce(sum)", [&](ncclComm_t c) {
    return ncclAllReduce(t.data(), t.data(), static_cast<size_t>(t.numel()), type, ncclSum, c, stream_);
  });
}

bool NcclCommunicator::all_reduce_sum_into(const Tensor& partial, const Tensor& accumulator) {
  check_comm_tensor(partial, "all_reduce_sum_into", "partial");
  check_comm_tensor(accumulator, "all_reduce_sum_into", "accumulator");
  if (custom_ar_ == nullptr || (partial.dtype() != DType::kF32 && partial.dtype() != DType::kBF16) ||
      accumulator.dtype() != DType::kF32 || partial.numel() != accumulator.numel() || partial.numel() == 0 ||
      !custom_ar_->handles(partial) || reinterpret_cast<uintptr_t>(accumulator.data()) % 16 != 0) {
    return false;
  }
  before_custom_call("all_reduce_sum_into");
  custom_ar_->all_reduce_sum(partial, accumulator.ptr<float>());
  return true;
}

bool NcclCommunicator::all_reduce_sum_into_norm(const Tensor& partial, const Tensor& accumulator,
                                                const Tensor& norm_weight, float eps, const Tensor& normed) {
  check_comm_tensor(partial, "all_reduce_sum_into_norm", "partial");
  check_comm_tensor(accumulator, "all_reduce_sum_into_norm", "accumulator");
  // The kernel's own conditions (normed's alignment among them) are CustomAllReduce's to check.
  if (custom_ar_ == nullptr || reinterpret_cast<uintptr_t>(accumulator.data()) % 16 != 0) return false;
  before_custom_call("all_reduce_sum_into_norm");
  return custom_ar_->all_reduce_sum_norm(partial, accumulator, norm_weight, eps, normed);
}

void NcclCommunicator::all_reduce_min(const Tensor& t) {
  check_comm_tensor(t, "all_reduce_min", "t");
  MINIVLLM_CHECK(t.dtype() == DType::kI32) << "all_reduce_min: " << t.describe() << " must be i32";
  if (t.numel() == 0) return;
  run("ncclAllReduce(min)", [&](ncclComm_t c) {
    return ncclAllReduce(t.data(), t.data(), static_cast<size_t>(t.numel()), ncclInt32, ncclMin, c, stream_);
  });
}

void NcclCommunicator::all_gather(const Tensor& in, const Tensor& out) {
  check_comm_tensor(in, "all_gather", "in");
  check_comm_tensor(out, "all_gather", "out");
  MINIVLLM_CHECK(in.dtype() == out.dtype()) << "all_gather: in " << in.describe() << " out " << out.describe();
  MINIVLLM_CHECK_EQ(out.numel(), world_ * in.numel()) << "all_gather: in " << in.describe() << " out " << out.describe();
  const ncclDataType_t type = nccl_type(in, "all_gather");
  if (in.numel() == 0) return;
  if (custom_ar_ != nullptr && custom_ar_->handles_gather(in, out)) {  // the small ones (the sampler's)
    before_custom_call("all_gather");
    custom_ar_->all_gather(in, out);
    return;
  }
  run("ncclAllGather", [&](ncclComm_t c) {
    return ncclAllGather(in.data(), out.data(), static_cast<size_t>(in.numel()), type, c, stream_);
  });
}

void NcclCommunicator::gather(const Tensor& in, const Tensor& out) {
  check_comm_tensor(in, "gather", "in");
  const ncclDataType_t type = nccl_type(in, "gather");
  const size_t n = static_cast<size_t>(in.numel());
  if (rank_ == 0) {
    check_comm_tensor(out, "gather", "out");
    MINIVLLM_CHECK(in.dtype() == out.dtype()) << "gather: in " << in.describe() << " out " << out.describe();
    MINIVLLM_CHECK_EQ(out.numel(), world_ * in.numel()) << "gather: in " << in.describe() << " out " << out.describe();
  }
  if (n == 0) return;
  const size_t bytes = in.nbytes();
  if (rank_ == 0 && out.data() != in.data()) {
    // Rank 0's own part: a copy on the same stream (ordered before the receives' kernel).
    std::unique_lock<std::mutex> lock(mu_);
    comm_locked("gather");
    CUDA_CHECK(cudaMemcpyAsync(out.data(), in.data(), bytes, cudaMemcpyDeviceToDevice, stream_));
  }
  run("gather (ncclSend/ncclRecv)", [&](ncclComm_t c) {
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) return r;
    if (rank_ == 0) {
      char* dst = static_cast<char*>(out.data());
      for (int peer = 1; peer < world_ && r == ncclSuccess; ++peer) {
        r = ncclRecv(dst + peer * bytes, n, type, peer, c, stream_);
      }
    } else {
      r = ncclSend(in.data(), n, type, 0, c, stream_);
    }
    const ncclResult_t end = ncclGroupEnd();  // always closes the group
    return r != ncclSuccess ? r : end;
  });
}

void NcclCommunicator::broadcast(const Tensor& t, int root) {
  check_comm_tensor(t, "broadcast", "t");
  MINIVLLM_CHECK(root >= 0 && root < world_) << "broadcast: root " << root << " of world_size " << world_;
  const ncclDataType_t type = nccl_type(t, "broadcast");
  if (t.numel() == 0) return;
  run("ncclBroadcast", [&](ncclComm_t c) {
    return ncclBroadcast(t.data(), t.data(), static_cast<size_t>(t.numel()), type, root, c, stream_);
  });
}

void NcclCommunicator::close() {
  std::unique_lock<std::mutex> lock(mu_);
  release_resources_locked(lock, /*drain=*/true);
}

void NcclCommunicator::barrier() {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(stream_, &status));
  MINIVLLM_CHECK(status == cudaStreamCaptureStatusNone) << "barrier: not allowed during graph capture (it waits for the GPU)";
  run("barrier (ncclAllReduce)", [&](ncclComm_t c) {
    const cudaError_t e = cudaMemsetAsync(barrier_buf_, 0, sizeof(int), stream_);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return ncclUnhandledCudaError;
    }
    return ncclAllReduce(barrier_buf_, barrier_buf_, 1, ncclInt32, ncclSum, c, stream_);
  });
  // Wait for the stream, waking for abort() and NCCL's asynchronous errors (a blocking stream
  // sync would wait for a dead peer until someone aborts the communicator).
  const Clock::time_point start = Clock::now();
  for (;;) {
    const cudaError_t e = cudaStreamQuery(stream_);
    if (e == cudaSuccess) break;
    if (e != cudaErrorNotReady) CUDA_CHECK(e);
    {
      std::unique_lock<std::mutex> lock(mu_);
      ncclComm_t c = comm_locked("barrier");
      ncclResult_t state = ncclSuccess;
      const ncclResult_t r = ncclCommGetAsyncError(c, &state);
      if (r != ncclSuccess) fail_locked(std::string("barrier: ncclCommGetAsyncError: ") + nccl_error_text(r));
      if (state != ncclSuccess && state != ncclInProgress) fail_locked(std::string("barrier: ") + nccl_error_text(state));
    }
    pause_after(seconds_since(start));
  }
  std::unique_lock<std::mutex> lock(mu_);
  comm_locked("barrier");  // aborted while the stream drained (the kernel quit): the barrier failed
}

// ---- process-wide registry (abort_cuda_comm_bootstrap) ----

namespace {
struct Registry {
  std::mutex mu;
  std::vector<NcclCommunicator*> live;
  std::vector<std::pair<std::string, std::string>> aborted;  // (bootstrap, why)
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: a watchdog may use it during exit
  return *r;
}
}  // namespace

std::string NcclCommunicator::register_communicator(NcclCommunicator* c) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.live.push_back(c);
  for (const auto& [boot, why] : r.aborted) {
    if (boot == c->bootstrap_) return why;
  }
  return "";
}

void NcclCommunicator::unregister_communicator(NcclCommunicator* c) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.live.erase(std::remove(r.live.begin(), r.live.end(), c), r.live.end());
}

bool NcclCommunicator::abort_bootstrap(const std::string& bootstrap, const std::string& why) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  bool known = false;
  for (const auto& entry : r.aborted) known = known || entry.first == bootstrap;
  if (!known) r.aborted.emplace_back(bootstrap, why);
  bool found = false;
  for (NcclCommunicator* c : r.live) {
    if (c->bootstrap_ != bootstrap) continue;
    c->abort_with_reason(why);
    found = true;
  }
  return found;
}

}  // namespace minivllm::cuda

namespace minivllm {

std::string make_cuda_comm_bootstrap() {
  // ncclGetUniqueId creates no CUDA context: it opens the bootstrap root's socket and starts its
  // thread in this process (which must live until every rank has joined).
  ncclUniqueId id;
  NCCL_CHECK(ncclGetUniqueId(&id));
  static const char* digits = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * sizeof(id.internal));
  for (char ch : id.internal) {
    const unsigned char b = static_cast<unsigned char>(ch);
    hex.push_back(digits[b >> 4]);
    hex.push_back(digits[b & 15]);
  }
  return hex;
}

bool abort_cuda_comm_bootstrap(const std::string& bootstrap, const std::string& why) {
  return cuda::NcclCommunicator::abort_bootstrap(bootstrap, why);
}

}  // namespace minivllm
