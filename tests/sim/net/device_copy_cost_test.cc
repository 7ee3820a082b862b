// Device-copy collectives priced from a calibration's measured figures (sim/net/device_copy_cost.h):
// a one-rank all-to-all, a loopback node's all-to-all and ring all-reduce, interpolation between
// measured rank counts and the edge held outside them; without figures, the HBM model.
#include "sim/net/device_copy_cost.h"

#include <gtest/gtest.h>

#include "sim/net/alpha_beta.h"
#include "../task_builders.h"

namespace moesim {
namespace {

// HBM 1e12 B/s (1000 B/ns) at efficiency 1, launch 1000 ns: the uncalibrated device-copy model.
GpuSpec test_gpu() {
  GpuSpec gpu;
  gpu.name = "TestGPU";
  gpu.peak_flops = {{DType::kFp32, 1e12}};
  gpu.hbm_bandwidth = 1e12;
  gpu.hbm_efficiency = 1.0;
  gpu.hbm_capacity_bytes = 1LL << 30;
  gpu.kernel_launch_ns = 1000;
  gpu.sm_count = 108;
  return gpu;
}

// Measured: p = 1 launch 4000 ns at 2000 B/ns, p = 2 8000 ns at 2000 B/ns, p = 4 20000 ns at
// 1000 B/ns.
GpuCalibration test_calibration() {
  GpuCalibration cal;
  cal.file = "test-calibration.yaml";
  cal.device_copies.by_ranks = {{1, {4000, 2e12}}, {2, {8000, 2e12}}, {4, {20000, 1e12}}};
  return cal;
}

ClusterSpec one_gpu(bool calibrated) {
  ClusterSpec c;
  c.name = "one";
  c.node.name = "one";
  c.node.gpu = test_gpu();
  if (calibrated) c.node.gpu.calibration = test_calibration();
  return c;
}

ClusterSpec loopback(int ranks, bool calibrated) { return loopback_cluster(one_gpu(calibrated), ranks); }

std::vector<int> group(int p) {
  std::vector<int> g;
  for (int r = 0; r < p; ++r) g.push_back(r);
  return g;
}

TimeNs all_to_all(const ClusterSpec& c, int p, std::int64_t bytes_per_peer) {
  const TaskGraph g(c.num_gpus(), group(c.num_gpus()));
  const AlphaBetaNetwork net(g, c);
  return net.isolated_duration(CollectiveWork{CollectiveOp::kAllToAll, 0, bytes_per_peer}, group(p));
}

TEST(DeviceCopyCost, FigureForMeasuredInterpolatedAndHeldRankCounts) {
  const GpuSpec gpu = [] {
    GpuSpec g = test_gpu();
    g.calibration = test_calibration();
    return g;
  }();
  EXPECT_FALSE(device_copy_figure(test_gpu(), 1).has_value());  // no calibration: none
  EXPECT_EQ(device_copy_figure(gpu, 2)->launch_ns, 8000);
  // p = 3, halfway between 2 and 4: launch (8000 + 20000) / 2, time per byte (1/2000 + 1/1000) / 2.
  const KernelFigure three = *device_copy_figure(gpu, 3);
  EXPECT_EQ(three.launch_ns, 14000);
  EXPECT_DOUBLE_EQ(three.bandwidth, 1e9 / (0.5 / 2000 + 0.5 / 1000));
  // Outside 1..4: the edge's figures.
  EXPECT_EQ(device_copy_figure(gpu, 8)->launch_ns, 20000);
  EXPECT_DOUBLE_EQ(device_copy_figure(gpu, 8)->bandwidth, 1e12);
}

// Eight loopback ranks against figures measured at 1 to 4: the summary's warning names them.
TEST(DeviceCopyCost, CollectivesOutsideTheMeasuredRanksAreNamed) {
  TaskGraph g(8, group(8));
  const GroupId all = g.add_group(group(8));
  g.add_task(testing::all_to_all_task("L0.fwd.dispatch.c0", all, 1000, StreamClass::kCommDispatch));
  g.add_task(testing::all_to_all_task("L0.fwd.combine.c0", all, 1000, StreamClass::kCommCombine));
  const std::vector<std::string> w = device_copy_range_warnings(g, loopback(8, true));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0], "2 device-copy collective(s) of 8 ranks fall outside the rank counts measured in "
                  "test-calibration.yaml (1 to 4), e.g. L0.fwd.dispatch.c0; they take the 4-rank launch and bandwidth "
                  "(no extrapolated trend)");
  EXPECT_TRUE(device_copy_range_warnings(g, loopback(8, false)).empty());  // no figures, nothing held
}

// One rank, 1e6 B: measured 4000 + 2e6 / 2000 = 5000 ns; the HBM model 1000 + 2e6 / 1000 = 3000.
TEST(DeviceCopyCost, OneRanksAllToAllIsTheMeasuredCopy) {
  EXPECT_EQ(all_to_all(one_gpu(true), 1, 1000000), 5000);
  EXPECT_EQ(all_to_all(one_gpu(false), 1, 1000000), 3000);
  EXPECT_EQ(all_to_all(loopback(1, true), 1, 1000000), 5000);
}

// Four loopback ranks, 1e6 B per peer, 16e6 B in all: measured 20000 + 2 * 16e6 / 1000 = 52000;
// the HBM model 4 * 1000 + 32000 = 36000. Three ranks (9e6 B): 14000 + 2 * 9e6 * (0.5 / 2000 +
// 0.5 / 1000) = 14000 + 13500 = 27500. Eight (64e6 B), held at four's figures: 20000 + 128000.
TEST(DeviceCopyCost, LoopbackAllToAllUsesTheFiguresOfItsRankCount) {
  EXPECT_EQ(all_to_all(loopback(4, true), 4, 1000000), 52000);
  EXPECT_EQ(all_to_all(loopback(4, false), 4, 1000000), 36000);
  EXPECT_EQ(all_to_all(loopback(3, true), 3, 1000000), 27500);
  EXPECT_EQ(all_to_all(loopback(8, true), 8, 1000000), 148000);
}

// Ring all-reduce of 1e6 B per peer over four loopback ranks: 6 steps, each 1/4 of the measured
// fixed cost, 6 * 4e6 B read and written at 1000 B/ns: 6 * 5000 + 48000 = 78000 (HBM model:
// 6 * 1000 + 48000 = 54000).
TEST(DeviceCopyCost, LoopbackRingTakesAQuarterOfTheFixedCostPerStep) {
  for (const bool calibrated : {true, false}) {
    const ClusterSpec c = loopback(4, calibrated);
    const TaskGraph g(4, group(4));
    const AlphaBetaNetwork net(g, c);
    EXPECT_EQ(net.isolated_duration(CollectiveWork{CollectiveOp::kAllReduce, 0, 1000000}, group(4)),
              calibrated ? 78000 : 54000);
  }
}

// Between GPUs the collective is NCCL's, whatever the calibration's device copies.
TEST(DeviceCopyCost, CollectivesBetweenGpusIgnoreTheFigures) {
  ClusterSpec two = one_gpu(true);
  two.node.gpus_per_node = 2;
  two.node.intra_node = {1e11, 1.0, 5000};
  ClusterSpec plain = two;
  plain.node.gpu.calibration.reset();
  EXPECT_EQ(all_to_all(two, 2, 1000000), all_to_all(plain, 2, 1000000));
}

}  // namespace
}  // namespace moesim
