// Shared pieces of the libFuzzer harnesses: an in-memory file to hand the readers (they take
// paths), the "expected error" wrapper, and invariant checks that crash loudly.
//
// Contract of every harness: minivllm::Error is the engine's one way of rejecting bad input
// (DESIGN.md: "Errors carry their cause"), so it is caught and ignored. Anything else (a sanitizer
// report, a signal, an uncaught exception of another type, a broken invariant) reaches libFuzzer,
// which saves the input as a crash.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/check.h"

namespace minivllm::fuzz {

// A memfd holding the current input, reachable by path as /proc/self/fd/N (a regular file, so
// MappedFile maps it). One per process, rewritten for each input.
class MemFile {
 public:
  explicit MemFile(const char* name) {
    fd_ = ::memfd_create(name, MFD_CLOEXEC);
    if (fd_ < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  // Replaces the contents with `data` and returns the path.
  const std::string& write(const uint8_t* data, size_t size) {
    if (::ftruncate(fd_, 0) != 0) fail("ftruncate");
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0) fail("pwrite");
      done += static_cast<size_t>(n);
    }
    return path_;
  }
  const std::string& path() const { return path_; }

 private:
  [[noreturn]] static void fail(const char* what) {
    std::perror(what);
    std::abort();
  }
  int fd_ = -1;
  std::string path_;
};

// Runs f(); a minivllm::Error is the expected outcome for bad input. Returns whether f() returned.
template <typename F>
bool expect_ok_or_error(F&& f) {
  try {
    f();
    return true;
  } catch (const minivllm::Error&) {
    return false;
  }
}

// A broken invariant: print both sides and abort, so libFuzzer saves the input.
[[noreturn]] inline void invariant_failed(const char* what, std::string_view got, std::string_view want) {
  std::fprintf(stderr, "\n*** fuzz invariant broken: %s\n--- got (%zu bytes):\n%.*s\n--- want (%zu bytes):\n%.*s\n",
               what, got.size(), static_cast<int>(got.size()), got.data(), want.size(),
               static_cast<int>(want.size()), want.data());
  std::abort();
}

inline void check_equal(const char* what, std::string_view got, std::string_view want) {
  if (got != want) invariant_failed(what, got, want);
}

}  // namespace minivllm::fuzz
