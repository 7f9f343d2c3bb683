// ShmCommunicator: see shm_communicator.h for the segment, the step protocol and abort.
#include "backend/cpu/shm_communicator.h"

#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <random>
#include <vector>

#include "common/check.h"
#include "common/dtype.h"
#include "common/tuning.h"

namespace minivllm {

namespace {

constexpr uint64_t kMagic = 0x314d4d4f434d564dULL;  // "MVMCOMM1"
constexpr uint32_t kVersion = 1;
constexpr int kMaxRanks = 64;
constexpr size_t kHeaderBytes = 16384;
constexpr size_t kPageBytes = 4096;
constexpr const char* kMemfdName = "minivllm-comm";
constexpr int64_t kSleepSliceNs = 100'000'000;  // futex timeout and liveness period
constexpr int64_t kPauseNs = 5'000;             // pure pause spinning before sched_yield

// What a rank is doing in a step; equal on every rank unless the ranks' calls disagree.
struct Desc {
  uint32_t code;
  uint32_t dtype;
  uint64_t nbytes;
  int64_t root;
};

struct alignas(128) RankRecord {
  uint64_t arrived;  // barriers this rank has reached (atomic)
  int32_t pid;       // atomic; 0 until the rank joined
  uint32_t unused;
  Desc desc[2];  // of steps with even / odd index
};

struct Header {
  uint64_t magic;
  uint32_t version;
  int32_t world_size;
  uint64_t slot_bytes;
  uint64_t total_bytes;
  uint64_t id;
  alignas(64) uint32_t aborted;  // atomic: 0, 1 (reason being written), 2 (reason written)
  char reason[512];
  alignas(64) uint32_t wake_word;  // atomic futex word, bumped to wake sleepers
  alignas(64) uint32_t sleepers;   // atomic: ranks asleep (or about to be) on wake_word
  alignas(128) RankRecord ranks[kMaxRanks];
};
static_assert(sizeof(Header) <= kHeaderBytes, "header too large");
static_assert(std::atomic_ref<uint64_t>::is_always_lock_free && std::atomic_ref<uint32_t>::is_always_lock_free &&
                  std::atomic_ref<int32_t>::is_always_lock_free,
              "shared-memory atomics must be lock-free to work across processes");

enum OpCode : uint32_t { kJoin = 1, kAllReduceSum, kAllReduceMin, kAllGather, kGather, kBroadcast, kBarrier };

const char* op_name(uint32_t code) {
  switch (code) {
    case kJoin: return "join";
    case kAllReduceSum: return "all_reduce_sum";
    case kAllReduceMin: return "all_reduce_min";
    case kAllGather: return "all_gather";
    case kGather: return "gather";
    case kBroadcast: return "broadcast";
    case kBarrier: return "barrier";
    default: return "?";
  }
}

template <typename T>
std::atomic_ref<T> atomic(T& x) {
  return std::atomic_ref<T>(x);
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Not FUTEX_PRIVATE: the word lives in a shared mapping and the waiters are other processes.
void futex_wait(uint32_t* word, uint32_t expected, int64_t timeout_ns) {
  timespec ts{static_cast<time_t>(timeout_ns / 1'000'000'000), static_cast<long>(timeout_ns % 1'000'000'000)};
  syscall(SYS_futex, word, FUTEX_WAIT, expected, &ts, nullptr, 0);  // EAGAIN, EINTR, ETIMEDOUT: recheck
}

void futex_wake_all(uint32_t* word) { syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0); }

// Alive unless gone or a zombie (an unreaped child still answers kill(pid, 0)).
bool process_alive(int pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return errno != ENOENT;
  char buf[512];
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* close = std::strrchr(buf, ')');  // "pid (comm) S ...", comm may hold ')'
  if (close == nullptr || close[1] == '\0' || close[2] == '\0') return true;
  return close[2] != 'Z' && close[2] != 'X';
}

struct Bootstrap {
  int fd = -1;
  int world_size = 0;
  uint64_t id = 0;
};

Bootstrap parse_bootstrap(const std::string& s) {
  Bootstrap b;
  const std::string prefix = "memfd:";
  const char* p = s.data() + prefix.size();
  const char* end = s.data() + s.size();
  bool ok = s.rfind(prefix, 0) == 0;
  if (ok) {
    auto r = std::from_chars(p, end, b.fd);
    ok = r.ec == std::errc() && r.ptr < end && *r.ptr == ':';
    if (ok) r = std::from_chars(r.ptr + 1, end, b.world_size);
    ok = ok && r.ec == std::errc() && r.ptr < end && *r.ptr == ':';
    if (ok) r = std::from_chars(r.ptr + 1, end, b.id, 16);
    ok = ok && r.ec == std::errc() && r.ptr == end;
  }
  MINIVLLM_CHECK(ok && b.fd >= 0 && b.world_size >= 1)
      << "CPU communicator bootstrap '" << s << "' is not memfd:<fd>:<world_size>:<id>";
  return b;
}

// The segments this process made: their fd (until closed) and a mapping of their header (for
// abort_cpu_comm_bootstrap). Workers have none.
struct Created {
  uint64_t id;
  int fd;
  void* header;
};
std::mutex g_created_mu;
std::vector<Created> g_created;

Created* find_created(uint64_t id) {
  for (Created& c : g_created) {
    if (c.id == id) return &c;
  }
  return nullptr;
}

// Closes the creator's fd once (several ranks may live in the creating process).
void close_created_fd(uint64_t id) {
  std::lock_guard<std::mutex> lock(g_created_mu);
  Created* c = find_created(id);
  if (c != nullptr && c->fd >= 0) {
    ::close(c->fd);
    c->fd = -1;
  }
}

void release_created(uint64_t id) {
  std::lock_guard<std::mutex> lock(g_created_mu);
  for (size_t i = 0; i < g_created.size(); ++i) {
    if (g_created[i].id != id) continue;
    if (g_created[i].fd >= 0) ::close(g_created[i].fd);
    munmap(g_created[i].header, kHeaderBytes);
    g_created.erase(g_created.begin() + static_cast<std::ptrdiff_t>(i));
    return;
  }
}

// Element-wise reductions over the ranks' chunks, rank 0 first: the same code and order on
// every rank, hence the same bits. Blocks of 1024 stay in L1 while the ranks are folded in.
struct F32Sum {
  using T = float;
  using Acc = float;
  static Acc load(T x) { return x; }
  static T store(Acc a) { return a; }
  static Acc combine(Acc a, Acc b) { return a + b; }
};
struct Bf16Sum {
  using T = uint16_t;
  using Acc = float;
  static Acc load(T x) { return bf16_to_f32(x); }
  static T store(Acc a) { return f32_to_bf16(a); }
  static Acc combine(Acc a, Acc b) { return a + b; }
};
struct I32Sum {  // modular, like NCCL's
  using T = int32_t;
  using Acc = uint32_t;
  static Acc load(T x) { return static_cast<uint32_t>(x); }
  static T store(Acc a) { return static_cast<int32_t>(a); }
  static Acc combine(Acc a, Acc b) { return a + b; }
};
struct I32Min {
  using T = int32_t;
  using Acc = int32_t;
  static Acc load(T x) { return x; }
  static T store(Acc a) { return a; }
  static Acc combine(Acc a, Acc b) { return std::min(a, b); }
};

template <class R>
void reduce(void* out_v, const char* const* srcs, int world_size, size_t n, int num_threads) {
  using T = typename R::T;
  using Acc = typename R::Acc;
  constexpr size_t kBlock = 1024;
  T* out = static_cast<T*>(out_v);
  const int64_t blocks = static_cast<int64_t>((n + kBlock - 1) / kBlock);
#pragma omp parallel for num_threads(num_threads) if (num_threads > 1 && blocks >= 64) schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const size_t i0 = static_cast<size_t>(b) * kBlock;
    const size_t m = std::min(kBlock, n - i0);
    Acc acc[kBlock];
    const T* s0 = reinterpret_cast<const T*>(srcs[0]) + i0;
    for (size_t i = 0; i < m; ++i) acc[i] = R::load(s0[i]);
    for (int r = 1; r < world_size; ++r) {
      const T* s = reinterpret_cast<const T*>(srcs[r]) + i0;
      for (size_t i = 0; i < m; ++i) acc[i] = R::combine(acc[i], R::load(s[i]));
    }
    for (size_t i = 0; i < m; ++i) out[i0 + i] = R::store(acc[i]);
  }
}

Header* header_of(void* base) { return static_cast<Header*>(base); }

// Raises the shared flag (the first reason wins) and wakes every sleeper of every process.
void abort_segment(Header* h, const std::string& why) {
  uint32_t expected = 0;
  if (atomic(h->aborted).compare_exchange_strong(expected, 1)) {
    const size_t n = std::min(why.size(), sizeof(h->reason) - 1);
    std::memcpy(h->reason, why.data(), n);
    h->reason[n] = '\0';
    atomic(h->aborted).store(2, std::memory_order_release);
  }
  atomic(h->wake_word).fetch_add(1);
  futex_wake_all(&h->wake_word);
}

void check_host_tensor(const Tensor& t, const char* op, const char* what) {
  MINIVLLM_CHECK(t.defined()) << op << ": " << what << " is undefined";
  MINIVLLM_CHECK(t.device() == DeviceKind::kCpu) << op << ": " << what << " " << t.describe() << " is not on the host";
  MINIVLLM_CHECK(t.numel() == 0 || !t.empty()) << op << ": " << what << " " << t.describe() << " has no data";
}

}  // namespace

