// Helpers for the loader tests: scratch directories and "the error names these things" checks.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "common/check.h"
#include "loader/dummy_weights.h"
#include "loader/model_config.h"
#include "loader/weight_source.h"

namespace minivllm::testing {

// A fresh directory under the system temp dir, removed with its contents at scope exit.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("minivllm_loader_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  std::string str() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// Runs fn, expects a minivllm::Error whose message contains every one of `parts`.
inline void expect_error_naming(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an Error naming " << ::testing::PrintToString(parts);
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

// The dummy source of config `c` names exactly the tensors the checkpoint folder `dir` stores (a tiny
// model transformers saved): every role of the row, and nothing else.
inline void expect_dummy_names_match(const ModelConfig& c, const std::string& dir) {
  std::vector<std::string> names = make_dummy_weight_source(c, 0)->names(), saved = open_safetensors_dir(dir)->names();
  std::sort(names.begin(), names.end());
  std::sort(saved.begin(), saved.end());
  EXPECT_EQ(names, saved) << dir;
}

}  // namespace minivllm::testing
