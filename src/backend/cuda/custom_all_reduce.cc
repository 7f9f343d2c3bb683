// CustomAllReduce's host side: the collective set-up through NCCL, the launch, the teardown.
#include "backend/cuda/custom_all_reduce.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/custom_all_reduce_layout.h"
#include "backend/cuda/nccl_communicator.h"
#include "common/tuning.h"

namespace minivllm::cuda {
namespace {

// One rank's record in the set-up's all-gather, as i32 words.
struct PeerRecord {
  cudaIpcMemHandle_t handle;
  uint64_t pointer;  // the buffer's address in its own process (used by ranks of the same process)
  int32_t pid;
  int32_t device;
};
constexpr int kRecordWords = static_cast<int>((sizeof(PeerRecord) + 3) / 4);

bool ok(cudaError_t e) {
  if (e == cudaSuccess) return true;
  cudaGetLastError();  // clear it: the failure is reported by the agreement, not thrown
  return false;
}

}  // namespace

CustomAllReduce::CustomAllReduce(int rank, int world, int device, cudaStream_t stream)
    : rank_(rank), world_(world), device_(device), stream_(stream), opened_(kMaxRanks, false) {}

std::unique_ptr<CustomAllReduce> CustomAllReduce::create_if_enabled(NcclCommunicator& comm, int device,
                                                                    cudaStream_t stream) {
  const int world = comm.world_size(), rank = comm.rank();
  // Every rank inherits rank 0's environment: a bad value stops all of them here, before the
  // agreements below.
  const bool wanted = !knob_flag("MINIVLLM_NO_CUSTOM_AR") && world <= kMaxRanks;
  // A byte limit knob (whole 16-byte vectors), or `fallback` when unset.
  auto bytes_knob = [](const char* name, size_t fallback) {
    const std::optional<int64_t> n = knob_int(name);
    if (!n) return fallback;
    MINIVLLM_CHECK(*n % 16 == 0) << name << "=" << *n << " must be a multiple of 16";
    return static_cast<size_t>(*n);
  };
  size_t max_bytes = bytes_knob("MINIVLLM_CUSTOM_AR_MAX_BYTES", world == 2 ? size_t{8} << 20 : size_t{512} << 10);
  const size_t two_shot_bytes = bytes_knob("MINIVLLM_CUSTOM_AR_TWO_SHOT_BYTES", 0);

  // Scratch for the agreements and the all-gather.
  int32_t* scratch = nullptr;
  CUDA_CHECK(cudaMalloc(&scratch, sizeof(int32_t) * static_cast<size_t>(kRecordWords) * world + 16));
  std::unique_ptr<int32_t, void (*)(int32_t*)> scratch_owner(scratch, [](int32_t* p) { cudaFree(p); });
  // The minimum over ranks of each value; collective.
  auto min_over_ranks = [&](std::vector<int32_t> v) {
    const int64_t n = static_cast<int64_t>(v.size());
    CUDA_CHECK(cudaMemcpyAsync(scratch, v.data(), v.size() * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
    comm.all_reduce_min(Tensor(scratch, DType::kI32, {n}, DeviceKind::kCuda));
    CUDA_CHECK(cudaMemcpyAsync(v.data(), scratch, v.size() * sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return v;
  };
  // Whether every rank succeeded.
  auto agree = [&](bool mine) { return min_over_ranks({mine ? 1 : 0})[0] == 1; };
  const bool lamport = knob_flag("MINIVLLM_CUSTOM_AR_LAMPORT");
  const bool push = !knob_flag("MINIVLLM_CUSTOM_AR_PULL");
  const bool stamped = knob_flag("MINIVLLM_STAMPED_GATHER");
  const int tile_kb = static_cast<int>(knob_number("MINIVLLM_AR_TILE_KB"));
  // Every choice is agreed: ranks on different kernels (or Lamport tiles: a block's buffer turns
  // follow its calls) would wait for each other forever.
  const std::vector<int32_t> first =
      min_over_ranks({wanted ? 1 : 0, static_cast<int32_t>(max_bytes / 16), lamport ? 1 : 0, push ? 1 : 0, tile_kb,
                      stamped ? 1 : 0, static_cast<int32_t>(two_shot_bytes / 16)});
  if (first[0] != 1) return nullptr;
  const size_t one_shot_max = static_cast<size_t>(first[1]) * 16;
  // Two-shot is a Lamport form: with the flag kernel every sum stays one-shot.
  max_bytes = first[2] == 1 ? std::max(one_shot_max, static_cast<size_t>(first[6]) * 16) : one_shot_max;

  std::unique_ptr<CustomAllReduce> ar(new CustomAllReduce(rank, world, device, stream));
  ar->max_bytes_ = max_bytes;
  ar->one_shot_max_ = one_shot_max;
  ar->push_ = first[3] == 1;  // pull (=1) on any rank pulls on all
  ar->lamport_ = first[2] == 1;
  ar->lamport_tile_kb_ = first[4];
  ar->stamped_ = first[5] == 1;
  ar->pdl_ = knob_flag("MINIVLLM_AR_PDL");
  const size_t buffer_bytes = custom_ar_buffer_bytes(max_bytes, world, ar->lamport_);
  // Local steps never throw before the agreement: a rank that failed alone must still take part
  // in the collectives below.
  bool good = ok(cudaMalloc(&ar->own_, buffer_bytes)) && ok(cudaMemsetAsync(ar->own_, 0, buffer_bytes, stream)) &&
              ok(cudaMalloc(&ar->epochs_, sizeof(uint32_t) * kMaxBlocks)) &&
              ok(cudaMemsetAsync(ar->epochs_, 0, sizeof(uint32_t) * kMaxBlocks, stream)) &&
              ok(cudaMalloc(&ar->stamped_epoch_, sizeof(uint32_t))) &&
              ok(cudaMemsetAsync(ar->stamped_epoch_, 0, sizeof(uint32_t), stream));
  if (good && ar->lamport_) {
    const size_t base = custom_ar_lamport_base(max_bytes, world);
    good = ok(cudaMalloc(&ar->lamport_epochs_, sizeof(uint32_t) * kLamportMaxBlocks)) &&
           ok(cudaMemsetAsync(ar->lamport_epochs_, 0, sizeof(uint32_t) * kLamportMaxBlocks, stream)) &&
           ok(cudaMalloc(&ar->lamport_prev_, sizeof(int64_t) * kLamportMaxBlocks)) &&
           ok(cudaMemsetAsync(ar->lamport_prev_, 0, sizeof(int64_t) * kLamportMaxBlocks, stream));
    if (good) {
      launch_lamport_fill(static_cast<char*>(ar->own_) + base,
                          static_cast<int64_t>(custom_ar_lamport_bytes(max_bytes, world, true)), stream);
    }
  }
  void* host_flag = nullptr;
  good = good && ok(cudaHostAlloc(&host_flag, sizeof(int), cudaHostAllocMapped));
  if (host_flag != nullptr) {
    ar->abort_host_ = static_cast<volatile int*>(host_flag);
    *ar->abort_host_ = 0;
    void* dev_flag = nullptr;
    good = good && ok(cudaHostGetDevicePointer(&dev_flag, host_flag, 0));
    ar->abort_dev_ = static_cast<int*>(dev_flag);
  }
  PeerRecord mine{};
  good = good && ok(cudaIpcGetMemHandle(&mine.handle, ar->own_));
  mine.pointer = reinterpret_cast<uint64_t>(ar->own_);
  mine.pid = static_cast<int32_t>(getpid());
  mine.device = device;
  if (!agree(good)) return nullptr;

  // Exchange the records (in place: this rank's record at its own slot).
  int32_t words[kRecordWords] = {};
  std::memcpy(words, &mine, sizeof(mine));
  CUDA_CHECK(cudaMemcpyAsync(scratch + static_cast<size_t>(rank) * kRecordWords, words, sizeof(words),
                             cudaMemcpyHostToDevice, stream));
  comm.all_gather(Tensor(scratch + static_cast<size_t>(rank) * kRecordWords, DType::kI32, {kRecordWords}, DeviceKind::kCuda),
                  Tensor(scratch, DType::kI32, {static_cast<int64_t>(world) * kRecordWords}, DeviceKind::kCuda));
  std::vector<int32_t> all(static_cast<size_t>(world) * kRecordWords);
  CUDA_CHECK(cudaMemcpyAsync(all.data(), scratch, all.size() * sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));

  good = true;
  for (int q = 0; q < world; ++q) {
    PeerRecord r{};
    std::memcpy(&r, all.data() + static_cast<size_t>(q) * kRecordWords, sizeof(r));
    if (q == rank) {
      ar->peers_[q] = ar->own_;
      continue;
    }
    if (r.pid == mine.pid) {
      // A rank of this process (one thread per GPU): the pointer itself, through peer access.
      int can = 0;
      good = good && ok(cudaDeviceCanAccessPeer(&can, device, r.device)) && can == 1;
      if (good) {
        const cudaError_t e = cudaDeviceEnablePeerAccess(r.device, 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled) {
          cudaGetLastError();
        } else {
          good = good && ok(e);
        }
      }
      ar->peers_[q] = reinterpret_cast<void*>(r.pointer);
    } else if (good) {
      void* p = nullptr;
      good = ok(cudaIpcOpenMemHandle(&p, r.handle, cudaIpcMemLazyEnablePeerAccess));
      if (good) {
        ar->peers_[q] = p;
        ar->opened_[q] = true;
      }
    }
  }
  if (!agree(good)) return nullptr;
  // Every peer's memset is done: each one's agreement kernel ran after it on its stream.
  return ar;
}

CustomAllReduce::~CustomAllReduce() {
  if (leak_) return;  // a kernel may still be reading (a dead peer's) memory: keep everything
  int saved = -1;
  cudaGetDevice(&saved);
  cudaSetDevice(device_);
  for (int q = 0; q < kMaxRanks; ++q) {
    if (opened_[q] && peers_[q] != nullptr) cudaIpcCloseMemHandle(peers_[q]);
  }
  if (own_ != nullptr) cudaFree(own_);
  if (epochs_ != nullptr) cudaFree(epochs_);
  if (stamped_epoch_ != nullptr) cudaFree(stamped_epoch_);
  if (lamport_epochs_ != nullptr) cudaFree(lamport_epochs_);
  if (lamport_prev_ != nullptr) cudaFree(lamport_prev_);
  if (abort_host_ != nullptr) cudaFreeHost(const_cast<int*>(abort_host_));
  cudaGetLastError();
  if (saved >= 0) cudaSetDevice(saved);
}

bool CustomAllReduce::handles(const Tensor& t) const {
  return (t.dtype() == DType::kBF16 || t.dtype() == DType::kF32) && t.nbytes() <= max_bytes_ && t.nbytes() % 16 == 0 &&
         reinterpret_cast<uintptr_t>(t.data()) % 16 == 0;
}

CustomAllReduceArgs CustomAllReduce::args_for(const Tensor& t) const {
  CustomAllReduceArgs a{};
  for (int q = 0; q < kMaxRanks; ++q) a.buffers[q] = peers_[q];
  a.epochs = epochs_;
  a.abort_flag = abort_dev_;
  a.data = t.data();
  a.bytes = static_cast<int64_t>(t.nbytes());
  a.half_bytes = static_cast<int64_t>(max_bytes_) * world_;
  a.slot_bytes = static_cast<int64_t>(max_bytes_);
  a.push = push_;
  a.rank = rank_;
  a.world = world_;
  a.lamport_epochs = lamport_epochs_;
  a.lamport_prev = lamport_prev_;
  a.lamport_base = static_cast<int64_t>(custom_ar_lamport_base(max_bytes_, world_));
  a.lamport_tile_kb = lamport_tile_kb_;
  a.pdl = pdl_;
  return a;
}

void CustomAllReduce::all_reduce_sum(const Tensor& t, float* accumulate) {
  CustomAllReduceArgs a = args_for(t);
  a.accumulate = accumulate;
  a.bf16 = t.dtype() == DType::kBF16;
  a.lamport = lamport_;
  a.two_shot = lamport_ && t.nbytes() > one_shot_max_;
  launch_custom_all_reduce(a, stream_);
}

bool CustomAllReduce::all_reduce_sum_norm(const Tensor& t, const Tensor& accumulator, const Tensor& norm_weight,
                                          float eps, const Tensor& normed) {
  // The Lamport kernel's epilogue (sum_tile_norm): bf16 partials, rows of 256-2048 values (a
  // power of two: whole warps of a tile, and the width whose unfused rms_norm sums in the same
  // order), an fp32 residual and a bf16 output of t's shape. Otherwise the caller norms.
  const int64_t h = norm_weight.numel();
  if (!lamport_ || !handles(t) || t.nbytes() > one_shot_max_ || t.dtype() != DType::kBF16 ||
      accumulator.dtype() != DType::kF32 || accumulator.numel() != t.numel() || normed.dtype() != DType::kBF16 ||
      normed.numel() != t.numel() || h < 256 || h > 2048 || (h & (h - 1)) != 0 || t.numel() % h != 0 ||
      reinterpret_cast<uintptr_t>(normed.data()) % 16 != 0 ||
      (norm_weight.dtype() != DType::kBF16 && norm_weight.dtype() != DType::kF32)) {
    return false;
  }
  CustomAllReduceArgs a = args_for(t);
  a.accumulate = accumulator.ptr<float>();
  a.bf16 = true;
  a.lamport = true;
  a.normed_out = normed.data();
  a.norm_weight = norm_weight.data();
  a.norm_w_f32 = norm_weight.dtype() == DType::kF32;
  a.eps = eps;
  a.row_elems = h;
  launch_custom_all_reduce(a, stream_);
  return true;
}

bool CustomAllReduce::stamped_gather(const Tensor& in) const {
  return stamped_ && in.nbytes() <= kStampedMaxBytes && in.nbytes() % 4 == 0 &&
         reinterpret_cast<uintptr_t>(in.data()) % 4 == 0;
}

bool CustomAllReduce::handles_gather(const Tensor& in, const Tensor& out) const {
  if (out.nbytes() != world_ * in.nbytes()) return false;
  if (stamped_gather(in)) return reinterpret_cast<uintptr_t>(out.data()) % 4 == 0;
  return in.nbytes() <= one_shot_max_ && in.nbytes() % 16 == 0 && reinterpret_cast<uintptr_t>(in.data()) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(out.data()) % 16 == 0;
}

void CustomAllReduce::all_gather(const Tensor& in, const Tensor& out) {
  CustomAllReduceArgs a = args_for(in);
  a.gather_out = out.data();
  a.stamped = stamped_gather(in);
  a.stamped_epoch = stamped_epoch_;
  a.stamped_base = static_cast<int64_t>(custom_ar_stamped_base(max_bytes_, world_, lamport_));
  launch_custom_all_reduce(a, stream_);
}

void CustomAllReduce::abort() {
  if (abort_host_ != nullptr) __atomic_store_n(const_cast<int*>(abort_host_), 1, __ATOMIC_RELEASE);
}

}  // namespace minivllm::cuda