struct ShmCommunicator::Op {
  uint32_t code;
  DType dtype;
  uint64_t nbytes;
  int64_t root;
};

std::string make_cpu_comm_bootstrap(int world_size, size_t slot_bytes) {
  MINIVLLM_CHECK(world_size >= 2 && world_size <= kMaxRanks)
      << "make_cpu_comm_bootstrap: world_size " << world_size << " must be in [2, " << kMaxRanks << "]";
  slot_bytes = (std::max(slot_bytes, 2 * kPageBytes) + kPageBytes - 1) / kPageBytes * kPageBytes;
  const size_t total = kHeaderBytes + static_cast<size_t>(world_size) * slot_bytes;
  // No MFD_CLOEXEC: the workers started after this inherit the fd.
  const int fd = static_cast<int>(syscall(SYS_memfd_create, kMemfdName, 0u));
  MINIVLLM_CHECK(fd >= 0) << "make_cpu_comm_bootstrap: memfd_create failed: " << std::strerror(errno);
  if (ftruncate(fd, static_cast<off_t>(total)) != 0) {
    const int err = errno;
    ::close(fd);
    MINIVLLM_FAIL() << "make_cpu_comm_bootstrap: ftruncate to " << total << " bytes failed: " << std::strerror(err);
  }
  void* p = mmap(nullptr, kHeaderBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    ::close(fd);
    MINIVLLM_FAIL() << "make_cpu_comm_bootstrap: mmap failed: " << std::strerror(err);
  }
  std::random_device entropy;
  const uint64_t id = (static_cast<uint64_t>(entropy()) << 32) ^ entropy() ^ static_cast<uint64_t>(now_ns());
  Header* h = header_of(p);  // the file starts zeroed: counters 0, not aborted, no pids
  h->version = kVersion;
  h->world_size = world_size;
  h->slot_bytes = slot_bytes;
  h->total_bytes = total;
  h->id = id;
  atomic(h->magic).store(kMagic, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(g_created_mu);
    g_created.push_back(Created{id, fd, p});
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(id));
  return "memfd:" + std::to_string(fd) + ":" + std::to_string(world_size) + ":" + hex;
}

