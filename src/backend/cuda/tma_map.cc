#include "backend/cuda/tma_map.h"

#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstring>

#include "backend/cuda/cuda_check.h"

namespace minivllm::cuda {

namespace {

PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q));
    MINIVLLM_CHECK(q == cudaDriverEntryPointSuccess && f != nullptr)
        << "TMA: the driver has no cuTensorMapEncodeTiled (status " << static_cast<int>(q) << ")";
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// A 2-D tensor of elem_bytes-wide elements, boxes of 128 bytes (the swizzle span) x box_rows rows.
CUtensorMap make_tma_map(CUtensorMapDataType dtype, int elem_bytes, const void* ptr, int64_t rows, int64_t cols,
                         int64_t row_elems, int box_rows, const char* who) {
  CUtensorMap m;
  std::memset(&m, 0, sizeof(m));
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(row_elems) * elem_bytes};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(128 / elem_bytes), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = tensor_map_encoder()(&m, dtype, 2, const_cast<void*>(ptr), dims, strides, box, elem_strides,
                                          CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                          CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  MINIVLLM_CHECK(r == CUDA_SUCCESS) << who << ": cuTensorMapEncodeTiled failed (" << static_cast<int>(r) << ") for a "
                                    << rows << " x " << cols << " tensor, box " << box_rows << " rows";
  return m;
}

}  // namespace

CUtensorMap make_bf16_tma_map(const void* ptr, int64_t rows, int64_t cols, int64_t row_elems, int box_rows,
                              const char* who) {
  return make_tma_map(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, ptr, rows, cols, row_elems, box_rows, who);
}

CUtensorMap make_e4m3_tma_map(const void* ptr, int64_t rows, int64_t cols, int64_t row_elems, int box_rows,
                              const char* who) {
  return make_tma_map(CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, ptr, rows, cols, row_elems, box_rows, who);
}

}  // namespace minivllm::cuda
