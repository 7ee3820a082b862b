// DeepSpeed-TED's rank layout: coordinates, the four group kinds, and the identity
// tp * ep * dp = tp * |dense_data| = G (reference section 5).
#include "sim/spec/parallel_layout.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace moesim {
namespace {

using ::testing::ElementsAre;

TEST(ParallelLayout, CoordinatesRoundTripTensorIndexFastest) {
  const ParallelLayout l{2, 4, 3};
  EXPECT_EQ(l.world(), 24);
  EXPECT_EQ(l.replica_size(), 8);
  for (int r = 0; r < l.world(); ++r) {
    EXPECT_EQ(l.rank_of(l.dp_index(r), l.ep_index(r), l.tp_index(r)), r);
  }
  // rank 13 = (1 * 4 + 2) * 2 + 1
  EXPECT_EQ(l.dp_index(13), 1);
  EXPECT_EQ(l.ep_index(13), 2);
  EXPECT_EQ(l.tp_index(13), 1);
}

TEST(ParallelLayout, GroupsOfOneRank) {
  const ParallelLayout l{2, 4, 3};
  EXPECT_THAT(l.tensor_group(13), ElementsAre(12, 13));
  EXPECT_THAT(l.expert_group(13), ElementsAre(9, 11, 13, 15));
  EXPECT_THAT(l.expert_data_group(13), ElementsAre(5, 13, 21));
  EXPECT_THAT(l.dense_data_group(13), ElementsAre(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23));
}

// Each kind partitions the world into groups of its size, every rank is in its own groups, and
// TED's identity holds.
TEST(ParallelLayout, EveryKindPartitionsTheWorld) {
  for (const ParallelLayout l : {ParallelLayout{1, 8, 1}, ParallelLayout{4, 2, 2}, ParallelLayout{8, 8, 2},
                                 ParallelLayout{2, 1, 4}}) {
    using Fn = std::vector<int> (ParallelLayout::*)(int) const;
    const std::pair<Fn, int> kinds[] = {{&ParallelLayout::tensor_group, l.tp},
                                        {&ParallelLayout::expert_group, l.ep},
                                        {&ParallelLayout::expert_data_group, l.dp},
                                        {&ParallelLayout::dense_data_group, l.ep * l.dp}};
    for (const auto& [fn, size] : kinds) {
      std::set<std::vector<int>> groups;
      for (int r = 0; r < l.world(); ++r) {
        const std::vector<int> g = (l.*fn)(r);
        EXPECT_EQ(static_cast<int>(g.size()), size) << l.describe();
        EXPECT_TRUE(std::find(g.begin(), g.end(), r) != g.end()) << l.describe() << " rank " << r;
        EXPECT_TRUE(std::is_sorted(g.begin(), g.end()));
        groups.insert(g);
      }
      EXPECT_EQ(static_cast<int>(groups.size()) * size, l.world()) << l.describe();
    }
    EXPECT_EQ(l.tp * l.ep * l.dp, l.tp * static_cast<int>(l.dense_data_group(0).size()));
  }
}

TEST(ParallelLayout, TensorGroupsAreConsecutiveRanks) {
  // One node of 8 GPUs holds whole tensor-parallel groups whenever tp divides 8.
  const ParallelLayout l{4, 4, 1};
  for (int r = 0; r < l.world(); ++r) {
    const std::vector<int> g = l.tensor_group(r);
    EXPECT_EQ(g.back() - g.front(), 3);
    EXPECT_EQ(g.front() / 8, g.back() / 8);
  }
  EXPECT_EQ(l.describe(), "tp 4 x ep 4 x dp 1 = 16 GPUs");
}

}  // namespace
}  // namespace moesim