bool abort_cpu_comm_bootstrap(const std::string& bootstrap, const std::string& why) {
  const Bootstrap b = parse_bootstrap(bootstrap);
  std::lock_guard<std::mutex> lock(g_created_mu);
  Created* c = find_created(b.id);
  if (c == nullptr) return false;
  abort_segment(header_of(c->header), why);
  return true;
}

void release_cpu_comm_bootstrap(const std::string& bootstrap) { release_created(parse_bootstrap(bootstrap).id); }

ShmCommunicator::ShmCommunicator(int rank, int world_size, const std::string& bootstrap, int num_threads)
    : rank_(rank), world_size_(world_size), num_threads_(std::max(1, num_threads)) {
  const Bootstrap b = parse_bootstrap(bootstrap);
  MINIVLLM_CHECK_EQ(b.world_size, world_size) << "ShmCommunicator: world size of bootstrap '" << bootstrap << "'";
  MINIVLLM_CHECK(rank >= 0 && rank < world_size) << "ShmCommunicator: rank " << rank << " of world " << world_size;
  id_ = b.id;
  {
    std::lock_guard<std::mutex> lock(g_created_mu);
    creator_ = find_created(id_) != nullptr;
  }
  // The fd must be our segment, inherited from rank 0 (the number is meaningless elsewhere).
  char link[256] = {};
  const std::string fd_path = "/proc/self/fd/" + std::to_string(b.fd);
  const ssize_t len = readlink(fd_path.c_str(), link, sizeof(link) - 1);
  MINIVLLM_CHECK(len > 0) << "ShmCommunicator: fd " << b.fd << " of bootstrap '" << bootstrap
                          << "' is not open in this process (" << std::strerror(errno)
                          << "); start the workers after make_cpu_comm_bootstrap and let them inherit it";
  const std::string target(link, static_cast<size_t>(len));
  MINIVLLM_CHECK(target.rfind(std::string("/memfd:") + kMemfdName, 0) == 0)
      << "ShmCommunicator: fd " << b.fd << " of bootstrap '" << bootstrap << "' is " << target
      << ", not a segment of make_cpu_comm_bootstrap";
  struct stat st{};
  MINIVLLM_CHECK(fstat(b.fd, &st) == 0 && static_cast<size_t>(st.st_size) >= kHeaderBytes)
      << "ShmCommunicator: fd " << b.fd << " is too small for a segment";
  map_bytes_ = static_cast<size_t>(st.st_size);
  base_ = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, b.fd, 0);
  MINIVLLM_CHECK(base_ != MAP_FAILED) << "ShmCommunicator: mmap of " << map_bytes_
                                      << " bytes failed: " << std::strerror(errno);
  // A worker holds one rank: the mapping keeps the segment, its own children need not inherit it.
  if (!creator_) ::close(b.fd);
  try {
    Header* h = header_of(base_);
    MINIVLLM_CHECK(atomic(h->magic).load(std::memory_order_acquire) == kMagic && h->version == kVersion &&
                   h->id == id_)
        << "ShmCommunicator: fd " << b.fd << " holds no segment of bootstrap '" << bootstrap << "'";
    MINIVLLM_CHECK(h->world_size == world_size && h->total_bytes == map_bytes_)
        << "ShmCommunicator: segment of world " << h->world_size << ", " << h->total_bytes << " bytes vs world "
        << world_size << ", " << map_bytes_ << " bytes mapped";
    slot_bytes_ = h->slot_bytes;
    chunk_bytes_ = slot_bytes_ / 2 / 64 * 64;
    // Up to 10 s of spinning before a wait sleeps on the futex.
    spin_ns_ = knob_int("MINIVLLM_SHM_SPIN_US").value_or(spin_ns_ / 1000) * 1000;
    int32_t expected = 0;
    MINIVLLM_CHECK(atomic(h->ranks[rank].pid).compare_exchange_strong(expected, static_cast<int32_t>(getpid())))
        << "ShmCommunicator: rank " << rank << " already joined this segment (pid " << expected << ")";
    step(Op{kJoin, DType::kU8, 0, 0});
  } catch (...) {
    munmap(base_, map_bytes_);
    base_ = nullptr;
    if (creator_) release_created(id_);
    throw;
  }
  // Every rank has mapped the segment: no process needs to inherit the fd any more.
  if (creator_) close_created_fd(id_);
}

