// TMA tensor maps (host side): the descriptor a bulk tensor copy (cp_async.cuh's tma_load_2d)
// reads. Encoded through the driver's cuTensorMapEncodeTiled, fetched once from the runtime so
// that nothing links libcuda directly.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace minivllm::cuda {

// A 2-D bf16 tensor [rows, cols] (row stride `row_elems`), boxes of 64 columns (128 bytes, the
// swizzle span) x box_rows rows, 128-byte swizzle; box elements past the tensor read as zeros.
// `who` names the caller in the error.
CUtensorMap make_bf16_tma_map(const void* ptr, int64_t rows, int64_t cols, int64_t row_elems, int box_rows,
                              const char* who);
// The same for e4m3 codes (one byte each): boxes of 128 columns x box_rows rows.
CUtensorMap make_e4m3_tma_map(const void* ptr, int64_t rows, int64_t cols, int64_t row_elems, int box_rows,
                              const char* who);

}  // namespace minivllm::cuda
