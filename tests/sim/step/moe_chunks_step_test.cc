// MoE sub-stage pipelining in the whole step (--chunks n, sim/step/moe_mlp.h): the chunks' tasks
// and sizes, their dependencies and streams, the overlap they buy, and what they leave unchanged
// (FLOPs, bytes, memory). Qwen3-30B-A3B (48 MoE layers, 128 experts of width 768, top 8, hidden
// 2,048) on 16 A100s: tp 2 without sequence parallelism (every rank routes the tensor-parallel group's
// tokens), pp 2, ep 4 inside dp 4, sequences of 512 tokens, so each expert gets
// C = floor(8 x 512 / 128) = 32 rows from each of its 4 expert-parallel ranks per microbatch.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "sim/memory/activations.h"
#include "sim/step/step_simulation.h"
#include "tests/sim/step_presets.h"

namespace moesim {
namespace {

constexpr std::int64_t kExperts = 128, kEp = 4, kLocalExperts = kExperts / kEp, kHidden = 2048, kCapacity = 32;
constexpr int kLayers = 48;

StepSpec moe_step(int chunks, PipelineSchedule schedule = PipelineSchedule::kOneFOneB, std::int64_t seq = 512) {
  StepSpec s = testing::small_moe_step();
  s.sequence_parallel = false;
  s.seq = seq;
  s.schedule = schedule;
  s.moe_chunks = chunks;
  return s;
}

SimulatedStep simulate(const StepSpec& s) {
  return simulate_training_step(testing::model_preset("qwen3-30b-a3b"), testing::a100_cluster(16), s);
}

// The task `id` of stage 0's rank (rank -1: a collective).
TaskIndex task(const TaskGraph& g, const std::string& id, int rank = 0) {
  const auto t = g.find(id, rank);
  EXPECT_TRUE(t.has_value()) << id;
  return t.value_or(0);
}

const TaskRecord& record(const SimulatedStep& sim, const std::string& id, int rank = 0) {
  return sim.run.trace.records[task(sim.graph.graph, id, rank)];
}

TEST(MoeChunksStep, ThreeChunksSplitTheCapacityUnevenlyByAtMostOneRow) {
  const SimulatedStep one = simulate(moe_step(1));
  const SimulatedStep three = simulate(moe_step(3));
  const TaskGraph& g = three.graph.graph;
  // Per chunk and (microbatch, layer): forward dispatch, its probabilities, the sort into expert
  // order, fc1, act, fc2, the sort back, combine; backward the combine's gradient, its sort, fc2's
  // input and weight gradients, act, fc1's two, the sort back, the dispatch's gradient and its
  // probabilities'. Two chunks more than one, over 48 layers and 2 microbatches.
  EXPECT_EQ(static_cast<std::int64_t>(g.num_tasks()) - static_cast<std::int64_t>(one.graph.graph.num_tasks()),
            kLayers * 2 * (8 + 10) * 2);
  // 32 rows = 11 + 11 + 10: chunk c's fc1 multiplies ep x C_c rows per local expert.
  const std::int64_t sizes[3] = {11, 11, 10};
  std::int64_t rows = 0;
  for (int c = 0; c < 3; ++c) {
    const std::string chunk = ".c" + std::to_string(c);
    const auto& fc1 = std::get<GemmWork>(g.task(task(g, "mb0.L0.fwd.experts.fc1" + chunk)).work);
    EXPECT_EQ(fc1.batch, kLocalExperts);
    EXPECT_EQ(fc1.m, kEp * sizes[c]) << chunk;
    rows += fc1.m;
    const auto& dgrad = std::get<GemmWork>(g.task(task(g, "mb1.L3.bwd.experts.fc1.dgrad" + chunk)).work);
    EXPECT_EQ(dgrad.m, kEp * sizes[c]) << chunk;
    // Each rank sends C_c rows of every expert, E x C_c x hidden bf16 values, a quarter to each peer.
    for (const std::string id : {"mb0.L0.fwd.dispatch", "mb0.L0.fwd.combine", "mb1.L3.bwd.combine", "mb1.L3.bwd.dispatch"}) {
      const auto& a2a = std::get<CollectiveWork>(g.task(task(g, id + chunk, -1)).work);
      EXPECT_EQ(a2a.bytes_per_peer, kExperts * sizes[c] * kHidden * 2 / kEp) << id << chunk;
    }
  }
  EXPECT_EQ(rows, kEp * kCapacity);
  EXPECT_FALSE(g.find("mb0.L0.fwd.experts.fc1.c3", 0).has_value());
  EXPECT_FALSE(g.find("mb0.L0.fwd.experts.fc1", 0).has_value());
  for (const std::string whole : {"mb0.L0.fwd.router", "mb0.L0.fwd.permute", "mb0.L0.fwd.unpermute", "mb0.L0.bwd.permute"})
    EXPECT_TRUE(g.find(whole, 0).has_value()) << whole;
}

// Every task starts once its predecessors are done, the streams run in issue order, and the
// chunks chain as MPipeMoE's forward issues them: each chunk's sort into expert order (before its
// fc1) waits for its dispatch's probabilities and the previous chunk's sort back, each combine for
// its sort back (after its fc2) and the previous combine.
TEST(MoeChunksStep, DependenciesAndStreamsHoldUnderEverySchedule) {
  for (const PipelineSchedule schedule :
       {PipelineSchedule::kOneFOneB, PipelineSchedule::kZeroBubbleH1, PipelineSchedule::kDualPipe}) {
    StepSpec s = moe_step(3, schedule);
    s.global_batch = 16;  // 4 microbatches: DualPipe needs 2 x pp
    const SimulatedStep sim = simulate(s);
    const TaskGraph& g = sim.graph.graph;
    for (TaskIndex i = 0; i < g.num_tasks(); ++i)
      for (TaskIndex p : g.predecessors(i))
        ASSERT_LE(sim.run.trace.records[p].end_ns, sim.run.trace.records[i].start_ns) << g.task(i).id;
    for (const StreamClass stream : {StreamClass::kCompute, StreamClass::kCommDispatch, StreamClass::kCommCombine}) {
      const std::vector<TaskIndex>& order = g.stream_tasks(0, stream);
      for (std::size_t k = 1; k < order.size(); ++k)
        ASSERT_LE(sim.run.trace.records[order[k - 1]].end_ns, sim.run.trace.records[order[k]].start_ns)
            << g.task(order[k]).id;
    }
    for (int c = 1; c < 3; ++c) {
      const std::string chunk = ".c" + std::to_string(c), before = ".c" + std::to_string(c - 1);
      const TimeNs sort = record(sim, "mb0.L0.fwd.dispatch.sort" + chunk).start_ns;
      EXPECT_EQ(sort, std::max(record(sim, "mb0.L0.fwd.dispatch.probs" + chunk, -1).end_ns,
                               record(sim, "mb0.L0.fwd.combine.sort" + before).end_ns));
      EXPECT_EQ(record(sim, "mb0.L0.fwd.experts.fc1" + chunk).start_ns,
                record(sim, "mb0.L0.fwd.dispatch.sort" + chunk).end_ns);
      const TimeNs combine = record(sim, "mb0.L0.fwd.combine" + chunk, -1).start_ns;
      EXPECT_EQ(combine, std::max(record(sim, "mb0.L0.fwd.combine.sort" + chunk).end_ns,
                                  record(sim, "mb0.L0.fwd.combine" + before, -1).end_ns));
    }
    EXPECT_GE(record(sim, "mb0.L0.fwd.unpermute").start_ns, record(sim, "mb0.L0.fwd.combine.c2", -1).end_ns);
  }
}

// zb-h1 splits the backward: the input gradients chunked around the all-to-alls, the weight
// gradients of the later W pass one batched GEMM per layer over all of a microbatch's rows.
TEST(MoeChunksStep, SplitBackwardKeepsTheWeightGradientsWhole) {
  const SimulatedStep sim = simulate(moe_step(3, PipelineSchedule::kZeroBubbleH1));
  const TaskGraph& g = sim.graph.graph;
  const auto& wgrad = std::get<GemmWork>(g.task(task(g, "mb0.L0.bwd.experts.fc1.wgrad")).work);
  EXPECT_EQ(wgrad.k, kEp * kCapacity);
  EXPECT_FALSE(g.find("mb0.L0.bwd.experts.fc1.wgrad.c0", 0).has_value());
  EXPECT_TRUE(g.find("mb0.L0.bwd.experts.fc1.dgrad.c2", 0).has_value());
}

// With the all-to-all about as long as the experts' GEMMs, two chunks shorten the MoE forward
// (from the permutation's end to the un-permutation's start) of stage 0's first microbatch, which
// nothing else overlaps: one chunk runs dispatch D (the tokens' all-to-all and their
// probabilities'), the compute G (the sort into expert order, the GEMMs, the sort back) and
// combine R one after the other;
// two chunks cannot beat the longest of the three, and beat their sum. Sequences of 4,096 tokens
// (C = 256, 1,024 rows per expert): at 512 the GEMMs are bound by reading the experts' weights,
// which two chunks read twice, and pipelining loses (322 us against 273 us).
TEST(MoeChunksStep, TwoChunksHideCommunicationBehindTheExperts) {
  const auto moe_forward = [](const SimulatedStep& sim) {
    return record(sim, "mb0.L0.fwd.unpermute").start_ns - record(sim, "mb0.L0.fwd.permute").end_ns;
  };
  const auto duration = [](const TaskRecord& r) { return r.end_ns - r.start_ns; };
  const auto gemms = [&](const SimulatedStep& sim, const std::string& chunk) {
    TimeNs sum = duration(record(sim, "mb0.L0.fwd.dispatch.sort" + chunk)) +
                 duration(record(sim, "mb0.L0.fwd.combine.sort" + chunk));
    for (const std::string k : {"fc1", "act", "fc2"}) sum += duration(record(sim, "mb0.L0.fwd.experts." + k + chunk));
    return sum;
  };
  const auto dispatch = [&](const SimulatedStep& sim, const std::string& chunk) {
    return duration(record(sim, "mb0.L0.fwd.dispatch" + chunk, -1)) +
           duration(record(sim, "mb0.L0.fwd.dispatch.probs" + chunk, -1));
  };
  const SimulatedStep one = simulate(moe_step(1, PipelineSchedule::kOneFOneB, 4096));
  const TimeNs d = dispatch(one, "");
  const TimeNs r = duration(record(one, "mb0.L0.fwd.combine", -1));
  const TimeNs g = gemms(one, "");
  ASSERT_GT(3 * d, g);  // "about as long": within a factor of 3 (the sorts make G the longer)
  ASSERT_LT(d, 3 * g);
  EXPECT_EQ(moe_forward(one), d + g + r);
  const SimulatedStep two = simulate(moe_step(2, PipelineSchedule::kOneFOneB, 4096));
  EXPECT_LT(moe_forward(two), d + g + r);
  EXPECT_GT(moe_forward(two), std::max({d, g, r}));
  // Chunk 1's dispatch runs under chunk 0's GEMMs and ends before them, chunk 0's combine under
  // chunk 1's: the compute stream is the bottleneck, and the forward takes the first dispatch,
  // both chunks' GEMMs back to back and the last combine.
  EXPECT_LT(record(two, "mb0.L0.fwd.dispatch.probs.c1", -1).end_ns, record(two, "mb0.L0.fwd.experts.fc2.c0").end_ns);
  EXPECT_LT(record(two, "mb0.L0.fwd.combine.c0", -1).end_ns, record(two, "mb0.L0.fwd.experts.fc2.c1").end_ns);
  EXPECT_EQ(moe_forward(two), dispatch(two, ".c0") + gemms(two, ".c0") +
                                  gemms(two, ".c1") + duration(record(two, "mb0.L0.fwd.combine.c1", -1)));
  EXPECT_LT(two.report.step_ns, one.report.step_ns);
}

struct Totals {
  std::int64_t gemm_flops = 0, elementwise_bytes = 0, collective_bytes = 0;
  bool operator==(const Totals&) const = default;
};

Totals totals(const TaskGraph& g) {
  Totals t;
  for (TaskIndex i = 0; i < g.num_tasks(); ++i) {
    const Work& w = g.task(i).work;
    if (const auto* gemm = std::get_if<GemmWork>(&w)) t.gemm_flops += gemm->flops();
    if (const auto* e = std::get_if<ElementwiseWork>(&w)) t.elementwise_bytes += e->bytes_read + e->bytes_written;
    if (const auto* c = std::get_if<CollectiveWork>(&w))
      t.collective_bytes += c->bytes_per_peer * static_cast<std::int64_t>(g.group(c->group).size());
  }
  return t;
}

TEST(MoeChunksStep, ChunksMoveTheSameFlopsAndBytes) {
  for (const PipelineSchedule schedule : {PipelineSchedule::kOneFOneB, PipelineSchedule::kZeroBubbleH1}) {
    StepSpec s = moe_step(1, schedule);
    s.gemm_precision = DType::kFp8;  // the casts too, per chunk
    const Totals whole = totals(build_step_graph(testing::model_preset("qwen3-30b-a3b"),
                                                 testing::cluster_preset("dgx-h100-ndr", 16), s).graph);
    for (const int chunks : {3, 32}) {
      s.moe_chunks = chunks;
      const Totals chunked = totals(build_step_graph(testing::model_preset("qwen3-30b-a3b"),
                                                     testing::cluster_preset("dgx-h100-ndr", 16), s).graph);
      EXPECT_EQ(chunked.gemm_flops, whole.gemm_flops) << chunks;
      // Current scaling quantises each chunk on its own: per chunk beyond the first, the experts'
      // 4 quantisations (fc1's and fc2's inputs and output gradients) each add an amax written
      // (4 bytes) and a scale read and written (8), in 48 layers x 2 microbatches.
      EXPECT_EQ(chunked.elementwise_bytes - whole.elementwise_bytes, (chunks - 1) * 4 * 12 * 48 * 2) << chunks;
      EXPECT_EQ(chunked.collective_bytes, whole.collective_bytes) << chunks;
    }
  }
}

// The step counts a microbatch's MoE tensors in its layer's kept activations from its forward to
// its backward; chunking keeps every chunk's until then, so the peak is the closed form's still.
TEST(MoeChunksStep, PeakMemoryIsTheUnchunkedClosedForm) {
  const ModelSpec model = testing::model_preset("qwen3-30b-a3b");
  const SimulatedStep sim = simulate(moe_step(4));
  ActivationLayout layout;
  layout.seq = 512;
  layout.tp = 2;
  for (int stage = 0; stage < 2; ++stage) {
    const StageActivations act =
        stage_activations(model, layout, 4, PipelineLayout{PipelineSchedule::kOneFOneB, 2, 1, 2, {}}, stage);
    const StageReport& st = sim.report.stages[static_cast<std::size_t>(stage)];
    EXPECT_EQ(st.peak_memory_bytes, st.model_state_bytes + act.bytes()) << "stage " << stage;
  }
}

TEST(MoeChunksStep, RefusesChunksWithoutRowsNamingTheFlag) {
  EXPECT_THAT(testing::step_error_of(moe_step(0), "qwen3-30b-a3b"), ::testing::HasSubstr("--chunks 0 must be at least 1"));
  EXPECT_THAT(testing::step_error_of(moe_step(33), "qwen3-30b-a3b"),
              ::testing::HasSubstr("--chunks 33 is more than the 32 rows each expert receives"));
  EXPECT_EQ(testing::step_error_of(moe_step(32), "qwen3-30b-a3b"), "");
  StepSpec dense = testing::small_gpt_step();
  dense.moe_chunks = 2;
  EXPECT_THAT(testing::step_error_of(dense), ::testing::HasSubstr("--chunks 2 pipelines MoE layers; GPT-1.7B has none"));
}

TEST(MoeChunksStep, TheReportEchoesTheChunks) {
  const ModelSpec model = testing::model_preset("qwen3-30b-a3b");
  const StepSpec s = moe_step(3);
  const SimulatedStep sim = simulate(s);
  EXPECT_THAT(step_report_json(sim.report, model, testing::a100_cluster(16), s, "test"),
              ::testing::HasSubstr("\"moe_chunks\": 3"));
  EXPECT_THAT(step_summary(sim.report, model, testing::a100_cluster(16), s), ::testing::HasSubstr("; MoE in 3 chunks\n"));
  EXPECT_THAT(step_summary(sim.report, model, testing::a100_cluster(16), moe_step(1)),
              ::testing::Not(::testing::HasSubstr("chunks")));
}

}  // namespace
}  // namespace moesim