ShmCommunicator::~ShmCommunicator() {
  if (base_ != nullptr) munmap(base_, map_bytes_);
  if (creator_) release_created(id_);
}

char* ShmCommunicator::half(int r, uint64_t step) const {
  return static_cast<char*>(base_) + kHeaderBytes + static_cast<size_t>(r) * slot_bytes_ + (step & 1) * chunk_bytes_;
}

bool ShmCommunicator::aborted() const {
  return atomic(header_of(base_)->aborted).load(std::memory_order_acquire) != 0;
}

void ShmCommunicator::abort() { abort("abort() called on rank " + std::to_string(rank_) + " (pid " +
                                      std::to_string(getpid()) + ")"); }

void ShmCommunicator::abort(const std::string& why) { abort_segment(header_of(base_), why); }

void ShmCommunicator::throw_aborted(const Op& op) const {
  Header* h = header_of(base_);
  std::string msg = "communicator aborted";
  // The first aborter writes its reason right after raising the flag; give it a moment.
  for (int i = 0; i < 1000 && atomic(h->aborted).load(std::memory_order_acquire) == 1; ++i) sched_yield();
  if (atomic(h->aborted).load(std::memory_order_acquire) == 2) {
    msg += ": ";
    msg += std::string(h->reason, strnlen(h->reason, sizeof(h->reason)));
  }
  msg += " [rank " + std::to_string(rank_) + " in " + op_name(op.code) + "]";
  throw Error(msg);
}

