// Buffer-pool memory plan: a hand-solved graph shows reuse along a path and no reuse between
// unordered streams; on the builder's graphs the plan is safe, at least the simulator's
// MemoryTracker peak, and at most 2% above the heaviest set of pairwise conflicting buffers (the
// least any safe static plan needs).
#include "runtime/exec/memory_plan.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <vector>

#include "plan_test_util.h"
#include "sim/core/error.h"
#include "sim/graph/graph_algorithms.h"
#include "sim/driver/simulation.h"

namespace moesim::runtime {
namespace {

using testing::add_local;


// Heaviest set of pairwise conflicting device buffers (weighted Bron-Kerbosch with pivoting): no
// safe placement can be smaller, since each pair of them must be apart.
std::int64_t heaviest_conflict_clique(const std::vector<std::vector<bool>>& conflict,
                                      const std::vector<std::int64_t>& weight) {
  std::int64_t best = 0;
  const std::function<void(std::int64_t, std::vector<std::size_t>)> expand =
      [&](std::int64_t current, std::vector<std::size_t> cand) {
        best = std::max(best, current);
        std::int64_t bound = current;
        for (std::size_t v : cand) bound += weight[v];
        if (bound <= best || cand.empty()) return;
        const std::size_t pivot = cand.front();
        std::vector<std::size_t> rest = cand;
        for (std::size_t v : cand) {
          if (v != pivot && conflict[pivot][v]) continue;  // found through the pivot's branch
          std::vector<std::size_t> next;
          for (std::size_t u : rest)
            if (u != v && conflict[v][u]) next.push_back(u);
          expand(current + weight[v], next);
          rest.erase(std::find(rest.begin(), rest.end(), v));
        }
      };
  std::vector<std::size_t> all(weight.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  expand(0, all);
  return best;
}

TEST(MemoryPlan, ReusesMemoryAlongAPathButNotAcrossUnorderedStreams) {
  TaskGraph g(1, {0});
  const BufferId a = g.add_buffer(Buffer{"A", 0, 300, MemoryCategory::kActivations, false});
  const BufferId b = g.add_buffer(Buffer{"B", 0, 200, MemoryCategory::kTemporary, false});
  const BufferId c = g.add_buffer(Buffer{"C", 0, 100, MemoryCategory::kTemporary, false});
  const BufferId w = g.add_buffer(Buffer{"W", 0, 1000, MemoryCategory::kModelStates, true});
  const BufferId h = g.add_buffer(Buffer{"H", 0, 50, MemoryCategory::kHostPinned, true});
  add_local(g, "t0", StreamClass::kCompute, 0, {a});
  add_local(g, "t1", StreamClass::kCompute, 0, {}, {a});
  add_local(g, "t2", StreamClass::kCompute, 0, {b}, {b});  // after t1 on the stream: reuses A's bytes
  add_local(g, "c0", StreamClass::kCopyD2H, 0, {c}, {c});  // ordered with nothing: may run any time

  const MemoryPlan plan = plan_memory(g, 0, 256);
  // Resident W first at 0 (1024 aligned), then A, then B in A's place, then C beside both.
  EXPECT_EQ(plan.placement(w).offset, 0);
  EXPECT_EQ(plan.placement(a).offset, 1024);
  EXPECT_EQ(plan.placement(b).offset, 1024);
  EXPECT_EQ(plan.placement(c).offset, 1024 + 512);
  EXPECT_EQ(plan.device.arena_bytes, 1024 + 512 + 256);
  // One at a time in issue order, C never meets A or B; the arena still keeps it apart, because
  // on a GPU the copy stream may run it while t0..t2 run.
  EXPECT_EQ(plan.device.sequential_peak_bytes, 1024 + 512);
  EXPECT_EQ(plan.device.total_bytes, 1024 + 512 + 256 + 256);
  EXPECT_TRUE(plan.placement(h).host);
  EXPECT_EQ(plan.placement(h).offset, 0);
  EXPECT_EQ(plan.host.arena_bytes, 256);

  const MemoryPlan exact = plan_memory(g, 0, 1);
  EXPECT_EQ(exact.device.arena_bytes, 1000 + 300 + 100);
  EXPECT_EQ(exact.placement(b).bytes, 200);
  EXPECT_THROW(exact.placement(999), InputError);
  EXPECT_THROW(plan_memory(g, 0, 0), InputError);
}

TEST(MemoryPlan, BuilderGraphsAreSafeAndAtLeastTheTrackerPeakAndNearTheOptimum) {
  const ClusterSpec cluster = testing::adira();
  double worst_ratio = 1.0, worst_over_tracker = 1.0;
  int optimal = 0, cases = 0, optimal_above_n1 = 0, cases_above_n1 = 0;
  for (const testing::BuilderCase& c : testing::builder_cases(cluster)) {
    const MemoryPlan plan = plan_memory(c.graph, 0, 1);
    const EngineRun run = simulate_graph(c.graph, cluster);
    const RankMemory& tracked = run.memory.front();
    EXPECT_GE(plan.device.arena_bytes, tracked.peak_device_bytes) << c.label;
    EXPECT_GE(plan.device.arena_bytes, plan.device.sequential_peak_bytes) << c.label;
    EXPECT_LE(plan.device.arena_bytes, plan.device.total_bytes) << c.label;
    EXPECT_GE(plan.host.arena_bytes, tracked.peak_host_pinned_bytes) << c.label;

    // Safety, checked independently: overlapping byte ranges only for lifetimes a path orders.
    std::vector<std::int64_t> alloc(c.graph.num_buffers(), -1), freer(c.graph.num_buffers(), -1);
    for (TaskIndex i = 0; i < c.graph.num_tasks(); ++i) {
      for (BufferId b : c.graph.task(i).allocates) alloc[b] = i;
      for (BufferId b : c.graph.task(i).frees) freer[b] = i;
    }
    const auto ends_before = [&](BufferId x, BufferId y) {
      return freer[x] >= 0 && alloc[y] >= 0 && !c.graph.buffer(x).resident && !c.graph.buffer(y).resident &&
             has_path(c.graph, static_cast<TaskIndex>(freer[x]), static_cast<TaskIndex>(alloc[y]));
    };
    std::vector<BufferId> device;
    for (const BufferPlacement& x : plan.placements)
      if (!x.host) device.push_back(x.buffer);
    std::vector<std::vector<bool>> conflict(device.size(), std::vector<bool>(device.size()));
    std::vector<std::int64_t> weight;
    for (std::size_t i = 0; i < device.size(); ++i) {
      weight.push_back(c.graph.buffer(device[i]).bytes);
      for (std::size_t j = 0; j < device.size(); ++j)
        conflict[i][j] = i != j && !ends_before(device[i], device[j]) && !ends_before(device[j], device[i]);
    }
    const std::int64_t clique = heaviest_conflict_clique(conflict, weight);
    EXPECT_LE(clique, plan.device.arena_bytes) << c.label;
    EXPECT_GE(clique, tracked.peak_device_bytes) << c.label;  // the tracker's live set is such a set
    // First fit's fragmentation: measured at most 1.03% (12 of 90 cases above the optimum, all
    // with n = 1); a regression guard, not a guarantee.
    const double ratio = static_cast<double>(plan.device.arena_bytes) / static_cast<double>(clique);
    EXPECT_LE(ratio, 1.02) << c.label;
    worst_ratio = std::max(worst_ratio, ratio);
    if (plan.device.arena_bytes == clique) ++optimal;
    ++cases;
    if (c.label.find("/n1") == std::string::npos) {
      ++cases_above_n1;
      if (plan.device.arena_bytes == clique) ++optimal_above_n1;
    }
    worst_over_tracker = std::max(worst_over_tracker, static_cast<double>(plan.device.arena_bytes) /
                                                          static_cast<double>(tracked.peak_device_bytes));
    for (std::size_t i = 0; i < plan.placements.size(); ++i)
      for (std::size_t j = i + 1; j < plan.placements.size(); ++j) {
        const BufferPlacement& x = plan.placements[i];
        const BufferPlacement& y = plan.placements[j];
        if (x.host != y.host || x.offset + x.bytes <= y.offset || y.offset + y.bytes <= x.offset) continue;
        EXPECT_TRUE(ends_before(x.buffer, y.buffer) || ends_before(y.buffer, x.buffer))
            << c.label << ": " << c.graph.buffer(x.buffer).name << " and " << c.graph.buffer(y.buffer).name
            << " share bytes but may be live together";
      }
  }
  std::printf("arena = heaviest conflict clique (optimal) in %d of %d cases (%d of %d with n > 1); worst arena / "
              "clique %.4f; worst arena / tracker peak %.4f\n",
              optimal, cases, optimal_above_n1, cases_above_n1, worst_ratio, worst_over_tracker);
  EXPECT_GT(optimal, cases / 2);
}

}  // namespace
}  // namespace moesim::runtime
