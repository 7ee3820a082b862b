// LayoutRequest::try_tp_pp_dp_mapping (plan --use-tp-pp-dp-mapping): every layout with pp > 1
// a second time in Megatron-LM's rank order tp-cp-pp-dp, where the step accepts it, and no other.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "tests/sim/search/layout_planner_test_util.h"

namespace moesim::search {
namespace {

using plan_test::key;
using plan_test::tiny;
using plan_test::tiny_moe;

// The keys of the fitting candidates with pp > 1 in the default order, and of those in the other.
struct ByOrder {
  std::multiset<std::string> pipelined_default, mapped;
};

ByOrder by_order(const LayoutEnumeration& e) {
  ByOrder out;
  for (const LayoutCandidate& c : e.fitting) {
    if (c.spec.tp_pp_dp_mapping) {
      EXPECT_GT(c.spec.layout.pp, 1) << key(c.spec);
      out.mapped.insert(key(c.spec));
    } else if (c.spec.layout.pp > 1) {
      out.pipelined_default.insert(key(c.spec));
    }
  }
  return out;
}

TEST(LayoutPlannerRankOrder, TriesEveryPipelinedDenseLayoutInBothOrders) {
  LayoutRequest r = tiny(8, 16);
  const ByOrder plain = by_order(enumerate_layouts(r));
  EXPECT_TRUE(plain.mapped.empty());
  r.try_tp_pp_dp_mapping = true;
  const ByOrder asked = by_order(enumerate_layouts(r));
  EXPECT_FALSE(asked.mapped.empty());
  // A dense model has no rule against the order: each pipelined layout once more, the same memory.
  EXPECT_EQ(asked.mapped, plain.pipelined_default);
  EXPECT_EQ(asked.pipelined_default, plain.pipelined_default);
}

TEST(LayoutPlannerRankOrder, MoeLayoutsOnlyWhereTheExpertsStagesAreTheDenseOnes) {
  LayoutRequest r = tiny_moe(8, 16);
  r.moe_chunks = {1};
  r.try_tp_pp_dp_mapping = true;
  const LayoutEnumeration e = enumerate_layouts(r);
  int mapped = 0;
  for (const LayoutCandidate& c : e.fitting) {
    if (!c.spec.tp_pp_dp_mapping) continue;
    ++mapped;
    const StepLayout& l = c.spec.layout;
    EXPECT_EQ(l.expert_tp() * l.ep, l.tp * l.cp) << key(c.spec);
  }
  EXPECT_GT(mapped, 0);
}

TEST(LayoutPlannerRankOrder, ARequestWithNoPipelinedLayoutIsRefused) {
  LayoutRequest r = tiny(8, 16);
  r.try_tp_pp_dp_mapping = true;
  r.only.pp = {1};
  try {
    check_fixed_axes(r);
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("--use-tp-pp-dp-mapping: no candidate layout of this request runs in "
                                               "the rank order tp-cp-pp-dp"));
  }
}

}  // namespace
}  // namespace moesim::search
