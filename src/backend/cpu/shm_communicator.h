// ShmCommunicator: the collectives of tensor parallelism between CPU ranks that are separate OS
// processes on one host, over one anonymous shared-memory segment.
//
// The segment. Rank 0 calls make_cpu_comm_bootstrap(world_size) before it starts the workers: a
// memfd (memfd_create without MFD_CLOEXEC, so posix_spawn / fork + exec children inherit it;
// nothing is ever named in /dev/shm, so a crash leaves nothing behind) holding a header and one
// data slot per rank. The bootstrap string "memfd:<fd>:<world_size>:<id>" (id: 16 hex digits, also
// in the header, so a wrong fd is caught) reaches the workers by argv or environment; the fd number
// is the same in every child. Each call makes a new segment. A worker process closes its
// inherited fd once it has mapped the segment; the creating process closes its fd when its first
// communicator of the segment has joined (all ranks have mapped it by then) and forgets the
// segment when that communicator is destroyed, or at release_cpu_comm_bootstrap.
//
// Layout: a 16 KiB header (magic, world size, slot size, the abort flag and its reason, the futex
// word, and one cache-line-aligned record per rank: its pid, its barrier count, the descriptor of
// its current collective), then world_size slots of slot_bytes, each split in two halves used
// alternately (double buffering): a collective is a sequence of steps, each one barrier; in step s
// every rank writes its chunk into half s % 2 of its own slot, arrives at barrier s, then reads
// the other ranks' half s % 2. Nobody writes that half again before barrier s + 1, which every
// rank reaches only after its reads of step s, so one barrier per chunk suffices. Messages larger
// than a half slot go through in chunks of it.
//
// Determinism: every rank sums the same slots in rank order 0..world_size-1 with the same code
// (fp32 for bf16, rounded once), so results are bit-identical on all ranks and run to run.
//
// Waiting. A barrier is a per-rank arrival counter in the rank's own cache line (no shared
// counter to reset); a waiter first spins (pause, then sched_yield, so a peer runnable on the same
// core gets it) for MINIVLLM_SHM_SPIN_US microseconds (default 50), then sleeps on a futex word
// of the segment (FUTEX_WAIT, not private: it works across processes) with a 100 ms timeout;
// arriving ranks wake sleepers only when some are registered. Every wait checks the abort flag.
//
// Abort and dead peers. abort() (any thread, any process) sets the shared flag and wakes every
// waiter: every pending and later call on every rank throws minivllm::Error ("communicator
// aborted: <why>"). Dead peers need no watchdog: every ~100 ms a sleeping waiter checks whether the
// ranks it still waits for are alive (their pids, recorded at join; gone or a zombie is dead) and,
// if one is not, aborts the segment naming it, so a dead rank is noticed within ~0.2 s. A rank
// that dies before it joined has no pid yet: for that, rank 0's watchdog (which sees its children
// exit) calls abort_cpu_comm_bootstrap, which works before and while the communicator exists (the
// join included). All ranks must share a pid namespace (true for children of rank 0).
//
// Each step also compares the ranks' collective descriptors (op, dtype, bytes, root): ranks that
// call different collectives or sizes abort with a message naming both instead of corrupting data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "backend/communicator.h"

namespace minivllm {

// Per-rank slot size of make_cpu_comm_bootstrap: 8 MiB, i.e. 4 MiB chunks.
inline constexpr size_t kShmDefaultSlotBytes = size_t{8} << 20;

// Creates the segment of a world of `world_size` ranks (2..64) with slots of `slot_bytes`
// (rounded up to 4 KiB, at least 8 KiB) and returns "memfd:<fd>:<world_size>:<id>". The fd is
// inheritable until this process's first communicator of the segment has joined.
std::string make_cpu_comm_bootstrap(int world_size, size_t slot_bytes = kShmDefaultSlotBytes);

// In the process that made `bootstrap`, until its communicator of it is destroyed (or the
// bootstrap released): aborts the segment, as abort() would, so that every rank's pending and
// later calls throw, the join of the constructor included. For a watchdog that sees a worker die.
// Returns false (and does nothing) when this process holds no such segment.
bool abort_cpu_comm_bootstrap(const std::string& bootstrap, const std::string& why);

// In the process that made `bootstrap`: closes its fd if still open and forgets the segment. For
// when no communicator of it is made here (e.g. starting the workers failed); idempotent.
void release_cpu_comm_bootstrap(const std::string& bootstrap);

class ShmCommunicator : public Communicator {
 public:
  // Maps the segment of `bootstrap` and joins it as `rank`; blocks until every rank has joined
  // (throws if the segment is aborted meanwhile). One rank per process, except in the process
  // that made the bootstrap, which may hold several (threads; tests).
  // num_threads: OpenMP threads for the copies and sums of large chunks (1: none).
  ShmCommunicator(int rank, int world_size, const std::string& bootstrap, int num_threads = 1);
  ~ShmCommunicator() override;
  ShmCommunicator(const ShmCommunicator&) = delete;
  ShmCommunicator& operator=(const ShmCommunicator&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }

  void all_reduce_sum(const Tensor& t) override;  // f32, bf16 (fp32 accumulation), i32 (wraps)
  void all_reduce_min(const Tensor& t) override;  // i32
  // Any dtype. `in` may be out's own block (out + rank * in.numel()), NCCL's in-place form.
  void all_gather(const Tensor& in, const Tensor& out) override;
  void gather(const Tensor& in, const Tensor& out) override;
  void broadcast(const Tensor& t, int root) override;  // any dtype
  void barrier() override;
  void abort() override;
  // abort() with the reason every rank's error will carry.
  void abort(const std::string& why);
  bool aborted() const;

  size_t chunk_bytes() const { return chunk_bytes_; }

 private:
  struct Op;
  // Sums or mins n elements of the world_size sources, in rank order, into out.
  using ReduceFn = void (*)(void* out, const char* const* srcs, int world_size, size_t n, int num_threads);
  char* half(int r, uint64_t step) const;  // rank r's half slot of step `step`
  void step(const Op& op);                 // one barrier, then the check of the ranks' descriptors
  void wait_all(uint64_t target, const Op& op);
  bool all_arrived(uint64_t target, bool seq_cst) const;
  void check_peers_alive(uint64_t target, const Op& op);
  [[noreturn]] void throw_aborted(const Op& op) const;
  void copy(void* dst, const void* src, size_t bytes) const;
  void all_reduce(const Tensor& t, uint32_t code, ReduceFn fn);
  void gather_impl(const Tensor& in, const Tensor& out, bool everyone);

  int rank_ = 0;
  int world_size_ = 0;
  int num_threads_ = 1;
  void* base_ = nullptr;  // the mapping
  size_t map_bytes_ = 0;
  size_t slot_bytes_ = 0;
  size_t chunk_bytes_ = 0;  // half a slot
  uint64_t steps_ = 0;      // barriers passed by this rank (the join is the first)
  int64_t spin_ns_ = 50000;
  uint64_t id_ = 0;
  bool creator_ = false;  // this process made the segment (holds it in its registry)
};

}  // namespace minivllm