bool ShmCommunicator::all_arrived(uint64_t target, bool seq_cst) const {
  Header* h = header_of(base_);
  const auto order = seq_cst ? std::memory_order_seq_cst : std::memory_order_acquire;
  for (int r = 0; r < world_size_; ++r) {
    if (atomic(h->ranks[r].arrived).load(order) < target) return false;
  }
  return true;
}

void ShmCommunicator::check_peers_alive(uint64_t target, const Op& op) {
  Header* h = header_of(base_);
  for (int r = 0; r < world_size_; ++r) {
    if (r == rank_ || atomic(h->ranks[r].arrived).load(std::memory_order_acquire) >= target) continue;
    const int32_t pid = atomic(h->ranks[r].pid).load(std::memory_order_acquire);
    if (pid > 0 && !process_alive(pid)) {
      abort("rank " + std::to_string(r) + " (pid " + std::to_string(pid) + ") died; rank " + std::to_string(rank_) +
            " was waiting for it in " + op_name(op.code));
      throw_aborted(op);
    }
  }
}

void ShmCommunicator::wait_all(uint64_t target, const Op& op) {
  Header* h = header_of(base_);
  // Spin: pause for a few microseconds, then yield (a peer that shares our core can run), up to
  // spin_ns_ in all.
  const int64_t t0 = now_ns();
  int64_t elapsed = 0;
  for (uint32_t i = 0;; ++i) {
    if (all_arrived(target, false)) return;
    if (atomic(h->aborted).load(std::memory_order_relaxed) != 0) throw_aborted(op);
    if ((i & 15) == 15) {
      elapsed = now_ns() - t0;
      if (elapsed >= spin_ns_) break;
    }
    if (elapsed < kPauseNs) {
      cpu_relax();
    } else {
      sched_yield();
    }
  }
  // Sleep on the futex word. Registering as a sleeper before the last check pairs with the
  // arriving rank's store-then-load of `sleepers` (both seq_cst): either it sees us and wakes the
  // word, or we see its arrival.
  int64_t last_liveness = now_ns();
  for (;;) {
    atomic(h->sleepers).fetch_add(1);
    const uint32_t word = atomic(h->wake_word).load();
    if (!all_arrived(target, true) && atomic(h->aborted).load() == 0) futex_wait(&h->wake_word, word, kSleepSliceNs);
    atomic(h->sleepers).fetch_sub(1);
    if (all_arrived(target, false)) return;
    if (atomic(h->aborted).load(std::memory_order_acquire) != 0) throw_aborted(op);
    const int64_t now = now_ns();
    if (now - last_liveness >= kSleepSliceNs) {
      check_peers_alive(target, op);
      last_liveness = now;
    }
  }
}

