#include "sim/cost/compute_cost.h"

#include <gtest/gtest.h>

#include "sim/core/error.h"

namespace moesim {
namespace {

// HBM 1e12 B/s at 0.5 efficiency = 500 B/ns; launch 1000 ns; fp32 1e13, bf16 1e14 FLOP/s;
// default GEMM curve (peak_fraction 0.8, half_saturation_dim 48).
// PCIe d2h 2.5e10 x 0.8 = 2e10 B/s, 2000 ns latency; h2d 2e10 x 1.0, 1000 ns latency.
ClusterSpec test_cluster() {
  ClusterSpec c;
  c.name = "test";
  c.node.name = "test-node";
  c.node.gpus_per_node = 8;
  c.node.gpu.name = "TestGPU";
  c.node.gpu.peak_flops = {{DType::kFp32, 1e13}, {DType::kBf16, 1e14}};
  c.node.gpu.hbm_bandwidth = 1e12;
  c.node.gpu.hbm_efficiency = 0.5;
  c.node.gpu.kernel_launch_ns = 1000;
  c.node.pcie_d2h = {2.5e10, 0.8, 2000};
  c.node.pcie_h2d = {2e10, 1.0, 1000};
  return c;
}

Task task_with(Work w) {
  Task t;
  t.id = "t";
  t.work = w;
  return t;
}

TEST(ComputeCost, GemmEfficiencyCurve) {
  const ClusterSpec c = test_cluster();
  const ComputeCostModel m(c);
  // 0.8 * (48/96)^3 = 0.1; 0.8 * (432/480)^3 = 0.5832.
  EXPECT_DOUBLE_EQ(m.gemm_efficiency(48, 48, 48), 0.1);
  EXPECT_DOUBLE_EQ(m.gemm_efficiency(432, 432, 432), 0.5832);
}

TEST(ComputeCost, ComputeBoundGemm) {
  const ClusterSpec c = test_cluster();
  const ComputeCostModel m(c);
  // 432^3 bf16: 2 * 432^3 = 161243136 FLOP / (1e14 * 0.5832) = 2764.8 ns;
  // bytes 3 * 432^2 * 2 = 1119744 / 500 B/ns = 2239.488 ns -> compute-bound.
  // 1000 + 2764.8 = 3764.8 -> 3765 ns.
  const GemmWork w{1, 432, 432, 432, DType::kBf16, 2};
  EXPECT_EQ(m.gemm_duration(w), 3765);
  EXPECT_EQ(m.isolated_duration(task_with(w)), 3765);
}

TEST(ComputeCost, MemoryBoundGemm) {
  const ClusterSpec c = test_cluster();
  const ComputeCostModel m(c);
  // 1000 x 48^3 bf16: 2 * 1000 * 110592 = 221184000 FLOP / (1e14 * 0.1) = 22118.4 ns;
  // bytes 1000 * 3 * 2304 * 2 = 13824000 / 500 B/ns = 27648 ns -> memory-bound.
  // 1000 + 27648 = 28648 ns.
  const GemmWork w{1000, 48, 48, 48, DType::kBf16, 2};
  EXPECT_EQ(m.gemm_duration(w), 28648);
}

TEST(ComputeCost, TinyWorkTakesAtLeastOneNs) {
  ClusterSpec c = test_cluster();
  c.node.gpu.kernel_launch_ns = 0;
  const ComputeCostModel m(c);
  // 100 B / 500 B/ns = 0.2 ns rounds to 0, raised to 1 ns.
  EXPECT_EQ(m.elementwise_duration(ElementwiseWork{100, 0, 0}), 1);
  // A zero-work kernel pays no launch here (launch 0): 0 ns.
  EXPECT_EQ(m.elementwise_duration(ElementwiseWork{0, 0, 0}), 0);
  EXPECT_EQ(m.copy_duration(CopyWork{1, CopyDirection::kDeviceToDevice}), 1);
}

TEST(ComputeCost, MissingGemmDtypeIsInputError) {
  const ClusterSpec c = test_cluster();
  const ComputeCostModel m(c);
  try {
    m.gemm_duration(GemmWork{1, 64, 64, 64, DType::kFp16, 2});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.rule(), "GPU TestGPU has no fp16 peak; supported: fp32, bf16");
  }
}

TEST(ComputeCost, Elementwise) {
  const ClusterSpec c = test_cluster();
  const ComputeCostModel m(c);
  // 1e6 FLOP / 1e13 = 100 ns; (1e6 + 1e6) B / 500 B/ns = 4000 ns -> 1000 + 4000 = 5000.
  EXPECT_EQ(m.elementwise_duration(ElementwiseWork{1000000, 1000000, 1000000}), 5000);
  // Compute-bound: 1e9 FLOP / 1e13 = 100000 ns -> 101000.
  EXPECT_EQ(m.elementwise_duration(ElementwiseWork{1000, 1000, 1000000000}), 101000);
}

TEST(ComputeCost, Copies) {
  const ClusterSpec c = test_cluster();
  const ComputeCostModel m(c);
  // d2h: 2000 + 1e6 B / 20 B/ns = 52000 (no launch overhead: copy engine).
  EXPECT_EQ(m.copy_duration(CopyWork{1000000, CopyDirection::kDeviceToHost}), 52000);
  // h2d: 1000 + 1e6 B / 20 B/ns = 51000.
  EXPECT_EQ(m.copy_duration(CopyWork{1000000, CopyDirection::kHostToDevice}), 51000);
  // d2d: launch 1000 + 2e6 B / 500 B/ns = 5000.
  EXPECT_EQ(m.isolated_duration(task_with(CopyWork{1000000, CopyDirection::kDeviceToDevice})), 5000);
}

TEST(ComputeCost, HostWorkTakesItsDuration) {
  const ClusterSpec c = test_cluster();
  const ComputeCostModel m(c);
  EXPECT_EQ(m.isolated_duration(task_with(HostWork{1234})), 1234);
  EXPECT_THROW(m.isolated_duration(task_with(HostWork{-1})), InputError);
}

TEST(ComputeCost, MissingPcieOrHbmIsInputError) {
  ClusterSpec c = test_cluster();
  c.node.pcie_h2d.bandwidth = 0;
  const ComputeCostModel m(c);
  EXPECT_THROW(m.copy_duration(CopyWork{10, CopyDirection::kHostToDevice}), InputError);
  c.node.gpu.hbm_bandwidth = 0;
  EXPECT_THROW(ComputeCostModel{c}, InputError);
}

TEST(ComputeCost, CollectiveIsNotAComputeTask) {
  const ClusterSpec c = test_cluster();
  const ComputeCostModel m(c);
  EXPECT_THROW(m.isolated_duration(task_with(CollectiveWork{})), InternalError);
}

}  // namespace
}  // namespace moesim
