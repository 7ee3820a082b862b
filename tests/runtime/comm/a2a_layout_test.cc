#include "runtime/comm/a2a_layout.h"

#include <gtest/gtest.h>

#include <set>

#include "runtime/comm/loopback.h"
#include "runtime/exec/host_device.h"
#include "runtime/kernels/dispatch_layout.h"
#include "sim/core/error.h"

namespace moesim::runtime {
namespace {

TEST(DispatchLayout, IsABijectionWithChunksAndPeersContiguous) {
  const int E = 8, n = 4, R = 2;
  const std::int64_t C = 12, per = C / n;
  std::set<std::int64_t> rows;
  for (int e = 0; e < E; ++e)
    for (std::int64_t slot = 0; slot < C; ++slot) {
      const std::int64_t row = dispatch_row(e, slot, E, C, n);
      EXPECT_TRUE(rows.insert(row).second);
      EXPECT_EQ(reference_row(row, E, C, n), e * C + slot);
      const std::int64_t c = slot / per;
      // Chunk c is rows [c*E*per, (c+1)*E*per); peer q's experts a contiguous run inside it.
      EXPECT_EQ(row / (E * per), c);
      EXPECT_EQ((row % (E * per)) / (E / R * per), e / (E / R));
    }
  EXPECT_EQ(*rows.rbegin(), E * C - 1);
}

TEST(BlockLayouts, SourceAndExpertSidesDescribeTheSamePieces) {
  const int R = 4, El = 3;
  const std::int64_t per = 5, row = 8;
  const BlockLayout s = source_side_layout(R, El, per, row);
  const BlockLayout x = expert_side_layout(R, El, per, row);
  EXPECT_EQ(s.extent(R), R * El * per * row);
  EXPECT_EQ(x.extent(R), R * El * per * row);
  EXPECT_TRUE(s.contiguous());
  EXPECT_FALSE(x.contiguous());
  // Expert el's rows from source r sit at (el * R + r) * per rows on the expert side.
  EXPECT_EQ(x.offset(2, 1), (1 * R + 2) * per * row);
  EXPECT_EQ(s.offset(2, 1), (2 * El + 1) * per * row);
  EXPECT_TRUE(expert_side_layout(1, El, per, row).contiguous());
}

TEST(AllToAllv, DisplacementsAndCountChecks) {
  EXPECT_EQ(displacements({3, 0, 5, 2}), (std::vector<std::int64_t>{0, 3, 3, 8}));
  check_all_to_allv_counts({{1, 2}, {3, 4}}, {{1, 3}, {2, 4}});
  EXPECT_THROW(check_all_to_allv_counts({{1, 2}, {3, 4}}, {{1, 3}, {5, 4}}), InputError);
}

TEST(Loopback, AllToAllvMovesEachPeersBytes) {
  HostDevice dev;
  LoopbackTransport t(dev, 2);
  // rank 0 sends {a} to 0 and {b, c} to 1; rank 1 sends {d, e} to 0 and {} to 1.
  std::vector<char> s0{'a', 'b', 'c'}, s1{'d', 'e'}, r0(3, '.'), r1(2, '.');
  std::vector<AllToAllvMember> m(2);
  m[0] = {0, &dev, dev.create_stream(), s0.data(), {1, 2}, r0.data(), {1, 2}};
  m[1] = {1, &dev, dev.create_stream(), s1.data(), {2, 0}, r1.data(), {2, 0}};
  t.all_to_allv(m, 0);
  EXPECT_EQ(std::string(r0.begin(), r0.end()), "ade");
  EXPECT_EQ(std::string(r1.begin(), r1.end()), "bc");
  EXPECT_EQ(dev.waits(), 4);  // each rank waits for the other's arrival and completion
}

}  // namespace
}  // namespace moesim::runtime
