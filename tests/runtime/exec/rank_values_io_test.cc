#include "runtime/exec/rank_values_io.h"

#include <gtest/gtest.h>

#include <cmath>

#include "sim/core/error.h"

namespace moesim::runtime {
namespace {

RankValues sample() {
  RankValues v;
  v.x = {1.0f, -2.5f};
  v.dy = {3.0f};
  v.gate = {};
  v.w1 = {0.25f, 0.5f, 0.75f};
  v.y = {7.0f};
  v.dw2 = {-0.0f, 1e-30f};
  v.topk_idx = {3, 1};
  v.topk_row = {-1, 12};
  return v;
}

TEST(RankValuesIo, RoundTripsEveryTensorBitForBit) {
  const RankValues v = sample();
  const RankValues back = unpack_rank_values(pack_rank_values(v));
  EXPECT_EQ(back.x, v.x);
  EXPECT_EQ(back.dy, v.dy);
  EXPECT_TRUE(back.gate.empty());
  EXPECT_EQ(back.w1, v.w1);
  EXPECT_TRUE(back.w2.empty());
  EXPECT_EQ(back.y, v.y);
  EXPECT_EQ(back.dw2, v.dw2);
  EXPECT_TRUE(std::signbit(back.dw2[0]));
  EXPECT_EQ(back.topk_idx, v.topk_idx);
  EXPECT_EQ(back.topk_row, v.topk_row);
}

TEST(RankValuesIo, RejectsBytesItDidNotWrite) {
  std::vector<std::byte> bytes = pack_rank_values(sample());
  std::vector<std::byte> longer = bytes;
  longer.push_back(std::byte{0});
  EXPECT_THROW(unpack_rank_values(longer), InternalError);
  bytes.pop_back();
  EXPECT_THROW(unpack_rank_values(bytes), InternalError);
  EXPECT_THROW(unpack_rank_values(std::vector<std::byte>(5)), InternalError);
}

}  // namespace
}  // namespace moesim::runtime
