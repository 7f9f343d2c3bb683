#include "runtime/shm_channel.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstring>

#include "common/check.h"

namespace minivllm {

struct ShmChannel::Header {
  std::atomic<uint32_t> seq;      // futex word: number of messages published
  std::atomic<uint32_t> aborted;  // futex-woken too
  std::atomic<uint32_t> acks;     // futex word: acknowledgements so far (rank 0 sleeps on it)
  uint32_t world_size;
  uint64_t capacity;
  uint64_t length;                                // bytes of the current message
  std::atomic<uint32_t> acked[kMaxRanks];         // last message each worker has read
  char errors[kMaxRanks][512];                    // a worker's last words
};

namespace {

static_assert(std::atomic<uint32_t>::is_always_lock_free, "futex words must be plain 32-bit atomics");

void futex_wake(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

// Sleeps until *word != expected, a wake, or the timeout.
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, long timeout_ns) {
  timespec ts{0, timeout_ns};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

}  // namespace

ShmChannel ShmChannel::create(int world_size, size_t capacity) {
  MINIVLLM_CHECK(world_size >= 2 && world_size <= kMaxRanks) << "world_size " << world_size << " (at most " << kMaxRanks << ")";
  ShmChannel c;
  c.fd_ = static_cast<int>(syscall(SYS_memfd_create, "minivllm-control", 0));  // inheritable on purpose
  MINIVLLM_CHECK(c.fd_ >= 0) << "memfd_create: " << std::strerror(errno);
  c.mapped_ = sizeof(Header) + capacity;
  MINIVLLM_CHECK(ftruncate(c.fd_, static_cast<off_t>(c.mapped_)) == 0) << "ftruncate control segment: " << std::strerror(errno);
  void* p = mmap(nullptr, c.mapped_, PROT_READ | PROT_WRITE, MAP_SHARED, c.fd_, 0);
  MINIVLLM_CHECK(p != MAP_FAILED) << "mmap control segment: " << std::strerror(errno);
  c.header_ = new (p) Header();  // the segment is zero-filled; construct the atomics in place
  c.header_->world_size = static_cast<uint32_t>(world_size);
  c.header_->capacity = capacity;
  c.payload_ = static_cast<char*>(p) + sizeof(Header);
  return c;
}

ShmChannel ShmChannel::attach(int fd) {
  ShmChannel c;
  c.fd_ = fd;
  Header probe;
  MINIVLLM_CHECK(pread(fd, static_cast<void*>(&probe), sizeof(Header), 0) == static_cast<ssize_t>(sizeof(Header)))
      << "control segment fd " << fd << " is unreadable: " << std::strerror(errno);
  c.mapped_ = sizeof(Header) + probe.capacity;
  void* p = mmap(nullptr, c.mapped_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  MINIVLLM_CHECK(p != MAP_FAILED) << "mmap control segment: " << std::strerror(errno);
  c.header_ = static_cast<Header*>(p);
  c.payload_ = static_cast<char*>(p) + sizeof(Header);
  return c;
}

ShmChannel::ShmChannel(ShmChannel&& o) noexcept { *this = std::move(o); }

ShmChannel& ShmChannel::operator=(ShmChannel&& o) noexcept {
  std::swap(header_, o.header_);
  std::swap(payload_, o.payload_);
  std::swap(mapped_, o.mapped_);
  std::swap(fd_, o.fd_);
  return *this;
}

ShmChannel::~ShmChannel() {
  if (header_ != nullptr) munmap(header_, mapped_);
  if (fd_ >= 0) close(fd_);
}

int ShmChannel::world_size() const { return static_cast<int>(header_->world_size); }
size_t ShmChannel::capacity() const { return header_->capacity; }

void ShmChannel::wait_until(std::atomic<uint32_t>* word, const std::function<bool()>& done, const Alive& alive,
                            const char* what) const {
  // A decode step's message must reach the workers in microseconds (a futex wake-up costs tens):
  // spin briefly, then keep polling while yielding the core (ranks may share cores with each other
  // on the CPU backend), and only then sleep on the futex and check for dead peers.
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  for (int i = 0; !done(); ++i) {
    if ((i & 63) != 0) {
      __builtin_ia32_pause();
      continue;
    }
    const auto waited = Clock::now() - start;
    if (waited < std::chrono::microseconds(20)) continue;
    if (waited < std::chrono::microseconds(300)) {
      sched_yield();
      continue;
    }
    MINIVLLM_CHECK(!aborted()) << "tensor-parallel control channel aborted while " << what;
    MINIVLLM_CHECK(!alive || alive()) << "a tensor-parallel peer died while " << what;
    const uint32_t seen = word->load();
    if (!done()) futex_wait(word, seen, 100 * 1000 * 1000);
  }
}

void ShmChannel::write(const std::string& method, const std::string& args, const Alive& alive) {
  const uint32_t seq = header_->seq.load();
  const int ws = world_size();
  // Every worker has read message `seq` before it may be overwritten.
  wait_until(&header_->acks, [&] {
    for (int r = 1; r < ws; ++r) {
      if (header_->acked[r].load(std::memory_order_acquire) != seq) return false;
    }
    return true;
  }, alive, "waiting for the workers to read the last message");
  const size_t need = 4 + method.size() + args.size();
  MINIVLLM_CHECK(need <= capacity()) << "message '" << method << "' of " << need << " bytes exceeds the control segment's "
                                     << capacity();
  const uint32_t mlen = static_cast<uint32_t>(method.size());
  std::memcpy(payload_, &mlen, 4);
  std::memcpy(payload_ + 4, method.data(), method.size());
  std::memcpy(payload_ + 4 + method.size(), args.data(), args.size());
  header_->length = need;
  header_->seq.store(seq + 1, std::memory_order_release);
  futex_wake(&header_->seq);
}

void ShmChannel::read(int rank, std::string* method, std::string* args, const Alive& alive) {
  const uint32_t last = header_->acked[rank].load();
  wait_until(&header_->seq, [&] { return header_->seq.load(std::memory_order_acquire) != last; }, alive, "waiting for rank 0");
  const size_t len = header_->length;
  uint32_t mlen = 0;
  std::memcpy(&mlen, payload_, 4);
  MINIVLLM_CHECK(4 + static_cast<size_t>(mlen) <= len && len <= capacity()) << "malformed control message";
  method->assign(payload_ + 4, mlen);
  args->assign(payload_ + 4 + mlen, len - 4 - mlen);
  header_->acked[rank].store(last + 1, std::memory_order_release);
  header_->acks.fetch_add(1);
  futex_wake(&header_->acks);  // rank 0 may be waiting for the acknowledgements
}

void ShmChannel::set_error(int rank, const std::string& message) {
  char* dst = header_->errors[rank];
  const size_t n = std::min(message.size(), sizeof(header_->errors[rank]) - 1);
  std::memcpy(dst, message.data(), n);
  dst[n] = '\0';
}

std::string ShmChannel::error(int rank) const { return std::string(header_->errors[rank]); }

void ShmChannel::abort() {
  if (header_ == nullptr) return;
  header_->aborted.store(1);
  header_->seq.fetch_add(0);  // a full barrier before the wake
  header_->acks.fetch_add(1);
  futex_wake(&header_->seq);
  futex_wake(&header_->acks);
}

bool ShmChannel::aborted() const { return header_->aborted.load() != 0; }

}  // namespace minivllm
