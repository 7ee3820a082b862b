#include "sim/build/moe_graph.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/error.h"
#include "sim/graph/graph_algorithms.h"
#include "tests/sim/build/graph_test_util.h"
#include "tests/sim/build/test_specs.h"

namespace moesim {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using moesim::testing::expect_rejected;
using moesim::testing::kAllPolicies;
using moesim::testing::predecessor_ids;
using moesim::testing::small_cluster;
using moesim::testing::small_model;
using moesim::testing::small_run;
using moesim::testing::stream_ids;
using moesim::testing::task_at;

std::int64_t gemm_flops(const TaskGraph& g, const std::string& id) {
  return std::get<GemmWork>(task_at(g, id).work).flops();
}

std::string chunk_id(const std::string& base, int c) { return base + ".c" + std::to_string(c); }

// ---------------------------------------------------------------- derive_layer_dims

TEST(DeriveLayerDims, DerivesCapacityRowsAndBytes) {
  const LayerDims d = derive_layer_dims(small_model(), small_cluster(), small_run(3));
  EXPECT_EQ(d.ep_size, 8);
  EXPECT_EQ(d.local_experts, 1);
  EXPECT_EQ(d.capacity, 24);
  EXPECT_EQ(d.rows_per_expert_chunk(), 8 * 24 / 3);
  EXPECT_EQ(d.rows_per_chunk(), 8 * 24 / 3);
  EXPECT_EQ(d.a2a_bytes_per_peer(), 1 * 8 * 64 * 2);
  EXPECT_EQ(d.element_bytes, 2);
  EXPECT_EQ(d.fc1_out, 128);
}

TEST(DeriveLayerDims, KeepsEveryCapacitySlotWhateverTheChunks) {
  ModelSpec m = small_model();
  m.capacity_factor = 1.25;  // k*f*B/E = 2*1.25*96/8 = 30
  for (int n : {1, 4, 7, 8, 16, 30})
    EXPECT_EQ(derive_layer_dims(m, small_cluster(), small_run(n)).capacity, 30) << "n = " << n;
  m.capacity_factor = 1.1;  // 2*1.1*100/8 = 27.5 -> 27; binary 1.1 must not lose a slot elsewhere
  RunSpec r = small_run(1);
  r.tokens_per_gpu = 100;
  EXPECT_EQ(derive_layer_dims(m, small_cluster(), r).capacity, 27);
  r.tokens_per_gpu = 400;  // 2*1.1*400/8 = 110 exactly in decimal
  EXPECT_EQ(derive_layer_dims(m, small_cluster(), r).capacity, 110);
}

TEST(DeriveLayerDims, SplitsCapacityIntoChunksThatDifferByAtMostOne) {
  ModelSpec m = small_model();
  m.capacity_factor = 1.25;  // C = 30
  for (int n = 1; n <= 30; ++n) {
    const LayerDims d = derive_layer_dims(m, small_cluster(), small_run(n));
    const std::vector<std::int64_t> sizes = d.chunk_capacities();
    ASSERT_EQ(sizes.size(), static_cast<std::size_t>(n));
    std::int64_t sum = 0;
    for (int c = 0; c < n; ++c) {
      sum += sizes[static_cast<std::size_t>(c)];
      EXPECT_EQ(d.chunk_capacity(c), sizes[static_cast<std::size_t>(c)]);
      EXPECT_EQ(d.rows_per_chunk(c), 8 * d.chunk_capacity(c));
      EXPECT_EQ(d.rows_per_expert_chunk(c), 8 * d.chunk_capacity(c));
      EXPECT_EQ(d.a2a_bytes_per_peer(c), d.chunk_capacity(c) * 64 * 2);
      if (c > 0) {
        EXPECT_LE(sizes[static_cast<std::size_t>(c)], sizes[static_cast<std::size_t>(c - 1)]);
      }
    }
    EXPECT_EQ(sum, 30) << "n = " << n;  // no slot dropped
    EXPECT_LE(sizes.front() - sizes.back(), 1) << "n = " << n;
    EXPECT_EQ(d.rows_per_chunk(), d.rows_per_chunk(0));  // the default: the largest chunk
  }
  EXPECT_EQ(derive_layer_dims(m, small_cluster(), small_run(4)).chunk_capacities(),
            (std::vector<std::int64_t>{8, 8, 7, 7}));
}

TEST(DeriveLayerDims, AlignedChunksAreWholeBlocksButTheLast) {
  ModelSpec m = small_model();
  m.capacity_factor = 1.25;  // C = 30
  const auto sizes = [&](int n, int align) {
    RunSpec r = small_run(n);
    r.chunk_alignment = align;
    return derive_layer_dims(m, small_cluster(), r).chunk_capacities();
  };
  using V = std::vector<std::int64_t>;
  EXPECT_EQ(sizes(3, 8), (V{8, 8, 14}));         // 3 blocks, the 6 left go to the last chunk
  EXPECT_EQ(sizes(2, 4), (V{16, 14}));           // 7 blocks of 4: 4 + 3, and 2 slots left
  EXPECT_EQ(sizes(4, 1), (V{8, 8, 7, 7}));       // alignment 1: differ by at most one
  EXPECT_EQ(sizes(5, 6), (V{6, 6, 6, 6, 6}));    // 30 = 5 blocks of 6: even
  for (int n : {1, 2, 3}) {
    for (int align : {1, 2, 4, 8, 10}) {
      RunSpec r = small_run(n);
      r.chunk_alignment = align;
      const LayerDims d = derive_layer_dims(m, small_cluster(), r);
      std::int64_t sum = 0, largest = 0;
      for (int c = 0; c < n; ++c) {
        sum += d.chunk_capacity(c);
        largest = std::max(largest, d.chunk_capacity(c));
        if (c + 1 < n) {
          EXPECT_EQ(d.chunk_capacity(c) % align, 0) << n << " " << align;
        }
      }
      EXPECT_EQ(sum, 30) << n << " " << align;
      EXPECT_EQ(d.chunk_capacity(), largest);  // the default is the largest chunk, last included
    }
  }
  RunSpec r = small_run(4);
  r.chunk_alignment = 8;
  expect_rejected(m, r, "capacity C = 30 holds fewer than num_chunks n = 4 blocks of chunk_alignment 8 slots");
  r.chunk_alignment = 0;
  expect_rejected(m, r, "chunk_alignment must be in [1, 1048576], got 0");
}

// Uneven chunks change how the work is cut, never how much there is: every FLOP and byte of the
// layer at n = 1 is in the chunks at any n, C not divisible by n included.
TEST(BuilderUnevenChunks, ChunksTogetherDoTheWholeLayersWork) {
  ModelSpec m = small_model();
  m.capacity_factor = 1.25;  // C = 30
  const auto totals = [&](int n) {
    const TaskGraph g = build_moe_graph(m, small_cluster(), small_run(n));
    std::int64_t flops = 0, a2a = 0;
    for (int i = 0; i < n; ++i) {
      for (const char* gemm : {"L0.fwd.fc1", "L0.fwd.fc2", "L0.bwd.fc1.dgrad", "L0.bwd.fc2.wgrad"})
        flops += gemm_flops(g, chunk_id(gemm, i));
      for (const char* op : {"L0.fwd.dispatch", "L0.bwd.combine"})
        a2a += std::get<CollectiveWork>(task_at(g, chunk_id(op, i)).work).bytes_per_peer;
    }
    return std::make_pair(flops, a2a);
  };
  const auto whole = totals(1);
  for (int n : {3, 4, 7, 8, 11}) EXPECT_EQ(totals(n), whole) << "n = " << n;
  const TaskGraph g = build_moe_graph(m, small_cluster(), small_run(4));
  EXPECT_EQ(std::get<GemmWork>(task_at(g, "L0.fwd.fc1.c0").work).m, 8 * 8);  // chunks of 8, 8, 7, 7
  EXPECT_EQ(std::get<GemmWork>(task_at(g, "L0.fwd.fc1.c3").work).m, 8 * 7);
}

TEST(DeriveLayerDims, SwigluDoublesFc1AndEpSizeSplitsExperts) {
  ModelSpec m = small_model();
  m.activation = Activation::kSwiglu;
  const LayerDims d = derive_layer_dims(m, small_cluster(), small_run(2, OrderPolicy::kMPipeMoE, 4));
  EXPECT_EQ(d.fc1_out, 256);
  EXPECT_EQ(d.ep_size, 4);
  EXPECT_EQ(d.local_experts, 2);
  EXPECT_EQ(d.rows_per_expert_chunk(), 4 * 24 / 2);
}

TEST(DeriveLayerDims, RejectsInvalidModels) {
  ModelSpec m = small_model();
  m.num_experts = 0;
  expect_rejected(m, small_run(), "has no MoE layer");
  m = small_model();
  m.top_k = 0;
  expect_rejected(m, small_run(), "top_k must be in [1, num_experts = 8], got 0");
  m.top_k = 9;
  expect_rejected(m, small_run(), "top_k must be in [1, num_experts = 8], got 9");
  m = small_model();
  m.capacity_factor = 0;
  expect_rejected(m, small_run(), "capacity_factor must be positive and finite, got 0");
  m.capacity_factor = -1.5;
  expect_rejected(m, small_run(), "got -1.5");
  m.capacity_factor = std::numeric_limits<double>::quiet_NaN();
  expect_rejected(m, small_run(), "capacity_factor must be positive and finite");
  m.capacity_factor = std::numeric_limits<double>::infinity();
  expect_rejected(m, small_run(), "capacity_factor must be positive and finite");
  m = small_model();
  m.num_experts = 12;
  expect_rejected(m, small_run(), "num_experts 12 is not divisible by ep_size 8");
  m = small_model();
  m.d_model = 0;
  expect_rejected(m, small_run(), "d_model must be positive");
}

TEST(DeriveLayerDims, RejectsInvalidRuns) {
  const ModelSpec m = small_model();
  RunSpec r = small_run();
  r.tokens_per_gpu = 0;
  expect_rejected(m, r, "tokens per GPU must be positive, got 0");
  r = small_run(0);
  expect_rejected(m, r, "num_chunks must be at least 1, got 0");
  r = small_run();
  r.num_moe_layers = 0;
  expect_rejected(m, r, "num_moe_layers must be at least 1, got 0");
  expect_rejected(m, small_run(1, OrderPolicy::kMPipeMoE, 3), "ep_size 3 must divide the cluster's GPU count 8");
  expect_rejected(m, small_run(1, OrderPolicy::kMPipeMoE, 16), "ep_size 16 must divide the cluster's GPU count 8");
  expect_rejected(m, small_run(1, OrderPolicy::kMPipeMoE, -2), "ep_size must be positive");
  expect_rejected(m, small_run(25), "more chunks than capacity slots");
  expect_rejected(m, small_run(25), "= 24 is less than num_chunks n = 25");
}

TEST(DeriveLayerDims, RejectsOverflowingSizes) {
  ModelSpec m = small_model();
  m.d_model = std::int64_t{1} << 40;
  RunSpec r = small_run();
  r.tokens_per_gpu = std::int64_t{1} << 30;
  expect_rejected(m, r, "size overflow");
}

// ---------------------------------------------------------------- work of every task

struct Combo {
  int n;
  OrderPolicy order;
  int ep;
  int top_k;
  double f;
};

class BuilderWork : public ::testing::TestWithParam<Combo> {};

// A test name gtest accepts (alphanumerics and '_'): n3_mpipemoe_ep8_k2_f1x0.
std::string combo_name(const Combo& c) {
  std::string f = std::to_string(c.f);
  f = f.substr(0, f.find('.') + 2);
  for (char& ch : f)
    if (ch == '.') ch = 'x';
  return "n" + std::to_string(c.n) + "_" + std::string(to_string(c.order)) + "_ep" + std::to_string(c.ep) +
         "_k" + std::to_string(c.top_k) + "_f" + f;
}

TEST_P(BuilderWork, FlopsAndBytesMatchReferenceFormulas) {
  const Combo c = GetParam();
  ModelSpec m = small_model();
  m.top_k = c.top_k;
  m.capacity_factor = c.f;
  RunSpec r = small_run(c.n, c.order, c.ep);
  const TaskGraph g = build_moe_graph(m, small_cluster(), r);
  const LayerDims d = derive_layer_dims(m, small_cluster(), r);
  const std::int64_t B = r.tokens_per_gpu, M = m.d_model, H = m.d_ffn, E = m.num_experts;
  const std::int64_t k = m.top_k, eb = m.element_bytes(), N = d.ep_size;
  // The combos keep C = k*f*B/E exact, so R = k*f*B rows per rank and pass.
  const auto R = static_cast<std::int64_t>(std::llround(static_cast<double>(k) * c.f * B));
  ASSERT_EQ(d.capacity * E, R);

  EXPECT_EQ(gemm_flops(g, "L0.fwd.gate"), 2 * B * M * E);
  EXPECT_EQ(gemm_flops(g, "L0.bwd.gate.dgrad") + gemm_flops(g, "L0.bwd.gate.wgrad"), 2 * 2 * B * M * E);
  std::int64_t fc1 = 0, fc2 = 0, fc1_bwd = 0, fc2_bwd = 0;
  for (int i = 0; i < c.n; ++i) {
    fc1 += gemm_flops(g, chunk_id("L0.fwd.fc1", i));
    fc2 += gemm_flops(g, chunk_id("L0.fwd.fc2", i));
    EXPECT_EQ(gemm_flops(g, chunk_id("L0.bwd.fc1.dgrad", i)), gemm_flops(g, chunk_id("L0.fwd.fc1", i)));
    EXPECT_EQ(gemm_flops(g, chunk_id("L0.bwd.fc1.wgrad", i)), gemm_flops(g, chunk_id("L0.fwd.fc1", i)));
    fc1_bwd += gemm_flops(g, chunk_id("L0.bwd.fc1.dgrad", i)) + gemm_flops(g, chunk_id("L0.bwd.fc1.wgrad", i));
    fc2_bwd += gemm_flops(g, chunk_id("L0.bwd.fc2.dgrad", i)) + gemm_flops(g, chunk_id("L0.bwd.fc2.wgrad", i));
    const auto& g1 = std::get<GemmWork>(task_at(g, chunk_id("L0.fwd.fc1", i)).work);
    EXPECT_EQ(g1.batch, E / N);
    EXPECT_EQ(g1.m, N * d.capacity / c.n);
    EXPECT_EQ(g1.dtype, DType::kBf16);
    EXPECT_EQ(g1.element_bytes, 2);
    const auto& act = std::get<ElementwiseWork>(task_at(g, chunk_id("L0.fwd.act", i)).work);
    EXPECT_EQ(act.bytes_read, R / c.n * H * eb);
    EXPECT_EQ(act.bytes_written, R / c.n * H * eb);
    for (const char* a2a : {"L0.fwd.dispatch", "L0.fwd.combine", "L0.bwd.dispatch", "L0.bwd.combine"}) {
      const Task& t = task_at(g, chunk_id(a2a, i));
      ASSERT_TRUE(t.is_collective());
      const auto& w = std::get<CollectiveWork>(t.work);
      EXPECT_EQ(w.op, CollectiveOp::kAllToAll);
      EXPECT_EQ(w.bytes_per_peer * N * c.n, k * B * M * eb * c.f) << a2a;
      EXPECT_EQ(g.group(w.group).size(), static_cast<std::size_t>(N));
    }
  }
  EXPECT_EQ(fc1, 2 * R * M * H);
  EXPECT_EQ(fc2, 2 * R * H * M);
  EXPECT_EQ(fc1_bwd, 2 * 2 * R * M * H);
  EXPECT_EQ(fc2_bwd, 2 * 2 * R * H * M);

  const auto& encode = std::get<ElementwiseWork>(task_at(g, "L0.fwd.encode").work);
  EXPECT_EQ(encode.bytes_read, B * M * eb);
  EXPECT_EQ(encode.bytes_written, R * M * eb);
  const auto& decode = std::get<ElementwiseWork>(task_at(g, "L0.fwd.decode").work);
  EXPECT_EQ(decode.bytes_read, (R * M + B * k) * eb);
  EXPECT_EQ(decode.bytes_written, B * M * eb);
  const auto& route = std::get<ElementwiseWork>(task_at(g, "L0.fwd.route").work);
  EXPECT_EQ(route.bytes_read, B * E * eb);
  EXPECT_EQ(route.bytes_written, (B * E + 2 * B * k) * eb);
  const auto& bwd_encode = std::get<ElementwiseWork>(task_at(g, "L0.bwd.encode").work);
  EXPECT_EQ(bwd_encode.bytes_read, R * M * eb);
  EXPECT_EQ(bwd_encode.bytes_written, B * M * eb);
}

INSTANTIATE_TEST_SUITE_P(Combos, BuilderWork,
                         ::testing::Values(Combo{1, OrderPolicy::kMPipeMoE, 0, 2, 1.0},
                                           Combo{3, OrderPolicy::kMPipeMoE, 8, 2, 1.0},
                                           Combo{4, OrderPolicy::kFasterMoE, 4, 1, 2.0},
                                           Combo{2, OrderPolicy::kTutel, 2, 4, 0.5},
                                           Combo{6, OrderPolicy::kSequential, 8, 1, 1.0},
                                           Combo{8, OrderPolicy::kTutel, 4, 2, 1.0},
                                           Combo{3, OrderPolicy::kFasterMoE, 1, 8, 1.0}),
                         [](const ::testing::TestParamInfo<Combo>& info) { return combo_name(info.param); });

TEST(Builder, TaskFieldsAndStages) {
  const TaskGraph g = build_moe_graph(small_model(), small_cluster(), small_run(2));
  const Task& fc2w = task_at(g, "L0.bwd.fc2.wgrad.c1");
  EXPECT_EQ(fc2w.stage, "fc2");
  EXPECT_EQ(fc2w.chunk, 1);
  EXPECT_EQ(fc2w.pass, Pass::kBackward);
  EXPECT_EQ(fc2w.layer, 0);
  EXPECT_EQ(fc2w.stream, StreamClass::kCompute);
  const auto& w = std::get<GemmWork>(fc2w.work);
  EXPECT_EQ(w.m, 128);
  EXPECT_EQ(w.n, 64);
  EXPECT_EQ(task_at(g, "L0.fwd.gate").chunk, -1);
  EXPECT_EQ(task_at(g, "L0.bwd.gate.dgrad").stage, "gate");
  EXPECT_EQ(task_at(g, "L0.bwd.combine.c0").stage, "combine");
  std::set<std::string> stages;
  for (TaskIndex i = 0; i < g.num_tasks(); ++i) stages.insert(g.task(i).stage);
  EXPECT_EQ(stages, (std::set<std::string>{"gate", "route", "encode", "dispatch", "fc1", "act", "fc2",
                                           "combine", "decode"}));
}

TEST(Builder, SharedExpertsForwardAndBackward) {
  ModelSpec m = small_model();
  m.shared_experts = {2, 32};
  m.activation = Activation::kSwiglu;
  const TaskGraph g = build_moe_graph(m, small_cluster(), small_run(2));
  const auto& fc1 = std::get<GemmWork>(task_at(g, "L0.fwd.shared.fc1").work);
  EXPECT_EQ(fc1.m, 96);
  EXPECT_EQ(fc1.k, 64);
  EXPECT_EQ(fc1.n, 2 * 2 * 32);
  const auto& fc2 = std::get<GemmWork>(task_at(g, "L0.fwd.shared.fc2").work);
  EXPECT_EQ(fc2.k, 64);
  EXPECT_EQ(fc2.n, 64);
  std::int64_t fwd = 0, bwd = 0;
  for (const char* id : {"L0.fwd.shared.fc1", "L0.fwd.shared.fc2"}) fwd += gemm_flops(g, id);
  for (const char* id : {"L0.bwd.shared.fc2.dgrad", "L0.bwd.shared.fc2.wgrad", "L0.bwd.shared.fc1.wgrad",
                         "L0.bwd.shared.fc1.dgrad"})
    bwd += gemm_flops(g, id);
  EXPECT_EQ(bwd, 2 * fwd);
  EXPECT_EQ(task_at(g, "L0.bwd.shared.act").stage, "shared");
  // Compute order: shared forward after encode; shared backward right after bwd.decode.
  const auto compute = stream_ids(g, 0, StreamClass::kCompute);
  EXPECT_THAT(std::vector<std::string>(compute.begin(), compute.begin() + 7),
              ElementsAreArray({"L0.fwd.gate", "L0.fwd.route", "L0.fwd.encode", "L0.fwd.shared.fc1",
                                "L0.fwd.shared.act", "L0.fwd.shared.fc2", "L0.fwd.fc1.c0"}));
  auto it = std::find(compute.begin(), compute.end(), "L0.bwd.decode");
  ASSERT_NE(it, compute.end());
  EXPECT_EQ(*(it + 1), "L0.bwd.shared.fc2.dgrad");
  EXPECT_EQ(*(it + 5), "L0.bwd.shared.fc1.dgrad");
  EXPECT_EQ(*(it + 6), "L0.bwd.fc2.dgrad.c0");
  check_acyclic(g);
}

// ---------------------------------------------------------------- issue order per policy

using Ids = std::vector<std::string>;

struct IssueCase {
  OrderPolicy order;
  Ids dispatch_stream;
  Ids combine_stream;
  Ids first_bwd_compute;  // the first chunk compute tasks of the backward pass
};

class IssueOrder : public ::testing::TestWithParam<IssueCase> {};

TEST_P(IssueOrder, CommStreamsForThreeChunks) {
  const IssueCase& c = GetParam();
  const TaskGraph g = build_moe_graph(small_model(), small_cluster(), small_run(3, c.order));
  EXPECT_EQ(stream_ids(g, 0, StreamClass::kCommDispatch), c.dispatch_stream);
  EXPECT_EQ(stream_ids(g, 0, StreamClass::kCommCombine), c.combine_stream);
  const Ids compute = stream_ids(g, 0, StreamClass::kCompute);
  auto it = std::find(compute.begin(), compute.end(), "L0.bwd.decode");
  ASSERT_NE(it, compute.end());
  EXPECT_EQ(Ids(it + 1, it + 1 + static_cast<std::ptrdiff_t>(c.first_bwd_compute.size())),
            c.first_bwd_compute);
}

const Ids kBwdC0 = {"L0.bwd.fc2.dgrad.c0", "L0.bwd.act.c0", "L0.bwd.fc2.wgrad.c0",
                    "L0.bwd.fc1.wgrad.c0", "L0.bwd.fc1.dgrad.c0", "L0.bwd.fc2.dgrad.c1"};
const Ids kBwdC2 = {"L0.bwd.fc2.dgrad.c2", "L0.bwd.act.c2", "L0.bwd.fc2.wgrad.c2",
                    "L0.bwd.fc1.wgrad.c2", "L0.bwd.fc1.dgrad.c2", "L0.bwd.fc2.dgrad.c1"};

INSTANTIATE_TEST_SUITE_P(
    Policies, IssueOrder,
    ::testing::Values(
        IssueCase{OrderPolicy::kMPipeMoE,
                  {"L0.fwd.dispatch.c0", "L0.fwd.dispatch.c1", "L0.fwd.dispatch.c2", "L0.bwd.combine.c0",
                   "L0.bwd.combine.c1", "L0.bwd.dispatch.c0", "L0.bwd.combine.c2", "L0.bwd.dispatch.c1",
                   "L0.bwd.dispatch.c2"},
                  {"L0.fwd.combine.c0", "L0.fwd.combine.c1", "L0.fwd.combine.c2"},
                  kBwdC0},
        IssueCase{OrderPolicy::kFasterMoE,
                  {"L0.fwd.dispatch.c0", "L0.fwd.dispatch.c1", "L0.fwd.dispatch.c2", "L0.fwd.combine.c0",
                   "L0.fwd.combine.c1", "L0.fwd.combine.c2", "L0.bwd.combine.c0", "L0.bwd.combine.c1",
                   "L0.bwd.combine.c2", "L0.bwd.dispatch.c0", "L0.bwd.dispatch.c1", "L0.bwd.dispatch.c2"},
                  {},
                  kBwdC0},
        IssueCase{OrderPolicy::kTutel,
                  {"L0.fwd.dispatch.c0", "L0.fwd.dispatch.c1", "L0.fwd.combine.c0", "L0.fwd.dispatch.c2",
                   "L0.fwd.combine.c1", "L0.fwd.combine.c2", "L0.bwd.combine.c2", "L0.bwd.combine.c1",
                   "L0.bwd.dispatch.c2", "L0.bwd.combine.c0", "L0.bwd.dispatch.c1", "L0.bwd.dispatch.c0"},
                  {},
                  kBwdC2},
        IssueCase{OrderPolicy::kSequential,
                  {"L0.fwd.dispatch.c0", "L0.fwd.combine.c0", "L0.fwd.dispatch.c1", "L0.fwd.combine.c1",
                   "L0.fwd.dispatch.c2", "L0.fwd.combine.c2", "L0.bwd.combine.c0", "L0.bwd.dispatch.c0",
                   "L0.bwd.combine.c1", "L0.bwd.dispatch.c1", "L0.bwd.combine.c2", "L0.bwd.dispatch.c2"},
                  {},
                  kBwdC0}),
    [](const ::testing::TestParamInfo<IssueCase>& info) { return std::string(to_string(info.param.order)); });

TEST(Builder, ForwardComputeOrderIsChunkOrderForEveryPolicy) {
  for (OrderPolicy p : kAllPolicies) {
    const TaskGraph g = build_moe_graph(small_model(), small_cluster(), small_run(2, p));
    const Ids compute = stream_ids(g, 0, StreamClass::kCompute);
    EXPECT_EQ(Ids(compute.begin(), compute.begin() + 10),
              (Ids{"L0.fwd.gate", "L0.fwd.route", "L0.fwd.encode", "L0.fwd.fc1.c0", "L0.fwd.act.c0",
                   "L0.fwd.fc2.c0", "L0.fwd.fc1.c1", "L0.fwd.act.c1", "L0.fwd.fc2.c1", "L0.fwd.decode"}))
        << to_string(p);
    EXPECT_EQ(Ids(compute.end() - 4, compute.end()),
              (Ids{"L0.bwd.encode", "L0.bwd.route", "L0.bwd.gate.dgrad", "L0.bwd.gate.wgrad"}));
  }
}

TEST(Builder, SequentialSerialisesEachChunk) {
  const TaskGraph g = build_moe_graph(small_model(), small_cluster(), small_run(2, OrderPolicy::kSequential));
  // S1 waits for R0 (stream order), and R0 waits for chunk 0's FC2 (data).
  const TaskIndex s1 = *g.find("L0.fwd.dispatch.c1", -1);
  const TaskIndex r0 = *g.find("L0.fwd.combine.c0", -1);
  const TaskIndex fc2 = *g.find("L0.fwd.fc2.c0", 0);
  auto preds = g.predecessors(s1);
  EXPECT_NE(std::find(preds.begin(), preds.end(), r0), preds.end());
  preds = g.predecessors(r0);
  EXPECT_NE(std::find(preds.begin(), preds.end(), fc2), preds.end());
}

// ---------------------------------------------------------------- structure

TEST(Builder, AcyclicForEveryPolicyAndChunkCount) {
  ModelSpec m = small_model();
  m.shared_experts = {1, 64};
  for (OrderPolicy p : kAllPolicies) {
    for (int n = 1; n <= 8; ++n) {
      RunSpec r = small_run(n, p);
      r.num_moe_layers = 2;
      const TaskGraph g = build_moe_graph(m, small_cluster(), r);
      EXPECT_FALSE(find_cycle(g).has_value()) << to_string(p) << " n=" << n;
      EXPECT_EQ(topological_order(g).size(), g.num_tasks());
    }
  }
}

// Between layers: layer l's output is layer l+1's T_I, written (allocated) by layer l's decode;
// layer l+1's input gradient dT_I is freed by layer l's backward decode, its last reader.
TEST(Builder, LayerBoundaryTensorsBelongToTheirProducerAndLastReader) {
  RunSpec r = small_run(2, OrderPolicy::kMPipeMoE);
  r.num_moe_layers = 3;
  const TaskGraph g = build_moe_graph(small_model(), small_cluster(), r);
  const auto buffer_named = [&](const std::string& name) {
    for (BufferId b = 0; b < g.num_buffers(); ++b)
      if (g.buffer(b).name == name && g.buffer(b).rank == 0) return b;
    ADD_FAILURE() << "no buffer " << name;
    return BufferId{0};
  };
  const auto task = [&](const std::string& id) { return g.task(*g.find(id, 0)); };
  const auto has = [](const std::vector<BufferId>& v, BufferId b) { return std::find(v.begin(), v.end(), b) != v.end(); };
  EXPECT_TRUE(has(task("L0.fwd.gate").allocates, buffer_named("L0.T_I")));
  EXPECT_TRUE(has(task("L0.bwd.gate.wgrad").frees, buffer_named("L0.dT_I")));
  for (int l = 1; l < 3; ++l) {
    const std::string below = "L" + std::to_string(l - 1), here = "L" + std::to_string(l);
    EXPECT_TRUE(has(task(below + ".fwd.decode").allocates, buffer_named(here + ".T_I"))) << l;
    EXPECT_FALSE(has(task(here + ".fwd.gate").allocates, buffer_named(here + ".T_I"))) << l;
    EXPECT_TRUE(has(task(here + ".bwd.gate.wgrad").frees, buffer_named(here + ".T_I"))) << l;
    EXPECT_TRUE(has(task(below + ".bwd.decode").frees, buffer_named(here + ".dT_I"))) << l;
    EXPECT_FALSE(has(task(here + ".bwd.gate.wgrad").frees, buffer_named(here + ".dT_I"))) << l;
  }
}

// With shared experts the lower layer's last reader of dY is their W2 gradient, after their
// dgrad (through the activation): it frees the upper layer's dT_I.
TEST(Builder, SharedExpertsReadTheIncomingGradientLast) {
  RunSpec r = small_run(2, OrderPolicy::kMPipeMoE);
  r.num_moe_layers = 2;
  ModelSpec m = small_model();
  m.shared_experts.count = 1;
  m.shared_experts.d_ffn = 32;
  const TaskGraph g = build_moe_graph(m, small_cluster(), r);
  BufferId d_t_i = 0;
  for (BufferId b = 0; b < g.num_buffers(); ++b)
    if (g.buffer(b).name == "L1.dT_I" && g.buffer(b).rank == 0) d_t_i = b;
  const auto task = [&](const std::string& id) { return *g.find(id, 0); };
  const auto frees = [&](const std::string& id) {
    const auto& f = g.task(task(id)).frees;
    return std::find(f.begin(), f.end(), d_t_i) != f.end();
  };
  EXPECT_TRUE(frees("L0.bwd.shared.fc2.wgrad"));
  EXPECT_FALSE(frees("L0.bwd.decode"));
  const auto edge = [&](const std::string& from, const std::string& to) {
    const auto& p = g.predecessors(task(to));
    return std::find(p.begin(), p.end(), task(from)) != p.end();
  };
  EXPECT_TRUE(edge("L0.bwd.shared.fc2.dgrad", "L0.bwd.shared.act"));
  EXPECT_TRUE(edge("L0.bwd.shared.act", "L0.bwd.shared.fc2.wgrad"));
}

TEST(Builder, RepresentativeAndFullGraphs) {
  const RunSpec r = small_run(3, OrderPolicy::kMPipeMoE, 4);
  const TaskGraph rep = build_moe_graph(small_model(), small_cluster(), r);
  EXPECT_EQ(rep.world_size(), 4);
  EXPECT_EQ(rep.simulated_ranks(), std::vector<int>{0});
  ASSERT_EQ(rep.num_groups(), 1u);
  EXPECT_EQ(rep.group(0), (std::vector<int>{0, 1, 2, 3}));

  const TaskGraph full = build_moe_graph(small_model(), small_cluster(), r, BuildOptions{false});
  EXPECT_EQ(full.simulated_ranks(), (std::vector<int>{0, 1, 2, 3}));
  std::size_t collectives = 0, local = 0;
  for (TaskIndex i = 0; i < full.num_tasks(); ++i) (full.task(i).is_collective() ? collectives : local)++;
  EXPECT_EQ(collectives, 4u * 3u);  // fwd + bwd dispatch and combine, once per chunk
  std::size_t rep_local = 0;
  for (TaskIndex i = 0; i < rep.num_tasks(); ++i) rep_local += rep.task(i).is_collective() ? 0 : 1;
  EXPECT_EQ(local, 4 * rep_local);
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_TRUE(full.find("L0.fwd.fc1.c1", rank).has_value());
    EXPECT_EQ(stream_ids(full, rank, StreamClass::kCompute), stream_ids(rep, 0, StreamClass::kCompute));
    EXPECT_EQ(stream_ids(full, rank, StreamClass::kCommDispatch),
              stream_ids(rep, 0, StreamClass::kCommDispatch));
  }
  const TaskIndex s0 = *full.find("L0.fwd.dispatch.c0", -1);
  EXPECT_EQ(full.ranks_of(s0), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(full.predecessors(s0).size(), 4u);  // each rank's encode
  check_acyclic(full);
}

TEST(Builder, MultiLayerChaining) {
  RunSpec r = small_run(2);
  r.num_moe_layers = 3;
  const TaskGraph g = build_moe_graph(small_model(), small_cluster(), r);
  auto has_edge = [&](const std::string& from, const std::string& to) {
    const auto succ = g.successors(*g.find(from, 0));
    return std::find(succ.begin(), succ.end(), *g.find(to, 0)) != succ.end();
  };
  EXPECT_TRUE(has_edge("L0.fwd.decode", "L1.fwd.gate"));
  EXPECT_TRUE(has_edge("L1.fwd.decode", "L2.fwd.gate"));
  EXPECT_TRUE(has_edge("L2.fwd.decode", "L2.bwd.decode"));
  EXPECT_TRUE(has_edge("L2.bwd.gate.dgrad", "L1.bwd.decode"));
  EXPECT_TRUE(has_edge("L1.bwd.gate.dgrad", "L0.bwd.decode"));
  const Ids compute = stream_ids(g, 0, StreamClass::kCompute);
  EXPECT_EQ(compute.back(), "L0.bwd.gate.wgrad");
  auto pos = [&](const std::string& id) { return std::find(compute.begin(), compute.end(), id) - compute.begin(); };
  EXPECT_LT(pos("L2.fwd.decode"), pos("L2.bwd.decode"));
  EXPECT_LT(pos("L2.bwd.gate.wgrad"), pos("L1.bwd.decode"));
  EXPECT_EQ(task_at(g, "L1.fwd.fc1.c0").layer, 1);
}

TEST(Builder, DataEdgesOfOneChunk) {
  const TaskGraph g = build_moe_graph(small_model(), small_cluster(), small_run(2, OrderPolicy::kFasterMoE));
  const auto preds_of = [&](const std::string& id) { return predecessor_ids(g, id); };
  EXPECT_TRUE(preds_of("L0.fwd.fc1.c1").count("L0.fwd.dispatch.c1"));
  EXPECT_TRUE(preds_of("L0.fwd.combine.c1").count("L0.fwd.fc2.c1"));
  EXPECT_TRUE(preds_of("L0.fwd.decode").count("L0.fwd.combine.c0"));
  EXPECT_TRUE(preds_of("L0.fwd.decode").count("L0.fwd.route"));
  EXPECT_TRUE(preds_of("L0.bwd.combine.c0").count("L0.bwd.decode"));
  EXPECT_TRUE(preds_of("L0.bwd.fc2.wgrad.c1").count("L0.bwd.combine.c1"));
  EXPECT_TRUE(preds_of("L0.bwd.dispatch.c1").count("L0.bwd.fc1.dgrad.c1"));
  EXPECT_TRUE(preds_of("L0.bwd.encode").count("L0.bwd.dispatch.c0"));
  EXPECT_TRUE(preds_of("L0.bwd.gate.dgrad").count("L0.bwd.encode") ||
              preds_of("L0.bwd.gate.dgrad").count("L0.bwd.route"));
}

}  // namespace
}  // namespace moesim
