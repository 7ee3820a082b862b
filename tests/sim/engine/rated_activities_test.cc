#include "sim/engine/rated_activities.h"

#include <gtest/gtest.h>

#include "sim/core/error.h"

namespace moesim {
namespace {

TEST(RatedActivities, FullRateCompletesAfterItsWork) {
  RatedActivities a;
  a.add(3, 100, 50, 1.0);
  EXPECT_EQ(a.next_completion(), 150);
  std::vector<TaskIndex> done;
  a.advance_to(149, done);
  EXPECT_TRUE(done.empty());
  a.advance_to(150, done);
  EXPECT_EQ(done, (std::vector<TaskIndex>{3}));
  EXPECT_EQ(a.next_completion(), kNever);
}

TEST(RatedActivities, ZeroWorkCompletesAtStart) {
  RatedActivities a;
  a.add(0, 0, 42, 0.5);
  EXPECT_EQ(a.next_completion(), 42);
}

TEST(RatedActivities, CompletionIsCeiledAndExactAcrossRateChanges) {
  RatedActivities a;
  // 1000 ns at 0.96: ceil(1041.67) = 1042.
  a.add(1, 1000, 0, 0.96);
  EXPECT_EQ(a.next_completion(), 1042);
  // At 500: 500 * 0.96 = 480 done, 520 left at full speed -> 1020 (no rounding noise).
  a.set_rate(1, 1.0, 500);
  EXPECT_EQ(a.next_completion(), 1020);
  // Same rate again is a no-op.
  a.set_rate(1, 1.0, 600);
  EXPECT_EQ(a.next_completion(), 1020);
}

TEST(RatedActivities, FinishedInAscendingIndex) {
  RatedActivities a;
  a.add(7, 10, 0, 1.0);
  a.add(2, 10, 0, 1.0);
  a.add(5, 20, 0, 1.0);
  std::vector<TaskIndex> done;
  a.advance_to(10, done);
  EXPECT_EQ(done, (std::vector<TaskIndex>{2, 7}));
  EXPECT_EQ(a.running(), (std::vector<TaskIndex>{5}));
}

TEST(RatedActivities, RejectsBadRatesAndDoubleStarts) {
  RatedActivities a;
  EXPECT_THROW(a.add(0, 10, 0, 0.0), InternalError);
  EXPECT_THROW(a.add(0, 10, 0, 1.5), InternalError);
  a.add(0, 10, 0, 1.0);
  EXPECT_THROW(a.add(0, 10, 0, 1.0), InternalError);
  EXPECT_THROW(a.set_rate(9, 1.0, 0), InternalError);
}

}  // namespace
}  // namespace moesim
