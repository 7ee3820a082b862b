// HashIndex (sim/graph/hash_index.h): every inserted task is found under its hash, tasks sharing
// a hash are told apart by the caller's match, a missing one is not found, and growing the table
// keeps everything, whatever the hashes' low or high bits.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "sim/graph/hash_index.h"

namespace moesim {
namespace {

TEST(HashIndex, FindsEveryTaskAcrossGrowthAndTellsEqualHashesApart) {
  HashIndex index;
  EXPECT_FALSE(index.find(7, [](TaskIndex) { return true; }));
  // 5,000 tasks: hashes that differ only in their high bits, and groups of three sharing one hash.
  std::vector<std::uint64_t> hash_of;
  for (TaskIndex t = 0; t < 5000; ++t) {
    const std::uint64_t h = t % 3 == 0 ? (static_cast<std::uint64_t>(t) << 40) : static_cast<std::uint64_t>(t / 3) * 1000;
    hash_of.push_back(h);
    index.insert(h, t);
  }
  EXPECT_EQ(index.size(), 5000u);
  for (TaskIndex t = 0; t < 5000; ++t) {
    const auto found = index.find(hash_of[t], [&](TaskIndex i) { return i == t; });
    ASSERT_TRUE(found) << t;
    EXPECT_EQ(*found, t);
  }
  // The first match among those sharing a hash, and none for a hash never inserted.
  const auto any = index.find(hash_of[1], [&](TaskIndex i) { return hash_of[i] == hash_of[1]; });
  ASSERT_TRUE(any);
  EXPECT_EQ(hash_of[*any], hash_of[1]);
  EXPECT_FALSE(index.find(hash_of[1], [](TaskIndex) { return false; }));
  EXPECT_FALSE(index.find(0xDEADBEEFULL, [](TaskIndex) { return true; }));
}

}  // namespace
}  // namespace moesim
