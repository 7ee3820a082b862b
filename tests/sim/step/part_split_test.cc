// balanced_part_layers (sim/step/step_shape.h): the layer split the layout planner gives a
// pipeline whose parts do not divide the model's layers, Megatron-Core's split that counts the
// embedding and the output layer as one layer each.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "sim/core/error.h"
#include "sim/step/step_shape.h"
#include "tests/sim/spec/spec_test_util.h"

namespace moesim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using moesim::testing::input_error_of;

TEST(BalancedPartLayers, MatchesMegatronsSplitWhereThePartsDivideTheLayersAndTheEnds) {
  // Qwen3-235B-A22B's 94 layers over pp 8 x vpp 4 (the Megatron-MoE-ModelZoo's layout): 96 units
  // of 3, the two end parts 2 layers each.
  std::vector<int> expected(32, 3);
  expected.front() = expected.back() = 2;
  EXPECT_EQ(balanced_part_layers(94, 32), expected);
  EXPECT_THAT(balanced_part_layers(10, 4), ElementsAre(2, 3, 3, 2));
  EXPECT_THAT(balanced_part_layers(7, 1), ElementsAre(7));
}

TEST(BalancedPartLayers, GivesTheLeftOverUnitsToTheMiddleParts) {
  // DeepSeek-V3's 61 layers over 8 stages: 63 units, 7 parts of 8 and one of 7; the part short of
  // a unit is the first (the end parts first), which also holds the embedding.
  EXPECT_THAT(balanced_part_layers(61, 8), ElementsAre(6, 8, 8, 8, 8, 8, 8, 7));
  // 13 units over 4: one part takes 4; the first, the last and the second do not.
  EXPECT_THAT(balanced_part_layers(11, 4), ElementsAre(2, 3, 4, 2));
}

TEST(BalancedPartLayers, SumsToTheLayersWithUnitsWithinOneOfEachOther) {
  for (int layers = 1; layers <= 130; ++layers)
    for (int parts = 2; parts <= layers; ++parts) {
      if ((layers + 2) / parts < 2) continue;  // refused (below)
      const std::vector<int> split = balanced_part_layers(layers, parts);
      ASSERT_EQ(static_cast<int>(split.size()), parts);
      EXPECT_EQ(std::accumulate(split.begin(), split.end(), 0), layers) << layers << " over " << parts;
      std::vector<int> units = split;
      ++units.front();  // the embedding
      ++units.back();   // the output layer and its loss
      const auto [lo, hi] = std::minmax_element(units.begin(), units.end());
      EXPECT_LE(*hi - *lo, 1) << layers << " over " << parts;
      EXPECT_GE(*std::min_element(split.begin(), split.end()), 1) << layers << " over " << parts;
      // Symmetric but for the first part, which gives up a unit before the last one does.
      EXPECT_LE(split.front(), split.back()) << layers << " over " << parts;
    }
}

TEST(BalancedPartLayers, RefusesSplitsThatLeaveAnEndPartWithoutALayer) {
  EXPECT_THAT(input_error_of([] { balanced_part_layers(4, 4); }),
              HasSubstr("--pp x --vpp = 4 parts leave the end parts no transformer layer of the 4"));
  EXPECT_THAT(input_error_of([] { balanced_part_layers(5, 7); }), HasSubstr("--pp x --vpp = 7 parts"));
  EXPECT_THAT(input_error_of([] { balanced_part_layers(0, 2); }), HasSubstr("both must be at least 1"));
}

}  // namespace
}  // namespace moesim
