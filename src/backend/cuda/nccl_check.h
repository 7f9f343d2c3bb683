// NCCL_CHECK: every NCCL call that must return ncclSuccess goes through it, so a failure throws
// minivllm::Error naming the file, line, expression, NCCL's reason (ncclGetErrorString) and its
// last error message (ncclGetLastError). Calls on a non-blocking communicator that may answer
// ncclInProgress are checked by NcclCommunicator itself (nccl_communicator.cc).
#pragma once

#include <nccl.h>

#include <sstream>
#include <string>

#include "common/check.h"

namespace minivllm::cuda {

// "ncclUnhandledCudaError (unhandled cuda error (run with NCCL_DEBUG=INFO for details)): <last>".
inline std::string nccl_error_text(ncclResult_t r) {
  std::ostringstream s;
  s << ncclGetErrorString(r) << " (code " << static_cast<int>(r) << ")";
  const char* last = ncclGetLastError(nullptr);
  if (last != nullptr && last[0] != '\0') s << ": " << last;
  return s.str();
}

[[noreturn]] inline void throw_nccl_error(const char* file, int line, const char* expr, ncclResult_t r) {
  std::ostringstream s;
  s << file << ":" << line << ": NCCL error in " << expr << ": " << nccl_error_text(r);
  throw Error(s.str());
}

}  // namespace minivllm::cuda

#define NCCL_CHECK(expr)                                                              \
  do {                                                                                \
    const ncclResult_t minivllm_nccl_res_ = (expr);                                   \
    if (minivllm_nccl_res_ != ncclSuccess)                                            \
      ::minivllm::cuda::throw_nccl_error(__FILE__, __LINE__, #expr, minivllm_nccl_res_); \
  } while (0)
