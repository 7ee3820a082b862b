// The executor's lowering on HostDevice (every operation run on the CPU in fp32 at issue time)
// with the loopback transport: the whole graph of one MoE layer, every strategy, several chunk
// and rank counts, against the double-precision reference.
#include "runtime/exec/layer_executor.h"

#include <gtest/gtest.h>

#include <vector>

#include "layer_test_util.h"
#include "runtime/comm/loopback.h"
#include "runtime/exec/host_device.h"
#include "runtime/exec/reference_check.h"

namespace moesim::runtime {
namespace {

using testing::same_results;
using testing::tiny_model;

struct LayerRun {
  LayerDims dims;
  std::vector<RankValues> values;
  CheckReport check;
  Trace trace;
  std::size_t num_tasks = 0;
};

LayerRun run_layer(const ModelSpec& model, int ranks, int chunks, MemoryStrategy strategy, OrderPolicy order,
                   int slots = 2, std::int64_t tokens = 48, std::uint64_t seed = 1) {
  RunSpec run;
  run.tokens_per_gpu = tokens;
  run.ep_size = ranks;
  run.num_chunks = chunks;
  run.strategy = strategy;
  run.order = order;
  run.slots = slots;
  const ClusterSpec cluster = testing::adira();
  BuildOptions options;
  options.representative_rank = false;
  const TaskGraph graph = build_moe_graph(model, cluster, run, options);
  LayerRun out;
  out.dims = derive_layer_dims(model, cluster, run);
  HostDevice device;
  LoopbackTransport transport(device, ranks);
  std::vector<ExecutorRank> local;
  for (int r = 0; r < ranks; ++r) local.push_back(ExecutorRank{r, &device});
  LayerExecutor exec(graph, model, out.dims, local, transport, ExecutorOptions{seed, false});
  exec.initialize();
  out.trace = exec.run_step();
  out.trace = exec.run_step();  // a second step over the same buffers gives the same results
  out.check = check_against_reference(exec, model, out.dims);
  for (int r = 0; r < ranks; ++r) out.values.push_back(exec.download(r));
  out.num_tasks = graph.num_tasks();
  return out;
}

void expect_matches_reference(const LayerRun& run, const std::string& label) {
  // fp32 logits round at about 1e-7 relative: a margin above 1e-6 keeps the routing exact (and the
  // routing entries of the check compare it exactly anyway).
  EXPECT_GT(run.check.topk_margin, 1e-6) << label << ": pick another seed, the routing is nearly tied";
  for (const CheckEntry& e : run.check.entries)
    EXPECT_TRUE(e.ok()) << label << ": " << e.tensor << " relative error " << e.relative << " > " << e.tolerance;
}

TEST(LayerExecutor, MatchesTheReferenceForEveryStrategyRankAndChunkCount) {
  const ModelSpec model = tiny_model(8, 2, Activation::kGelu);
  for (int ranks : {1, 2, 4})
    for (int chunks : {1, 2, 4})
      for (MemoryStrategy st : {MemoryStrategy::kNone, MemoryStrategy::kS1, MemoryStrategy::kS2, MemoryStrategy::kS3,
                                MemoryStrategy::kS4}) {
        const std::string label = "R" + std::to_string(ranks) + " n" + std::to_string(chunks) + " " +
                                  std::string(to_string(st));
        const LayerRun run = run_layer(model, ranks, chunks, st, OrderPolicy::kMPipeMoE);
        expect_matches_reference(run, label);
      }
}

TEST(LayerExecutor, StrategiesAndSlotCountsGiveIdenticalBits) {
  const ModelSpec model = tiny_model(8, 1, Activation::kRelu);
  for (int chunks : {1, 2, 4}) {
    const LayerRun base = run_layer(model, 2, chunks, MemoryStrategy::kNone, OrderPolicy::kMPipeMoE);
    for (MemoryStrategy st : {MemoryStrategy::kS1, MemoryStrategy::kS2, MemoryStrategy::kS3, MemoryStrategy::kS4})
      for (int slots : {1, 2}) {
        const LayerRun other = run_layer(model, 2, chunks, st, OrderPolicy::kMPipeMoE, slots);
        for (int r = 0; r < 2; ++r)
          EXPECT_TRUE(same_results(base.values[r], other.values[r]))
              << "n" << chunks << " " << to_string(st) << " slots " << slots << " rank " << r;
      }
  }
}

TEST(LayerExecutor, OtherOrdersComputeTheSameLayer) {
  const ModelSpec model = tiny_model(8, 2, Activation::kGelu);
  for (OrderPolicy order : {OrderPolicy::kSequential, OrderPolicy::kFasterMoE, OrderPolicy::kTutel})
    for (MemoryStrategy st : {MemoryStrategy::kNone, MemoryStrategy::kS2, MemoryStrategy::kS3})
      expect_matches_reference(run_layer(model, 2, 2, st, order), std::string(to_string(order)));
}

TEST(LayerExecutor, EightVirtualRanksEqualOneRankUpToAssociation) {
  // 64 experts over 8 virtual ranks against the same experts on one rank.
  const ModelSpec model = tiny_model(64, 1, Activation::kGelu);
  expect_matches_reference(run_layer(model, 8, 1, MemoryStrategy::kNone, OrderPolicy::kMPipeMoE, 2, 256, 1), "R8");
  expect_matches_reference(run_layer(model, 1, 1, MemoryStrategy::kNone, OrderPolicy::kMPipeMoE, 2, 256, 1), "R1");
}

TEST(LayerExecutor, TraceCoversEveryTaskInOrder) {
  const LayerRun run = run_layer(tiny_model(8, 2, Activation::kGelu), 2, 2, MemoryStrategy::kS1, OrderPolicy::kMPipeMoE);
  ASSERT_EQ(run.trace.records.size(), run.num_tasks);
  for (const TaskRecord& r : run.trace.records) {
    EXPECT_GE(r.start_ns, 0);
    EXPECT_LE(r.ready_ns, r.start_ns);
    EXPECT_LE(r.start_ns, r.end_ns);
  }
}

// swiglu: T_M holds FC1's 2H-wide output, dA has its own buffer (bwd.dA), the restores move 2H.
TEST(LayerExecutor, SwigluMatchesTheReferenceAndEveryStrategyGivesTheSameBits) {
  const ModelSpec model = tiny_model(8, 2, Activation::kSwiglu);
  for (int chunks : {1, 2, 4}) {
    const LayerRun base = run_layer(model, 2, chunks, MemoryStrategy::kNone, OrderPolicy::kMPipeMoE);
    expect_matches_reference(base, "swiglu n" + std::to_string(chunks) + " none");
    for (MemoryStrategy st : {MemoryStrategy::kS1, MemoryStrategy::kS2, MemoryStrategy::kS3, MemoryStrategy::kS4}) {
      const std::string label = "swiglu n" + std::to_string(chunks) + " " + std::string(to_string(st));
      const LayerRun other = run_layer(model, 2, chunks, st, OrderPolicy::kMPipeMoE);
      expect_matches_reference(other, label);
      for (int r = 0; r < 2; ++r) EXPECT_TRUE(same_results(base.values[r], other.values[r])) << label << " rank " << r;
    }
  }
}

TEST(LayerExecutor, RejectsWhatItCannotRun) {
  RunSpec run;
  run.tokens_per_gpu = 48;
  run.ep_size = 1;
  const ClusterSpec cluster = testing::adira();
  HostDevice device;
  LoopbackTransport transport(device, 1);
  ModelSpec gelu = tiny_model(8, 2, Activation::kGelu);
  run.num_moe_layers = 2;
  const TaskGraph two = build_moe_graph(gelu, cluster, run);
  EXPECT_THROW(LayerExecutor(two, gelu, derive_layer_dims(gelu, cluster, run), {{0, &device}}, transport), InputError);
}

}  // namespace
}  // namespace moesim::runtime
