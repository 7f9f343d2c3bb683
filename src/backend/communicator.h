// Communicator: the collectives tensor parallelism needs, over the tensors of one backend (host
// memory on the CPU, device memory on CUDA). Tensor-parallel code calls only this interface; it
// never names NCCL. Implementations: SingleRankCommunicator (here), ShmCommunicator (CPU ranks in
// separate processes over shared memory, cpu/shm_communicator.h), NcclCommunicator (cuda/).
//
// Every rank makes the same calls in the same order with tensors of the same shape and dtype
// (f32, bf16 or i32). Calls are enqueued on the backend's stream where it has one (so they can be
// captured in a CUDA graph) and never synchronise with the host beyond what the backend does.
// abort() may be called from any thread: every pending and later call then throws an Error.
#pragma once

#include <memory>
#include <string>

#include "common/tensor.h"

namespace minivllm {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // t = sum over ranks of t, in place.
  virtual void all_reduce_sum(const Tensor& t) = 0;
  // accumulator (f32) += sum over ranks of partial (f32, same element count): the row-parallel
  // linear's all-reduce fused with the residual add. Bit-identical to all_reduce_sum(partial) then
  // accumulator += partial. Returns false, doing nothing, where the implementation cannot fuse
  // (the caller then does the two steps itself); partial's contents are unspecified after true.
  virtual bool all_reduce_sum_into(const Tensor& partial, const Tensor& accumulator) { return false; }
  // all_reduce_sum_into, then normed (activation dtype, accumulator's shape) = rms_norm of the
  // accumulator's rows (norm_weight's length) * norm_weight: the next layer's input norm, fused
  // into the reduction. Returns false, doing nothing, where the implementation cannot.
  virtual bool all_reduce_sum_into_norm(const Tensor& partial, const Tensor& accumulator, const Tensor& norm_weight,
                                        float eps, const Tensor& normed) {
    return false;
  }
  // t = min over ranks of t, in place (i32 only; used once, for the number of KV blocks).
  virtual void all_reduce_min(const Tensor& t) = 0;
  // out[world_size * in.numel()] = the ranks' `in`, concatenated in rank order.
  virtual void all_gather(const Tensor& in, const Tensor& out) = 0;
  // Like all_gather, but only rank 0 receives; `out` is ignored on the other ranks.
  virtual void gather(const Tensor& in, const Tensor& out) = 0;
  // t = root's t on every rank.
  virtual void broadcast(const Tensor& t, int root) = 0;
  virtual void barrier() = 0;
  // Wakes every pending call, which then throws; later calls throw at once. Thread-safe.
  virtual void abort() = 0;
  // Collective, at shutdown: every rank calls it after its last collective, at about the same time.
  // Releases what the ranks share, together (NCCL's teardown waits for every rank: a rank that
  // tore down alone would wait for the others' exit). Later calls throw. A no-op where nothing
  // needs the peers (the CPU communicator's segment lives until its last mapping goes).
  virtual void close() {}
};

// world_size 1: every collective is the identity (gather copies in to out).
std::unique_ptr<Communicator> make_single_rank_communicator(class Backend& backend);

}  // namespace minivllm
