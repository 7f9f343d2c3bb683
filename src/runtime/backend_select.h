// Picks and constructs a backend: CUDA when the build has it and a GPU is visible, else the CPU.
#pragma once

#include <memory>

#include "backend/backend.h"
#include "runtime/runner_config.h"

namespace minivllm {

std::unique_ptr<Backend> make_backend(BackendKind kind, int device_index = 0, int num_threads = 0);
bool cuda_available();

}  // namespace minivllm
