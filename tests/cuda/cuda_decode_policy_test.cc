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

TEST(DecodePolicy, WideCtasUpToHalfACtaPerSm) {
  for (int seqs = 1; seqs <= 8; ++seqs) EXPECT_TRUE(decode_use_wide(seqs, 8, kSms)) << seqs;
  EXPECT_FALSE(decode_use_wide(9, 8, kSms));
  EXPECT_FALSE(decode_use_wide(256, 8, kSms));
  EXPECT_TRUE(decode_use_wide(16, 4, kSms));  // fewer kv heads, more sequences
}

// 16 key elements a lane: group 2 at any batch; groups 1 and 4 while the (sequence, kv head) CTAs
// fit one per SM; never past group 4 (the registers of q and the accumulators).
TEST(DecodePolicy, SixteenElementLanes) {
  for (int seqs : {1, 16, 17, 256}) EXPECT_TRUE(decode_use_lane16(2, seqs, 8, kSms)) << seqs;
  for (int group : {1, 4}) {
    EXPECT_TRUE(decode_use_lane16(group, 16, 8, kSms)) << group;  // 128 CTAs on 132 SMs
    EXPECT_FALSE(decode_use_lane16(group, 17, 8, kSms)) << group;
    EXPECT_FALSE(decode_use_lane16(group, 256, 8, kSms)) << group;
  }
  EXPECT_FALSE(decode_use_lane16(8, 1, 8, kSms));
}

// The ring kernels: bf16 caches, the exact kernels of groups up to 4 at head_dim 64 and 128; never
// fp8 (the bulk copies move bf16 rows), the tiled kernels, group 8 or head_dim 96 / 256.
TEST(DecodePolicy, RingOnlyWhereAKernelExists) {
  for (int hd : {64, 128}) {
    for (int group : {1, 2, 4}) {
      EXPECT_TRUE(decode_use_ring(false, hd, group, true)) << hd << " " << group;
      EXPECT_FALSE(decode_use_ring(true, hd, group, true)) << hd << " " << group << " fp8";
      EXPECT_FALSE(decode_use_ring(false, hd, group, false)) << hd << " " << group << " tiled";
    }
    EXPECT_FALSE(decode_use_ring(false, hd, 8, true)) << hd;
  }
  for (int hd : {96, 256}) EXPECT_FALSE(decode_use_ring(false, hd, 2, true)) << hd;
}

// The tensor-core kernel: fp8 caches, and bf16 groups of 2 and more, at every batch size; bf16
// group 1 keeps the CUDA cores (the ring kernels).
TEST(DecodePolicy, TensorCoresWhereTheyPay) {
  for (int group : {1, 2, 4, 8}) EXPECT_TRUE(decode_use_mma(true, group)) << group << " fp8";
  for (int group : {2, 4, 8}) EXPECT_TRUE(decode_use_mma(false, group)) << group;
  EXPECT_FALSE(decode_use_mma(false, 1));
  // fp8 streams through the shared-memory ring once the CTAs outnumber the SMs, at any group; bf16
  // only at group 4.
  for (int group : {1, 2, 4, 8}) {
    EXPECT_FALSE(decode_mma_ring(true, group, 16, 8, kSms)) << group;
    EXPECT_TRUE(decode_mma_ring(true, group, 17, 8, kSms)) << group;
    EXPECT_EQ(decode_mma_ring(false, group, 256, 8, kSms), group == 4) << group;
  }
  EXPECT_FALSE(decode_mma_ring(false, 4, 16, 8, kSms));
}

// The staged tensor-core kernel's q heads a CTA: up to 128 of their dims, within the group, for the
// exact wide kernels' shapes; the head pairs' shapes keep the CUDA cores.
TEST(DecodePolicy, WideTensorCoreCtasOfAtMost128Dims) {
  EXPECT_EQ(decode_wide_mma_heads(128, 1), 1);
  EXPECT_EQ(decode_wide_mma_heads(128, 2), 1);
  EXPECT_EQ(decode_wide_mma_heads(128, 4), 0);
  EXPECT_EQ(decode_wide_mma_heads(64, 1), 1);
  EXPECT_EQ(decode_wide_mma_heads(64, 2), 2);
  EXPECT_EQ(decode_wide_mma_heads(64, 4), 2);
  EXPECT_EQ(decode_wide_mma_heads(128, 8), 0);
  EXPECT_EQ(decode_wide_mma_heads(64, 8), 0);
}

TEST(DecodePolicy, WideSplitsAreWholeWideSteps) {
  constexpr int kWideStep = 256;  // Qwen3's and Llama's wide kernels
  // Batch 1 in a 4096-key table: 16 splits of one step (a context up to 256 keys has one split).
  const DecodeSplit one = plan_wide_decode_split(1, 8, 2, 4096, kWideStep, kSms, decode_partial_rows(128));
  EXPECT_EQ(one.partition, kWideStep);
  EXPECT_EQ(one.num_splits, 16);
  // 8 sequences: 64 CTAs already half the SMs; the 512-key bound sets the splits.
  const DecodeSplit eight = plan_wide_decode_split(8, 8, 2, 4096, kWideStep, kSms, decode_partial_rows(128));
  EXPECT_EQ(eight.partition, kDefaultMaxDecodePartition);
  EXPECT_EQ(eight.num_splits, 4096 / kDefaultMaxDecodePartition);
  // A min partition below one wide step is raised to it; above it, it wins as before.
  EXPECT_EQ(plan_wide_decode_split(1, 8, 2, 4096, kWideStep, kSms, decode_partial_rows(128), 32).partition, kWideStep);
  EXPECT_EQ(plan_wide_decode_split(1, 8, 2, 4096, kWideStep, kSms, decode_partial_rows(128), 1000000).num_splits, 1);
  for (int seqs : {1, 2, 5, 8}) {
    const DecodeSplit d = plan_wide_decode_split(seqs, 8, 4, 4096, kWideStep, kSms, decode_partial_rows(64));
    EXPECT_EQ(d.partition % kWideStep, 0) << seqs;
    EXPECT_GE(static_cast<int64_t>(d.num_splits) * d.partition, 4096) << seqs;
    EXPECT_LT(static_cast<int64_t>(d.num_splits - 1) * d.partition, 4096) << seqs;
  }
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
