// ShmChannel: rank 0's control channel to its workers (seeds: write_shm / read_shm). One anonymous
// shared-memory segment (memfd: nothing appears in /dev/shm, and the kernel frees it when the last
// process holding it ends, however it ends) carries one message at a time: a length-prefixed
// [method, args] pair. Rank 0 writes and wakes every worker (a futex on the message counter);
// each worker reads, acknowledges and calls. Rank 0 writes the next message only after every
// worker has acknowledged the last one. Every wait wakes at least every 100 ms to check the
// channel's abort flag and a caller's liveness test, so a dead peer is an error, never a hang.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

namespace minivllm {

class ShmChannel {
 public:
  static constexpr int kMaxRanks = 64;
  // Rank 0: a new segment of `capacity` payload bytes; its fd stays open and inheritable (no
  // close-on-exec) so that worker processes started after this receive it.
  static ShmChannel create(int world_size, size_t capacity);
  // A worker: the inherited segment.
  static ShmChannel attach(int fd);

  ShmChannel() = default;
  ShmChannel(ShmChannel&& o) noexcept;
  ShmChannel& operator=(ShmChannel&& o) noexcept;
  ~ShmChannel();

  int fd() const { return fd_; }
  int world_size() const;
  size_t capacity() const;

  // `alive()` is called while waiting; false makes the wait throw an Error.
  using Alive = std::function<bool()>;
  // Rank 0: waits until every worker has read the previous message, then publishes this one.
  void write(const std::string& method, const std::string& args, const Alive& alive);
  // A worker: the next message (blocks until one arrives or the channel is aborted).
  void read(int rank, std::string* method, std::string* args, const Alive& alive);
  // A worker reports why it is about to exit (rank 0 puts it in its error).
  void set_error(int rank, const std::string& message);
  std::string error(int rank) const;
  // Marks the channel aborted and wakes every waiter (any process). Thread- and signal-safe.
  void abort();
  bool aborted() const;

 private:
  struct Header;
  void wait_until(std::atomic<uint32_t>* word, const std::function<bool()>& done, const Alive& alive,
                  const char* what) const;
  Header* header_ = nullptr;
  char* payload_ = nullptr;
  size_t mapped_ = 0;
  int fd_ = -1;
};

}  // namespace minivllm
