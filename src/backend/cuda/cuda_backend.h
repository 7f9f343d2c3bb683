// The CUDA backend's public face: a factory and a probe, in plain C++ (no CUDA types), so the
// runtime can include it under #ifdef MINIVLLM_WITH_CUDA without the CUDA headers.
#pragma once

#include <memory>

#include "backend/backend.h"

namespace minivllm {

// A backend on CUDA device `device_index`: bf16 activations and weights, fp32 accumulation.
std::unique_ptr<Backend> make_cuda_backend(int device_index = 0);

// True when the CUDA runtime sees at least one device (false, never throwing, without a driver).
bool cuda_device_available();

}  // namespace minivllm
