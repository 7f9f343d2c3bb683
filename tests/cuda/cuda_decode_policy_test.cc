// The decode split policy (decode_policy.h) is host-only arithmetic: these tests run without a GPU.
#include <gtest/gtest.h>

#include "backend/cuda/decode_policy.h"

namespace minivllm::cuda {
namespace {

constexpr int kSms = 132;  // an H100
constexpr int kGranule = 32;

TEST(DecodePolicy, LargeBatchSplitsLongContextsIntoBoundedPartitions) {
  // 256 sequences x 8 kv heads is far past the CTA target; before the partition bound this ran
  // one CTA per (sequence, kv head) over the whole capacity.
  const DecodeSplit d = plan_decode_split(256, 8, 2, 4096, kGranule, kSms, decode_partial_rows(128));
  EXPECT_EQ(d.partition, kDefaultMaxDecodePartition);
  EXPECT_EQ(d.num_splits, 4096 / kDefaultMaxDecodePartition);
  // No limit: the old policy.
  const DecodeSplit old = plan_decode_split(256, 8, 2, 4096, kGranule, kSms, decode_partial_rows(128),
                                            kDefaultMinDecodePartition, 0);
  EXPECT_EQ(old.num_splits, 1);
  EXPECT_EQ(old.partition, 4096);
}

TEST(DecodePolicy, SmallBatchStillSplitsForOccupancy) {
  const DecodeSplit d = plan_decode_split(1, 8, 2, 4096, kGranule, kSms, decode_partial_rows(128));
  EXPECT_EQ(d.partition, kDefaultMinDecodePartition);
  EXPECT_EQ(d.num_splits, 4096 / kDefaultMinDecodePartition);
}

TEST(DecodePolicy, MinPartitionWinsAndCapacityCapsSplits) {
  // A min partition past the capacity: one split whatever the max partition says.
  const DecodeSplit one = plan_decode_split(256, 8, 2, 4096, kGranule, kSms, decode_partial_rows(128), 1000000, 256);
  EXPECT_EQ(one.num_splits, 1);
  // Scratch for only 2 splits of 512 (seq, head) rows: the policy takes fewer, longer splits.
  const DecodeSplit capped = plan_decode_split(256, 1, 2, 4096, kGranule, kSms, 256 * 2 * 2, 64, 256);
  EXPECT_EQ(capped.num_splits, 2);
  EXPECT_EQ(capped.partition, 2048);
  // Every split covers the capacity: splits * partition >= max_context, the last one non-empty.
  for (int seqs : {1, 3, 37, 200, 512}) {
    for (int64_t ctx : {1, 100, 1000, 4096, 40960}) {
      const DecodeSplit s = plan_decode_split(seqs, 8, 2, ctx, kGranule, kSms, decode_partial_rows(128));
      EXPECT_GE(static_cast<int64_t>(s.num_splits) * s.partition, ctx) << seqs << " seqs, " << ctx;
      EXPECT_LT(static_cast<int64_t>(s.num_splits - 1) * s.partition, ctx) << seqs << " seqs, " << ctx;
      EXPECT_EQ(s.partition % kGranule, 0);
      EXPECT_LE(static_cast<int64_t>(seqs) * 8 * 2 * s.num_splits, decode_partial_rows(128));
    }
  }
}

}  // namespace
}  // namespace minivllm::cuda
