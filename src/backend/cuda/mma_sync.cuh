// The tensor-core instruction the mma.sync kernels share (prefill_attention.cu,
// decode_attention_mma.cu): m16n8k16 with fp32 accumulation, bf16 or f16 inputs. Fragment layouts
// (PTX ISA, "mma.m16n8k16"), with g = lane / 4 and t = lane % 4: a[0] holds A rows g, columns 2t
// and 2t + 1; a[1] rows g + 8; a[2] row g, columns 2t + 8, 2t + 9; a[3] row g + 8 of those; b0
// holds B rows 2t, 2t + 1 of column g, b1 rows 2t + 8, 2t + 9; c[0], c[1] are C row g, columns 2t,
// 2t + 1, and c[2], c[3] row g + 8. The lower half of each 32-bit register is the lower index.
#pragma once

#include <cstdint>

namespace minivllm::cuda {

// One mma into c: f16 inputs (kF16) or bf16. The PTX differs only in the input type.
template <bool kF16>
__device__ __forceinline__ void mma_m16n8k16(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
#define MINIVLLM_MMA_M16N8K16(T)                                                                      \
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." T "." T ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, " \
               "{%8,%9}, {%0,%1,%2,%3};\n"                                                            \
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                       \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))
  if constexpr (kF16) {
    MINIVLLM_MMA_M16N8K16("f16");
  } else {
    MINIVLLM_MMA_M16N8K16("bf16");
  }
#undef MINIVLLM_MMA_M16N8K16
}

__device__ __forceinline__ void mma_bf16(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  mma_m16n8k16<false>(c, a, b0, b1);
}
__device__ __forceinline__ void mma_f16(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  mma_m16n8k16<true>(c, a, b0, b1);
}

}  // namespace minivllm::cuda
