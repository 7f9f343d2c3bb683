// CustomAllReduce: a one-shot all-reduce (sum) between the GPUs of one host, over CUDA IPC and
// NVLink, used by NcclCommunicator::all_reduce_sum up to max_bytes() (NCCL stays the fallback for
// everything else). MINIVLLM_NO_CUSTOM_AR=1 turns it off. max_bytes: 8 MiB for 2 ranks (each rank
// then reads what a ring would move, so one-shot loses nothing on bandwidth and saves NCCL's
// latency and its non-blocking launch cost), 512 KiB for more ranks (each reads world - 1 peers'
// messages); MINIVLLM_CUSTOM_AR_MAX_BYTES overrides it (the smallest value over the ranks wins).
// Past it, up to MINIVLLM_CUSTOM_AR_TWO_SHOT_BYTES, the Lamport kernel's two-shot form: each rank
// sums 1/world of the message and sends the sum to the others (custom_all_reduce.cu), so a rank
// sends 2 (world - 1) / world of the message, as NCCL's ring does, in one kernel.
//
// Set-up (collective, inside the NcclCommunicator constructor, through NCCL): every rank allocates
// one buffer (two halves of world slots of max_bytes, then per-block flags), exports it with
// cudaIpcGetMemHandle, all-gathers (handle, pid, device) and maps every peer's buffer
// (cudaIpcOpenMemHandle; ranks that are threads of one process use the pointer itself with peer
// access enabled). Every step is agreed on by an all_reduce_min, so either every rank uses it or
// none does (e.g. no peer access between some pair of GPUs).
//
// One call, one kernel (custom_all_reduce.cu): the message is cut in tiles of kTileBytes (each
// thread two 16-byte vectors, so two loads per rank in flight; the Lamport kernel's tiles are 4 KB
// by default, MINIVLLM_AR_TILE_KB);
// tile i belongs to block i % kMaxBlocks, so a block owns the same bytes of the buffers whatever
// the message size, and blocks never wait for each other, only for the same block of the peers.
// Block b: stores its tiles of the input into slot `rank` of half (epoch & 1) of every peer's
// buffer (push: NVLink stores are posted, where a pull's remote loads each wait a round trip);
// fences; writes its epoch (a per-block counter kept in device memory, so graph replays advance it
// too) into every peer's flag [b][rank]; waits until its own flags [b][q] reach that epoch; reads
// its tiles of every rank from its own half, now local memory, in rank order 0..world-1 and sums
// in fp32 (bf16 rounded once), in place. Every rank sums in the same order: results are
// bit-identical across ranks. No barrier at the end: the next call writes the other half, and a
// rank can only get there once every peer has finished this call's predecessor (it waited for
// their flags of this call, set after it). MINIVLLM_CUSTOM_AR_PULL=1 (on any rank: agreed) keeps the
// earlier kernel: each rank copies its tiles into its own half, and the others read them there.
// Sums go through a kernel without flags or fences by default (the Lamport kernel,
// custom_all_reduce.cu: three buffers filled with a sentinel that data never equals, read as the
// words land; measured faster on both models at world_size 2, docs/PERFORMANCE.md).
// MINIVLLM_CUSTOM_AR_LAMPORT=0 on any rank (agreed over the ranks) sums through the flag kernel too.
// All-gathers of at most kStampedMaxBytes (the vocabulary-parallel sampler's stats and picks, two a
// decode step) take the stamped kernel: any bytes can be gathered, so no value is free to be a
// sentinel; instead each 32-bit word travels with the call's epoch in one 64-bit store, which lands
// whole, and the reader waits until a word's stamp is this call's. No flags, no fences, no
// emptying (old stamps never match a newer epoch), two halves in turn. Larger gathers, and all of
// them with MINIVLLM_STAMPED_GATHER=0 on any rank (agreed), take the flag kernel. Up to 4 KB the
// stamped kernel takes about half the flag kernel's time; at 16 KB they are level (measured:
// PERFORMANCE.md, "Two H200s again: the stamped all-gather").
//
// Abort: the spin loops read a host-mapped flag that abort() sets, so kernels waiting for a dead
// peer quit (the output is then garbage; the communicator is unusable anyway).
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/tensor.h"