void ShmCommunicator::step(const Op& op) {
  Header* h = header_of(base_);
  if (atomic(h->aborted).load(std::memory_order_acquire) != 0) throw_aborted(op);
  const uint64_t s = steps_;
  const Desc mine{op.code, static_cast<uint32_t>(op.dtype), op.nbytes, op.root};
  h->ranks[rank_].desc[s & 1] = mine;
  // Arrive: publishes this rank's chunk and descriptor (seq_cst store: see wait_all).
  atomic(h->ranks[rank_].arrived).store(s + 1);
  if (atomic(h->sleepers).load() != 0) {
    atomic(h->wake_word).fetch_add(1);
    futex_wake_all(&h->wake_word);
  }
  wait_all(s + 1, op);
  steps_ = s + 1;
  for (int r = 0; r < world_size_; ++r) {
    const Desc& d = h->ranks[r].desc[s & 1];
    if (d.code != mine.code || d.dtype != mine.dtype || d.nbytes != mine.nbytes || d.root != mine.root) {
      std::string why = "collective mismatch: rank " + std::to_string(rank_) + " called " + op_name(mine.code) +
                        " (" + dtype_name(op.dtype) + ", " + std::to_string(mine.nbytes) + " bytes, root " +
                        std::to_string(mine.root) + "), rank " + std::to_string(r) + " called " +
                        op_name(d.code) + " (" + dtype_name(static_cast<DType>(d.dtype)) + ", " +
                        std::to_string(d.nbytes) + " bytes, root " + std::to_string(d.root) + ")";
      abort(why);
      throw_aborted(op);
    }
  }
}

void ShmCommunicator::copy(void* dst, const void* src, size_t bytes) const {
  if (bytes == 0) return;
  if (num_threads_ <= 1 || bytes < (size_t{1} << 20)) {
    std::memcpy(dst, src, bytes);
    return;
  }
  const int parts = num_threads_;
  const size_t piece = (bytes / parts + 63) / 64 * 64;
#pragma omp parallel for num_threads(parts) schedule(static)
  for (int p = 0; p < parts; ++p) {
    const size_t begin = std::min(bytes, static_cast<size_t>(p) * piece);
    const size_t end = std::min(bytes, begin + piece);
    if (end > begin) std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin, end - begin);
  }
}

void ShmCommunicator::all_reduce(const Tensor& t, uint32_t code, ReduceFn fn) {
  const Op op{code, t.dtype(), t.nbytes(), 0};
  const size_t esize = dtype_size(t.dtype());
  const size_t chunk = chunk_bytes_ / esize;
  const size_t n = static_cast<size_t>(t.numel());
  char* data = static_cast<char*>(t.data());
  const char* srcs[kMaxRanks];
  size_t done = 0;
  do {  // at least one step, so that ranks disagreeing on the size meet in the descriptor check
    const size_t m = std::min(chunk, n - done);
    const uint64_t s = steps_;
    copy(half(rank_, s), data + done * esize, m * esize);
    step(op);
    for (int r = 0; r < world_size_; ++r) srcs[r] = half(r, s);
    fn(data + done * esize, srcs, world_size_, m, num_threads_);
    done += m;
  } while (done < n);
}

