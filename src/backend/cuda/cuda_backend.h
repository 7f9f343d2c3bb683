// The CUDA backend's public face: a factory and a probe, in plain C++ (no CUDA types), so the
// runtime can include it under #ifdef MINIVLLM_WITH_CUDA without the CUDA headers.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"

namespace minivllm {

// A backend on CUDA device `device_index`: bf16 activations and weights, fp32 accumulation.
std::unique_ptr<Backend> make_cuda_backend(int device_index = 0);

// True when the CUDA runtime sees at least one device (false, never throwing, without a driver).
bool cuda_device_available();

// GPUs the CUDA runtime sees; 0 without a driver or device (never throws).
int cuda_device_count();

// NCCL's unique id as hex, for Backend::create_communicator on every rank (rank 0 makes it before
// the workers start). Creates no CUDA context; starts NCCL's bootstrap root thread in this process,
// which must live until every rank's communicator is made.
std::string make_cuda_comm_bootstrap();

// From rank 0's watchdog (a worker died): abort() on this process's communicators made from
// `bootstrap`, including one whose constructor is still waiting for its peers (no Communicator
// pointer reaches it yet), and on any made from it later. Returns whether one existed. Thread-safe.
bool abort_cuda_comm_bootstrap(const std::string& bootstrap,
                               const std::string& why = "aborted through its bootstrap (a rank died?)");

}  // namespace minivllm
