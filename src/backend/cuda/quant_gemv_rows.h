// The row-tiled decode gemv for Q4_K and Q6_K (quant_gemv.h's QuantGemvShape): a CTA of 128 threads
// owns `rows` weight rows, its threads split each row into chunks and load `unroll` chunks of every
// row before using any, so that a thread has rows x unroll loads in flight (the warp-per-row
// kernel has one unit's; at 4,096-wide rows that left the H200 at about 1.5 TB/s).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/quant_gemv.h"

namespace minivllm::cuda {

// False when it has no kernel for the type or shape (the caller takes the warp-per-row kernel).
// planar_nsb: a planar Q6_K row's super-blocks (Q6_K is taken only planar), else 0.
bool launch_quant_gemv_rows(DType wtype, const void* w, size_t row_bytes, const QuantX& q, const void* bias,
                            bool bias_f32, void* out, bool out_f32, bool add, int64_t tokens, int64_t n, int64_t k,
                            int64_t ldo, int64_t planar_nsb, int rows, int unroll, cudaStream_t stream);

}  // namespace minivllm::cuda
