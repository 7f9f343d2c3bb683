// MappedFile: a read-only POSIX memory map of a whole file, unmapped on destruction (RAII).
// Checkpoint readers keep one alive (shared) for as long as any tensor view may point into it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace minivllm {

class MappedFile {
 public:
  // Throws an Error naming the path when it cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Drops the pages wholly inside [p, p + n) from this process's resident set (madvise
  // MADV_DONTNEED; a later read faults them back in from the page cache). A loader calls it once it
  // has copied a tensor out, so the peak resident memory holds the weights once, not twice.
  void release(const uint8_t* p, size_t n) const;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace minivllm