namespace minivllm::cuda {

class NcclCommunicator;
struct CustomAllReduceArgs;

class CustomAllReduce {
 public:
  static constexpr int kMaxRanks = 8;
  static constexpr int kMaxBlocks = 128;
  static constexpr int kThreads = 512;
  static constexpr int kVecsPerThread = 2;
  static constexpr size_t kTileBytes = kThreads * 16 * kVecsPerThread;
  // The Lamport kernel's tiles: 16 KB (512 threads x two 16-byte vectors, up to 128 blocks), 8 KB
  // (512 x one) or 4 KB (256 x one, up to 256 blocks); MINIVLLM_AR_TILE_KB=16|8|4, agreed over the
  // ranks. Smaller tiles spread a decode-sized message over more SMs. 8 and 4 KB beat 16 KB on both
  // workloads at world_size 2 and are level with each other; 4 KB has the lowest latency on small
  // messages (measured: PERFORMANCE.md, "Smaller Lamport tiles, what the all-reduces still cost").
  static constexpr int kDefaultLamportTileKb = 4;
  static constexpr int kLamportMaxBlocks = 256;  // the Lamport kernel's block counters
  // The stamped gather's largest message a rank (one block; the sampler's stats at 1,024 rows).
  static constexpr size_t kStampedMaxBytes = size_t{16} << 10;

  // Collective (every rank calls it, in the NcclCommunicator constructor after NCCL's init).
  // nullptr on every rank when MINIVLLM_NO_CUSTOM_AR=1 on any rank, world_size > kMaxRanks, or
  // any rank cannot map its peers' memory.
  static std::unique_ptr<CustomAllReduce> create_if_enabled(NcclCommunicator& comm, int device, cudaStream_t stream);
  ~CustomAllReduce();
  CustomAllReduce(const CustomAllReduce&) = delete;
  CustomAllReduce& operator=(const CustomAllReduce&) = delete;

  // f32 or bf16, at most max_bytes(), a multiple of 16 bytes, 16-byte aligned. Past
  // one_shot_max_bytes() the Lamport kernel's two-shot form sums it.
  bool handles(const Tensor& t) const;
  size_t max_bytes() const { return max_bytes_; }
  size_t one_shot_max_bytes() const { return one_shot_max_; }
  // t = sum over ranks of t, in place, one kernel on the stream. With `accumulate` (f32, t's
  // element count): instead accumulate[i] += that sum (t bf16: the sum rounded to bf16 first, as
  // the unfused all-reduce then add would), t unchanged (the row-parallel linear's residual add).
  void all_reduce_sum(const Tensor& t, float* accumulate = nullptr);
  // all_reduce_sum(t, accumulator) and then normed = rms_norm(accumulator) * norm_weight, in the
  // same kernel, bit-identical to the two steps: the Lamport kernel, t bf16 and rows of 256 to
  // 2,048 values, a power of two (whole warps of a tile, summed in rms_norm's order); false,
  // doing nothing, otherwise.
  bool all_reduce_sum_norm(const Tensor& t, const Tensor& accumulator, const Tensor& norm_weight, float eps,
                           const Tensor& normed);
  // out = every rank's `in`, concatenated in rank order (any dtype), one kernel: up to
  // kStampedMaxBytes of whole 32-bit words, the stamped kernel; else (in at most max_bytes(), both
  // whole 16-byte vectors) the flag kernel's arrival and wait, then copies instead of sums.
  bool handles_gather(const Tensor& in, const Tensor& out) const;
  void all_gather(const Tensor& in, const Tensor& out);
  // Thread-safe: spinning kernels quit; later calls must not be made.
  void abort();
  // Teardown when the stream may still hold a kernel that peers' memory is read by (a peer that
  // died): nothing is freed or unmapped.
  void leak() { leak_ = true; }

 private:
  CustomAllReduce(int rank, int world, int device, cudaStream_t stream);
  // Whether all_gather(in, ...) takes the stamped kernel.
  bool stamped_gather(const Tensor& in) const;
  // The kernel's arguments for message t, every mode's fields at their defaults.
  CustomAllReduceArgs args_for(const Tensor& t) const;

