// Batched GEMM tables (BatchedGemmTable): a GEMM with batch > 1 reads the rate at (batch, m, n, k),
// interpolated in log space over all four axes; exact at measured points; outside the range the
// single table's convention per axis (raised to the smallest point, the edge's rate above it,
// warned about); a calibration without a batched table prices as before.
#include <gtest/gtest.h>

#include <cmath>

#include "sim/cost/compute_cost.h"
#include "sim/cost/gemm_calibration.h"
#include "sim/graph/task_graph.h"

namespace moesim {
namespace {

GemmWork bf16(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k) {
  return GemmWork{batch, m, n, k, DType::kBf16, 2};
}

// batch in {2, 8}, m in {64, 256}, n = k = 128. Rates 2 b m n k / t in FLOP/ns:
//   (2, 64): 1000, (2, 256): 2000, (8, 64): 1500, (8, 256): 6000.
BatchedGemmTable batched_table() {
  BatchedGemmTable t;
  t.batch = {2, 8};
  t.m = {64, 256};
  t.n = {128};
  t.k = {128};
  for (auto [b, m, rate] : {std::tuple{2.0, 64.0, 1000.0}, {2.0, 256.0, 2000.0}, {8.0, 64.0, 1500.0}, {8.0, 256.0, 6000.0}})
    t.time_ns.push_back(2.0 * b * m * 128 * 128 / rate);
  return t;
}

double flops(const GemmWork& w) { return 2.0 * static_cast<double>(w.batch * w.m * w.n * w.k); }

TEST(BatchedGemmCalibration, ExactAtMeasuredPoints) {
  const BatchedGemmTable t = batched_table();
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t i = 0; i < 2; ++i)
      EXPECT_NEAR(calibrated_gemm_ns(t, bf16(t.batch[b], t.m[i], 128, 128)), t.time_ns[t.index(b, i, 0, 0)], 1e-9);
}

TEST(BatchedGemmCalibration, RateIsMultilinearInLogBatchAndLogDimensions) {
  const BatchedGemmTable t = batched_table();
  // batch 4 is halfway between 2 and 8 in log batch, m 128 halfway between 64 and 256: log r is
  // the mean of the four corners' log rates, r = (1000 * 2000 * 1500 * 6000)^(1/4).
  const double r = std::pow(1000.0 * 2000 * 1500 * 6000, 0.25);
  EXPECT_NEAR(calibrated_gemm_ns(t, bf16(4, 128, 128, 128)), flops(bf16(4, 128, 128, 128)) / r, 1e-6);
  // Along batch alone at m = 64: r = sqrt(1000 * 1500).
  EXPECT_NEAR(calibrated_gemm_ns(t, bf16(4, 64, 128, 128)), flops(bf16(4, 64, 128, 128)) / std::sqrt(1.5e6), 1e-6);
  EXPECT_TRUE(in_measured_range(t, bf16(4, 128, 128, 128)));
}

TEST(BatchedGemmCalibration, OutsideTheRangeFollowsTheSingleTableConvention) {
  const BatchedGemmTable t = batched_table();
  // Above: batch 32 keeps the batch-8 rate (1500 at m = 64), no extrapolated trend.
  EXPECT_NEAR(calibrated_gemm_ns(t, bf16(32, 64, 128, 128)), flops(bf16(32, 64, 128, 128)) / 1500, 1e-6);
  EXPECT_FALSE(in_measured_range(t, bf16(32, 64, 128, 128)));
  // Below: m = 16 costs what m = 64 does; n = 7 what n = 128 does.
  EXPECT_NEAR(calibrated_gemm_ns(t, bf16(2, 16, 128, 128)), t.time_ns[t.index(0, 0, 0, 0)], 1e-9);
  EXPECT_NEAR(calibrated_gemm_ns(t, bf16(2, 64, 7, 128)), t.time_ns[t.index(0, 0, 0, 0)], 1e-9);
  EXPECT_FALSE(in_measured_range(t, bf16(2, 16, 128, 128)));
  EXPECT_DOUBLE_EQ(calibrated_gemm_ns(t, bf16(2, 64, 128, 0)), 0);
}

ClusterSpec cluster_with(const GpuCalibration& cal) {
  ClusterSpec c;
  GpuSpec& g = c.node.gpu;
  g.name = "G";
  g.peak_flops = {{DType::kBf16, 400e12}};
  g.hbm_bandwidth = 2e12;
  g.sm_count = 100;
  g.kernel_launch_ns = 3000;
  g.calibration = cal;
  return c;
}

GemmTimeTable single_table() {
  GemmTimeTable t;
  t.m = {64, 16384};
  t.n = {128};
  t.k = {128};
  t.time_ns = {4000, 8000};
  return t;
}

// The cost model reads the batched table for batch > 1, the single table for batch 1, and the
// single table with the batch as rows where the calibration has no batched table (as before).
TEST(BatchedGemmCalibration, CostModelPicksTheTableByBatch) {
  const ClusterSpec batched = cluster_with(GpuCalibration{"cal.yaml", "dev", {{DType::kBf16, single_table()}},
                                                          {{GemmLayout::kNN, {{DType::kBf16, batched_table()}}}}, {}});
  const ClusterSpec single = cluster_with(GpuCalibration{"cal.yaml", "dev", {{DType::kBf16, single_table()}}, {}, {}});
  const ComputeCostModel with(batched), without(single);
  const BatchedGemmTable t = batched_table();
  EXPECT_EQ(with.gemm_duration(bf16(8, 256, 128, 128)), std::llround(t.time_ns[t.index(1, 1, 0, 0)]));
  EXPECT_EQ(with.gemm_duration(bf16(1, 64, 128, 128)), 4000);
  EXPECT_EQ(without.gemm_duration(bf16(8, 256, 128, 128)),
            std::llround(calibrated_gemm_ns(single_table(), bf16(8, 256, 128, 128))));
  EXPECT_EQ(batched_table_for(batched.node.gpu, bf16(1, 64, 128, 128)), nullptr);
  EXPECT_NE(batched_table_for(batched.node.gpu, bf16(2, 64, 128, 128)), nullptr);
  EXPECT_EQ(batched_table_for(batched.node.gpu, GemmWork{2, 64, 128, 128, DType::kFp32, 4}), nullptr);
}

TEST(BatchedGemmCalibration, RangeWarningsNameTheBatchedTable) {
  GpuSpec gpu = cluster_with(GpuCalibration{"cal.yaml", "dev", {{DType::kBf16, single_table()}},
                                            {{GemmLayout::kNN, {{DType::kBf16, batched_table()}}}}, {}})
                    .node.gpu;
  TaskGraph g(1, {0});
  Task in;
  in.id = "L0.fwd.fc1.c0";
  in.work = bf16(4, 128, 128, 128);
  g.add_task(in);
  Task out = in;
  out.id = "L0.fwd.fc2.c0";
  out.work = bf16(64, 64, 128, 128);
  g.add_task(out);
  const std::vector<std::string> w = calibration_range_warnings(g, gpu);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("1 bf16 batched nn GEMM task(s)"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("cal.yaml (batched_gemm.bf16: batch 2..8, m 64..256, n 128..128, k 128..128)"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("L0.fwd.fc2.c0 (batch = 64, m = 64, n = 128, k = 128)"), std::string::npos) << w[0];
}

// The tables are measured with beta = 0: an accumulating GEMM adds C's read at the GPU's streaming
// bandwidth (2e12 B/s x the default 0.85 = 1,700 B/ns here): batch 8 x 256 x 128 bf16 = 524,288 B,
// 308.4 ns.
TEST(BatchedGemmCalibration, AnAccumulatingGemmAddsTheReadOfC) {
  const ClusterSpec cluster = cluster_with(GpuCalibration{"cal.yaml", "dev", {{DType::kBf16, single_table()}},
                                                          {{GemmLayout::kNN, {{DType::kBf16, batched_table()}}}}, {}});
  const ComputeCostModel cost(cluster);
  const BatchedGemmTable t = batched_table();
  GemmWork w = bf16(8, 256, 128, 128);
  w.accumulate = true;
  EXPECT_EQ(cost.gemm_duration(w), std::llround(t.time_ns[t.index(1, 1, 0, 0)] + 524288 / 1700.0));
  GemmWork single = bf16(1, 64, 128, 128);  // the single-GEMM table: 4000 ns + 64 x 128 x 2 B / 1700 B/ns
  single.accumulate = true;
  EXPECT_EQ(cost.gemm_duration(single), 4010);
}

// A GEMM reads its own layout's table; where the calibration has none for it (files measured before
// layouts), the nn table, as every layout was priced then.
TEST(BatchedGemmCalibration, EachLayoutReadsItsOwnTable) {
  BatchedGemmTable slow = batched_table();
  for (double& t : slow.time_ns) t *= 2;
  const ClusterSpec cluster = cluster_with(GpuCalibration{
      "cal.yaml", "dev", {{DType::kBf16, single_table()}},
      {{GemmLayout::kNN, {{DType::kBf16, batched_table()}}}, {GemmLayout::kTN, {{DType::kBf16, slow}}}}, {}});
  const ComputeCostModel cost(cluster);
  const BatchedGemmTable t = batched_table();
  GemmWork w = bf16(8, 256, 128, 128);
  EXPECT_EQ(cost.gemm_duration(w), std::llround(t.time_ns[t.index(1, 1, 0, 0)]));
  w.layout = GemmLayout::kTN;
  EXPECT_EQ(cost.gemm_duration(w), std::llround(2 * t.time_ns[t.index(1, 1, 0, 0)]));
  w.layout = GemmLayout::kNT;  // no nt table: the nn one
  EXPECT_EQ(cost.gemm_duration(w), std::llround(t.time_ns[t.index(1, 1, 0, 0)]));
  // Range warnings name the table that priced the GEMM.
  TaskGraph g(1, {0});
  Task task;
  task.id = "L0.bwd.fc1.wgrad.c0";
  task.work = GemmWork{64, 64, 128, 128, DType::kBf16, 2, GemmLayout::kTN};
  g.add_task(task);
  const std::vector<std::string> warn = calibration_range_warnings(g, cluster.node.gpu);
  ASSERT_EQ(warn.size(), 1u);
  EXPECT_NE(warn[0].find("1 bf16 batched tn GEMM task(s)"), std::string::npos) << warn[0];
  EXPECT_NE(warn[0].find("(batched_gemm_tn.bf16: batch 2..8"), std::string::npos) << warn[0];
}

}  // namespace
}  // namespace moesim
