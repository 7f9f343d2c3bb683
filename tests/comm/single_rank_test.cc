// The single-rank communicator (world 1: identities, gathers copy, abort makes calls throw) and
// CpuBackend::copy_into_columns (a rank's slice of the logits into the full rows, any dtype).
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "common/check.h"
#include "common/dtype.h"

namespace minivllm {
namespace {

Tensor iota_f32(CpuBackend& b, int64_t n, float start) {
  Tensor t = b.empty(DType::kF32, {n});
  for (int64_t i = 0; i < n; ++i) t.ptr<float>()[i] = start + static_cast<float>(i);
  return t;
}

TEST(SingleRankCommunicator, Collectives) {
  CpuBackend backend(1);
  std::unique_ptr<Communicator> comm = backend.create_communicator(0, 1, "");
  ASSERT_NE(comm, nullptr);
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->world_size(), 1);

  Tensor t = iota_f32(backend, 37, 1.5f);
  comm->all_reduce_sum(t);
  for (int i = 0; i < 37; ++i) EXPECT_EQ(t.ptr<float>()[i], 1.5f + i);
  Tensor b16 = backend.empty(DType::kBF16, {3});
  comm->all_reduce_sum(b16);
  Tensor ints = backend.empty(DType::kI32, {4});
  std::iota(ints.ptr<int32_t>(), ints.ptr<int32_t>() + 4, -2);
  comm->all_reduce_min(ints);
  comm->all_reduce_sum(ints);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(ints.ptr<int32_t>()[i], i - 2);
  EXPECT_THROW(comm->all_reduce_min(t), Error);  // i32 only
  EXPECT_THROW(comm->all_reduce_sum(backend.empty(DType::kU8, {2})), Error);

  Tensor out = backend.empty(DType::kF32, {37});
  backend.fill_bytes(out, 0xFF);
  comm->all_gather(t, out);
  for (int i = 0; i < 37; ++i) EXPECT_EQ(out.ptr<float>()[i], 1.5f + i);
  Tensor out2 = backend.empty(DType::kF32, {37});
  backend.fill_bytes(out2, 0xFF);
  comm->gather(t, out2);
  for (int i = 0; i < 37; ++i) EXPECT_EQ(out2.ptr<float>()[i], 1.5f + i);
  comm->all_gather(out2, out2);  // in place
  EXPECT_THROW(comm->all_gather(t, backend.empty(DType::kF32, {36})), Error);

  comm->broadcast(t, 0);
  for (int i = 0; i < 37; ++i) EXPECT_EQ(t.ptr<float>()[i], 1.5f + i);
  EXPECT_THROW(comm->broadcast(t, 1), Error);
  comm->barrier();

  comm->abort();
  EXPECT_THROW(comm->barrier(), Error);
  EXPECT_THROW(comm->all_reduce_sum(t), Error);
  EXPECT_THROW(comm->all_gather(t, out), Error);
  EXPECT_THROW(comm->broadcast(t, 0), Error);
}

TEST(SingleRankCommunicator, BadRanks) {
  CpuBackend backend(1);
  EXPECT_THROW(backend.create_communicator(1, 1, ""), Error);
  EXPECT_THROW(backend.create_communicator(0, 0, ""), Error);
  EXPECT_THROW(backend.create_communicator(0, 2, "not a bootstrap"), Error);
}

template <typename T>
void check_columns(DType dtype) {
  CpuBackend backend(2);
  const int64_t rows = 5, cols = 11, width = 4, start = 6;
  Tensor dst = backend.empty(dtype, {rows, cols});
  Tensor src = backend.empty(dtype, {rows, width});
  for (int64_t i = 0; i < rows * cols; ++i) dst.ptr<T>()[i] = static_cast<T>(1000 + i);
  for (int64_t i = 0; i < rows * width; ++i) src.ptr<T>()[i] = static_cast<T>(i);
  backend.copy_into_columns(dst, start, src);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const T want = c >= start && c < start + width ? static_cast<T>(r * width + c - start) : static_cast<T>(1000 + r * cols + c);
      EXPECT_EQ(dst.ptr<T>()[r * cols + c], want) << dtype_name(dtype) << " row " << r << " col " << c;
    }
  }
}

TEST(CopyIntoColumns, AnyDtype) {
  check_columns<float>(DType::kF32);
  check_columns<uint16_t>(DType::kBF16);
  check_columns<int32_t>(DType::kI32);
  check_columns<uint8_t>(DType::kU8);
  check_columns<int64_t>(DType::kI64);
}

TEST(CopyIntoColumns, LargeAndEdges) {
  CpuBackend backend(2);
  // Big enough for the parallel path; slices of three "ranks" fill the whole row.
  const int64_t rows = 64, vocab = 3 * 4001;
  Tensor full = backend.empty(DType::kF32, {rows, vocab});
  backend.fill_bytes(full, 0xFF);
  for (int part = 0; part < 3; ++part) {
    Tensor slice = backend.empty(DType::kF32, {rows, 4001});
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < 4001; ++c) slice.ptr<float>()[r * 4001 + c] = static_cast<float>(r * vocab + part * 4001 + c);
    backend.copy_into_columns(full, part * 4001, slice);
  }
  for (int64_t i = 0; i < rows * vocab; ++i) ASSERT_EQ(full.ptr<float>()[i], static_cast<float>(i)) << i;

  // The whole width, and empty slices.
  Tensor a = iota_f32(backend, 6, 0.0f).view({2, 3});
  Tensor b = backend.empty(DType::kF32, {2, 3});
  backend.copy_into_columns(b, 0, a);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(b.ptr<float>()[i], static_cast<float>(i));
  backend.copy_into_columns(b, 3, backend.empty(DType::kF32, {2, 0}));
  backend.copy_into_columns(backend.empty(DType::kF32, {0, 3}), 1, backend.empty(DType::kF32, {0, 2}));

  // Checks: columns out of range, rows, dtype.
  EXPECT_THROW(backend.copy_into_columns(b, 2, backend.empty(DType::kF32, {2, 2})), Error);
  EXPECT_THROW(backend.copy_into_columns(b, -1, backend.empty(DType::kF32, {2, 1})), Error);
  EXPECT_THROW(backend.copy_into_columns(b, 0, backend.empty(DType::kF32, {3, 2})), Error);
  EXPECT_THROW(backend.copy_into_columns(b, 0, backend.empty(DType::kBF16, {2, 2})), Error);
  EXPECT_THROW(backend.copy_into_columns(b, 0, Tensor()), Error);
}

}  // namespace
}  // namespace minivllm
