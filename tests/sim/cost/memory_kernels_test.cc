// The memory-bound kernels' calibrated pricing: which kernel a task is (by stage and pass), the
// bytes the calibration fits against (held to the graph builder's own tasks), the storage that
// picks the figures, and the elementwise cost with and without them.
#include "sim/cost/memory_kernels.h"

#include <gtest/gtest.h>

#include "sim/cost/compute_cost.h"
#include "sim/build/memory_kernel_traffic.h"
#include "sim/build/moe_graph.h"
#include "tests/sim/build/test_specs.h"

namespace moesim {
namespace {

Task elementwise_task(std::string id, std::string stage, Pass pass) {
  Task t;
  t.id = std::move(id);
  t.stage = std::move(stage);
  t.pass = pass;
  t.work = ElementwiseWork{1000, 1000, 0};
  return t;
}

TEST(MemoryKernels, KernelOfATaskByStageAndPass) {
  using K = MemoryKernel;
  EXPECT_EQ(memory_kernel_of(elementwise_task("L0.fwd.route", "route", Pass::kForward)), K::kRouteFwd);
  EXPECT_EQ(memory_kernel_of(elementwise_task("L0.bwd.route", "route", Pass::kBackward)), K::kRouteBwd);
  EXPECT_EQ(memory_kernel_of(elementwise_task("L0.fwd.encode", "encode", Pass::kForward)), K::kEncodeFwd);
  EXPECT_EQ(memory_kernel_of(elementwise_task("L0.bwd.act.c1", "act", Pass::kBackward)), K::kActBwd);
  EXPECT_EQ(memory_kernel_of(elementwise_task("L0.bwd.decode", "decode", Pass::kBackward)), K::kDecodeBwd);
  // The shared experts' elementwise task is their activation.
  EXPECT_EQ(memory_kernel_of(elementwise_task("L0.fwd.shared.act", "shared", Pass::kForward)), K::kActFwd);
  // A recomputed forward task runs the forward's kernel in the backward pass.
  EXPECT_EQ(memory_kernel_of(elementwise_task("L0.bwd.recompute.route", "recompute", Pass::kBackward)), K::kRouteFwd);
  EXPECT_EQ(memory_kernel_of(elementwise_task("L1.bwd.recompute.act.c2", "recompute", Pass::kBackward)), K::kActFwd);
  EXPECT_EQ(memory_kernel_of(elementwise_task("L0.fwd.other", "other", Pass::kForward)), std::nullopt);
  Task gemm = elementwise_task("L0.fwd.gate", "gate", Pass::kForward);
  gemm.work = GemmWork{1, 8, 8, 8, DType::kBf16, 2};
  EXPECT_EQ(memory_kernel_of(gemm), std::nullopt);
}

// memory_kernel_traffic is what the calibration fits against: it must be what the graph prices.
// One GPU, uniform routing, capacity factor 1: every token's k rows are sent and received.
TEST(MemoryKernels, TrafficIsTheGraphBuildersOwn) {
  ModelSpec m = testing::small_model();  // bf16, gelu, E = 8, k = 2, M = 64, H = 128
  ClusterSpec c = testing::small_cluster();
  c.node.gpus_per_node = 1;
  c.num_nodes = 1;
  const RunSpec r = testing::small_run(1);  // B = 96
  const TaskGraph g = build_moe_graph(m, c, r);
  const KernelShape shape{96, 8, 2, 64, 128, 128, 192};
  const std::pair<const char*, MemoryKernel> tasks[] = {
      {"L0.fwd.route", MemoryKernel::kRouteFwd},   {"L0.fwd.encode", MemoryKernel::kEncodeFwd},
      {"L0.fwd.act.c0", MemoryKernel::kActFwd},    {"L0.fwd.decode", MemoryKernel::kDecodeFwd},
      {"L0.bwd.decode", MemoryKernel::kDecodeBwd}, {"L0.bwd.act.c0", MemoryKernel::kActBwd},
      {"L0.bwd.encode", MemoryKernel::kEncodeBwd}, {"L0.bwd.route", MemoryKernel::kRouteBwd}};
  for (const auto& [id, kernel] : tasks) {
    const auto i = g.find(id, 0);
    ASSERT_TRUE(i.has_value()) << id;
    const Task& t = g.task(*i);
    EXPECT_EQ(memory_kernel_of(t), kernel) << id;
    const auto& w = std::get<ElementwiseWork>(t.work);
    const ElementwiseWork want = memory_kernel_traffic(kernel, shape, 2);
    EXPECT_EQ(w.bytes_read, want.bytes_read) << id;
    EXPECT_EQ(w.bytes_written, want.bytes_written) << id;
    EXPECT_EQ(w.flops, want.flops) << id;
  }
  EXPECT_EQ(stored_element_bytes(g), 2);
  m.dtype = m.gemm_dtype = DType::kFp32;
  EXPECT_EQ(stored_element_bytes(build_moe_graph(m, c, r)), 4);
  EXPECT_EQ(stored_element_bytes(TaskGraph(1, {0})), 0);
}

ClusterSpec calibrated_cluster(std::map<DType, KernelFigures> kernels) {
  ClusterSpec c;
  GpuSpec& g = c.node.gpu;
  g.name = "G";
  g.peak_flops = {{DType::kFp32, 60e12}};
  g.hbm_bandwidth = 4e12;
  g.hbm_efficiency = 1.0;
  g.kernel_launch_ns = 3000;
  g.calibration = GpuCalibration{"cal.yaml", "dev", {}, {}, std::move(kernels)};
  return c;
}

TEST(MemoryKernels, CalibratedKernelsPriceTheirTasksInTheGraphsStorage) {
  const KernelFigure fp32{5000, 500e9}, bf16{7000, 250e9};
  const ClusterSpec c = calibrated_cluster({{DType::kFp32, {{MemoryKernel::kRouteFwd, fp32}}},
                                            {DType::kBf16, {{MemoryKernel::kRouteFwd, bf16}}}});
  const Task route = elementwise_task("L0.fwd.route", "route", Pass::kForward);  // 2,000 bytes
  // launch + bytes / bandwidth: 5000 + 2000 / 500 = 5004 ns in fp32, 7000 + 2000 / 250 = 7008 in bf16.
  EXPECT_EQ(ComputeCostModel(c, 4).isolated_duration(route), 5004);
  EXPECT_EQ(ComputeCostModel(c, 2).isolated_duration(route), 7008);
  // Without the graph's storage, or for a kernel not timed, the HBM model: 3000 + 2000 / 4000.
  EXPECT_EQ(ComputeCostModel(c, 0).isolated_duration(route), 3001);
  EXPECT_EQ(ComputeCostModel(c, 4).isolated_duration(elementwise_task("L0.fwd.encode", "encode", Pass::kForward)), 3001);
  // fp16 tensors use bf16's figures where fp16 has none; a calibration of fp16 alone serves too.
  EXPECT_EQ(calibrated_kernel(c.node.gpu, MemoryKernel::kRouteFwd, 2)->launch_ns, 7000);
  const ClusterSpec f16 = calibrated_cluster({{DType::kFp16, {{MemoryKernel::kRouteFwd, bf16}}}});
  EXPECT_TRUE(calibrated_kernel(f16.node.gpu, MemoryKernel::kRouteFwd, 2).has_value());
  EXPECT_FALSE(calibrated_kernel(f16.node.gpu, MemoryKernel::kRouteFwd, 4).has_value());
}

}  // namespace
}  // namespace moesim