  int rank_ = 0;
  int world_ = 0;
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  bool leak_ = false;
  size_t max_bytes_ = 0;                   // one rank's slot of a half: the largest sum taken
  size_t one_shot_max_ = 0;                // the largest one-shot sum (and gather); two-shot above
  bool push_ = true;                       // MINIVLLM_CUSTOM_AR_PULL=1: the pull kernel
  bool lamport_ = true;                    // sums by the Lamport kernel (MINIVLLM_CUSTOM_AR_LAMPORT=0 on any rank: not)
  int lamport_tile_kb_ = kDefaultLamportTileKb;
  uint32_t* lamport_epochs_ = nullptr;     // kLamportMaxBlocks, this device only
  int64_t* lamport_prev_ = nullptr;        // kLamportMaxBlocks, this device only
  void* own_ = nullptr;                    // this rank's buffer (cudaMalloc, exported)
  void* peers_[kMaxRanks] = {};            // every rank's buffer as this device sees it (own_ included)
  std::vector<bool> opened_;               // peers_[q] came from cudaIpcOpenMemHandle
  uint32_t* epochs_ = nullptr;             // kMaxBlocks counters, this device only
  bool pdl_ = true;                        // MINIVLLM_AR_PDL=0: plain launches
  bool stamped_ = true;                    // small gathers by the stamped kernel (MINIVLLM_STAMPED_GATHER=0: not)
  uint32_t* stamped_epoch_ = nullptr;      // the stamped kernel's call counter, this device only
  volatile int* abort_host_ = nullptr;     // pinned, mapped
  int* abort_dev_ = nullptr;               // its device address
};

// Launcher (custom_all_reduce.cu).
struct CustomAllReduceArgs {
  void* buffers[CustomAllReduce::kMaxRanks];  // every rank's buffer, this rank's own included
  uint32_t* epochs;
  const int* abort_flag;
  void* data;         // in place
  float* accumulate;  // or, when set (f32): accumulate += the sum
  void* gather_out;   // or, when set: an all-gather, gather_out[world * bytes] = every rank's data
  int64_t bytes;
  int64_t half_bytes;  // world * slot_bytes: half 1 starts there, the flags at twice that
  int64_t slot_bytes;  // max_bytes: rank q's tiles at q * slot_bytes of a half (push)
  bool push;           // push into the peers' slots (else each rank's own slot 0 is pulled)
  bool lamport;        // sums through the Lamport kernel (three sentinel-filled buffers, no flags)
  bool two_shot;       // the Lamport kernel's two-shot form (past the one-shot limit, no norm)
  int lamport_tile_kb;  // its tile: 16, 8 or 4 KB (the same for every call of a communicator)
  uint32_t* lamport_epochs;  // kLamportMaxBlocks counters of the Lamport kernel's calls
  int64_t* lamport_prev;     // per block: the bytes of its last Lamport call (emptied in the next)
  int64_t lamport_base;      // where the Lamport buffers start in each rank's buffer
  // With accumulate (Lamport kernel, bf16 t): normed_out (bf16 [T, row_elems]) = RMSNorm of the
  // updated residual rows, weighted by norm_weight (bf16, or f32 with norm_w_f32); the next
  // layer's norm, fused. nullptr: no norm.
  void* normed_out;
  const void* norm_weight;
  bool norm_w_f32;
  float eps;
  int64_t row_elems;
  // With gather_out and stamped: the stamped kernel, its counter and where its halves start.
  bool stamped;
  uint32_t* stamped_epoch;
  int64_t stamped_base;
  int rank;
  int world;
  bool bf16;
  // The Lamport and stamped kernels by programmatic dependent launch (pdl_launch.h): launched while
  // the kernel before them drains, waiting for its writes inside. MINIVLLM_AR_PDL=0 (or
  // MINIVLLM_NO_PDL=1): plain launches. Per rank: stream order only.
  bool pdl;
};
void launch_custom_all_reduce(const CustomAllReduceArgs& args, cudaStream_t stream);
// Fills `bytes` (a multiple of 4) with the Lamport kernel's empty pattern.
void launch_lamport_fill(void* p, int64_t bytes, cudaStream_t stream);

}  // namespace minivllm::cuda
