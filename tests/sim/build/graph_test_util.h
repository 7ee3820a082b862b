// Lookups and checks shared by the graph tests.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/build/moe_graph.h"
#include "tests/sim/build/test_specs.h"

namespace moesim::testing {

// Ids of the tasks on one (rank, stream), in issue order.
inline std::vector<std::string> stream_ids(const TaskGraph& g, int rank, StreamClass s) {
  std::vector<std::string> out;
  for (TaskIndex i : g.stream_tasks(rank, s)) out.push_back(g.task(i).id);
  return out;
}

// The task `id` of `rank`, or the collective of that id.
inline const Task& task_at(const TaskGraph& g, const std::string& id, int rank = 0) {
  auto i = g.find(id, rank);
  if (!i) i = g.find(id, -1);
  EXPECT_TRUE(i.has_value()) << id;
  return g.task(*i);
}

// Ids of the direct predecessors of `id` (rank 0's task, or the collective).
inline std::set<std::string> predecessor_ids(const TaskGraph& g, const std::string& id) {
  auto i = g.find(id, 0);
  if (!i) i = g.find(id, -1);
  EXPECT_TRUE(i.has_value()) << id;
  std::set<std::string> out;
  if (i)
    for (TaskIndex p : g.predecessors(*i)) out.insert(g.task(p).id);
  return out;
}

// derive_layer_dims refuses the combination with a message containing `fragment`.
inline void expect_rejected(const ModelSpec& m, const RunSpec& r, const std::string& fragment,
                            const ClusterSpec& c = small_cluster()) {
  try {
    derive_layer_dims(m, c, r);
    ADD_FAILURE() << "accepted; expected an error containing: " << fragment;
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr(fragment));
  }
}

}  // namespace moesim::testing
