// Picks and constructs a backend: CUDA when the build has it and a GPU is visible, else the CPU.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"
#include "runtime/runner_config.h"

namespace minivllm {

std::unique_ptr<Backend> make_backend(BackendKind kind, int device_index = 0, int num_threads = 0);
bool cuda_available();
// kAuto resolved to what make_backend would pick.
BackendKind resolve_backend_kind(BackendKind kind);
// GPUs the CUDA runtime sees (0 without a CUDA build or driver).
int visible_gpu_count();
// What rank 0 makes before starting the workers, for Backend::create_communicator on every rank:
// a shared-memory segment (CPU; inherited by the workers) or NCCL's unique id (CUDA).
std::string make_comm_bootstrap(BackendKind resolved, int world_size);
// From a watchdog in rank 0: fails every rank's pending and later use of the bootstrap's
// communicator, its construction (the join) included.
void abort_comm_bootstrap(BackendKind resolved, const std::string& bootstrap, const std::string& why);
// Rank 0 made a bootstrap but no communicator of it (the workers failed to start).
void release_comm_bootstrap(BackendKind resolved, const std::string& bootstrap);

}  // namespace minivllm
