// A whole file as bytes, for the small text files the loaders read (configs, templates).
#pragma once

#include <string>

namespace minivllm {

// Throws an Error naming the path when it cannot be opened or read.
std::string read_file_contents(const std::string& path);

}  // namespace minivllm