void ShmCommunicator::all_reduce_sum(const Tensor& t) {
  check_host_tensor(t, "all_reduce_sum", "t");
  switch (t.dtype()) {
    case DType::kF32: return all_reduce(t, kAllReduceSum, &reduce<F32Sum>);
    case DType::kBF16: return all_reduce(t, kAllReduceSum, &reduce<Bf16Sum>);
    case DType::kI32: return all_reduce(t, kAllReduceSum, &reduce<I32Sum>);
    default: MINIVLLM_FAIL() << "all_reduce_sum: " << t.describe() << " must be f32, bf16 or i32";
  }
}

void ShmCommunicator::all_reduce_min(const Tensor& t) {
  check_host_tensor(t, "all_reduce_min", "t");
  MINIVLLM_CHECK(t.dtype() == DType::kI32) << "all_reduce_min: " << t.describe() << " must be i32";
  all_reduce(t, kAllReduceMin, &reduce<I32Min>);
}

void ShmCommunicator::gather_impl(const Tensor& in, const Tensor& out, bool everyone) {
  const char* name = everyone ? "all_gather" : "gather";
  check_host_tensor(in, name, "in");
  const bool receives = everyone || rank_ == 0;
  const size_t nb = in.nbytes();
  bool in_place = false;
  if (receives) {
    check_host_tensor(out, name, "out");
    MINIVLLM_CHECK(out.dtype() == in.dtype() && out.numel() == in.numel() * world_size_)
        << name << ": out " << out.describe() << " must hold " << world_size_ << " x in " << in.describe();
    const char* ib = static_cast<const char*>(in.data());
    const char* ob = static_cast<const char*>(out.data());
    in_place = ib == ob + rank_ * nb;
    const bool overlap = nb > 0 && ib < ob + world_size_ * nb && ob < ib + nb;
    MINIVLLM_CHECK(!overlap || in_place) << name << ": in overlaps out other than at out's block of rank " << rank_;
  }
  const Op op{everyone ? kAllGather : kGather, in.dtype(), nb, 0};
  const char* src = static_cast<const char*>(in.data());
  char* dst = receives ? static_cast<char*>(out.data()) : nullptr;
  size_t done = 0;
  do {
    const size_t m = std::min(chunk_bytes_, nb - done);
    const uint64_t s = steps_;
    copy(half(rank_, s), src + done, m);
    step(op);
    if (receives) {
      for (int r = 0; r < world_size_; ++r) {
        if (r == rank_ && in_place) continue;
        copy(dst + r * nb + done, half(r, s), m);
      }
    }
    done += m;
  } while (done < nb);
}

void ShmCommunicator::all_gather(const Tensor& in, const Tensor& out) { gather_impl(in, out, true); }

void ShmCommunicator::gather(const Tensor& in, const Tensor& out) { gather_impl(in, out, false); }

void ShmCommunicator::broadcast(const Tensor& t, int root) {
  check_host_tensor(t, "broadcast", "t");
  MINIVLLM_CHECK(root >= 0 && root < world_size_) << "broadcast: root " << root << " of world " << world_size_;
  const Op op{kBroadcast, t.dtype(), t.nbytes(), root};
  char* data = static_cast<char*>(t.data());
  const size_t nb = t.nbytes();
  size_t done = 0;
  do {
    const size_t m = std::min(chunk_bytes_, nb - done);
    const uint64_t s = steps_;
    if (rank_ == root) copy(half(root, s), data + done, m);
    step(op);
    if (rank_ != root) copy(data + done, half(root, s), m);
    done += m;
  } while (done < nb);
}

void ShmCommunicator::barrier() { step(Op{kBarrier, DType::kU8, 0, 0}); }

}  // namespace minivllm
