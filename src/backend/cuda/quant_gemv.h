// Batch-1 decode's linear on ggml block-quantised weights read as stored (no bf16 copy of the model):
// y[n] = W[n, :] . x for W rows of Q4_K, Q6_K or Q5_0 blocks (row_bytes apart, common/quant_blocks.h
// has the layouts), x bf16 [k], y fp32 [n]. A first, correctness-first version (issue 47): one warp
// per row, one 32-element sub-block per lane and step, blocks read byte-wise (a Q6_K super-block is
// 210 bytes, a Q5_0 block 22: neither keeps 4-byte alignment along a row). Not yet wired into
// CudaBackend::linear; tests/cuda/cuda_quant_gemv_test.cc checks it against the CPU backend.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "common/dtype.h"

namespace minivllm::cuda {

// True for the weight dtypes quant_gemv reads.
bool quant_gemv_supports(DType wtype);

// k a multiple of dtype_block(wtype); checked.
void quant_gemv(DType wtype, const void* w, size_t row_bytes, const __nv_bfloat16* x, float* y, int64_t n, int64_t k,
                cudaStream_t stream);

}  // namespace minivllm::cuda
