// GEMM times from calibration tables: exact at measured points, log-log interpolation between
// them, the efficiency of the nearest edge outside (reported, never silent), batch folded into m.
#include "sim/cost/gemm_calibration.h"

#include <gtest/gtest.h>

#include <cmath>

#include "sim/cost/compute_cost.h"

namespace moesim {
namespace {

GemmWork bf16(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k) {
  return GemmWork{batch, m, n, k, DType::kBf16, 2};
}

// m in {100, 400}, n = k = 100: 1000 ns (2000 FLOP/ns) and 2000 ns (4000 FLOP/ns).
GemmTimeTable line_table() {
  GemmTimeTable t;
  t.m = {100, 400};
  t.n = {100};
  t.k = {100};
  t.time_ns = {1000, 2000};
  return t;
}

TEST(GemmCalibration, ExactAtMeasuredPoints) {
  const GemmTimeTable t = line_table();
  EXPECT_DOUBLE_EQ(calibrated_gemm_ns(t, bf16(1, 100, 100, 100)), 1000);
  EXPECT_DOUBLE_EQ(calibrated_gemm_ns(t, bf16(1, 400, 100, 100)), 2000);
}

TEST(GemmCalibration, RateIsLinearInLogDimension) {
  const GemmTimeTable t = line_table();
  // m = 200 is halfway between 100 and 400 in log m: log r = (log 2000 + log 4000) / 2, so
  // r = sqrt(8e6) FLOP/ns and t = 2 * 200 * 100 * 100 / r = 4e6 / 2828.427... = 1414.21 ns.
  EXPECT_NEAR(calibrated_gemm_ns(t, bf16(1, 200, 100, 100)), 4e6 / std::sqrt(8e6), 1e-9);
  EXPECT_NEAR(calibrated_gemm_ns(t, bf16(1, 200, 100, 100)), 1414.2136, 1e-3);
  EXPECT_TRUE(in_measured_range(t, bf16(1, 200, 100, 100)));
}

TEST(GemmCalibration, BatchCountsAsRows) {
  const GemmTimeTable t = line_table();
  EXPECT_DOUBLE_EQ(calibrated_gemm_ns(t, bf16(2, 100, 100, 100)), calibrated_gemm_ns(t, bf16(1, 200, 100, 100)));
  EXPECT_DOUBLE_EQ(calibrated_gemm_ns(t, bf16(4, 100, 100, 100)), 2000);
}

TEST(GemmCalibration, AboveTheRangeKeepsTheEdgeEfficiency) {
  const GemmTimeTable t = line_table();
  // m = 800 at the m = 400 rate (4000 FLOP/ns): 2 * 800 * 1e4 / 4000 = 4000 ns, not an
  // extrapolated rate.
  EXPECT_DOUBLE_EQ(calibrated_gemm_ns(t, bf16(1, 800, 100, 100)), 4000);
  EXPECT_FALSE(in_measured_range(t, bf16(1, 800, 100, 100)));
  EXPECT_FALSE(in_measured_range(t, bf16(1, 100, 200, 100)));
  EXPECT_DOUBLE_EQ(calibrated_gemm_ns(t, bf16(1, 100, 100, 0)), 0);
}

TEST(GemmCalibration, BelowTheRangeCostsTheSmallestMeasuredShape) {
  const GemmTimeTable t = line_table();
  // The smallest shapes are launch-bound: m = 50 or m = 1 costs what m = 100 does, and so does a
  // k or n below 100.
  EXPECT_DOUBLE_EQ(calibrated_gemm_ns(t, bf16(1, 50, 100, 100)), 1000);
  EXPECT_DOUBLE_EQ(calibrated_gemm_ns(t, bf16(1, 1, 100, 100)), 1000);
  EXPECT_DOUBLE_EQ(calibrated_gemm_ns(t, bf16(1, 100, 100, 7)), 1000);
  EXPECT_DOUBLE_EQ(calibrated_gemm_ns(t, bf16(1, 200, 3, 100)), calibrated_gemm_ns(t, bf16(1, 200, 100, 100)));
  EXPECT_FALSE(in_measured_range(t, bf16(1, 50, 100, 100)));
  EXPECT_FALSE(in_measured_range(t, bf16(1, 100, 100, 99)));
}

TEST(GemmCalibration, LongAxesInterpolateWithinTheirSegment) {
  GemmTimeTable t;
  t.m = {10, 100, 1000, 10000};
  t.n = {64};
  t.k = {64};
  // Rates 2 * m * 4096 / t: 1e3, 4e3, 16e3, 32e3 FLOP/ns.
  for (double rate : {1e3, 4e3, 16e3, 32e3}) t.time_ns.push_back(2.0 * 4096 * t.m[t.time_ns.size()] / rate);
  for (std::size_t i = 0; i < 4; ++i)
    EXPECT_NEAR(calibrated_gemm_ns(t, bf16(1, t.m[i], 64, 64)), t.time_ns[i], t.time_ns[i] * 1e-12);
  // m = 316 (10^2.5, nearly) sits halfway in log between 100 and 1000: rate sqrt(4e3 * 16e3) = 8e3.
  const double m = std::pow(10.0, 2.5);
  const auto mi = static_cast<std::int64_t>(std::llround(m));
  const double w = (std::log(static_cast<double>(mi)) - std::log(100.0)) / std::log(10.0);
  const double rate = std::exp((1 - w) * std::log(4e3) + w * std::log(16e3));
  EXPECT_NEAR(calibrated_gemm_ns(t, bf16(1, mi, 64, 64)), 2.0 * static_cast<double>(mi) * 4096 / rate, 1e-9);
  EXPECT_NEAR(rate, 8e3, 8e3 * 2e-3);
}

TEST(GemmCalibration, TrilinearInLogSpace) {
  GemmTimeTable t;
  t.m = {64, 256};
  t.n = {128, 1024};
  t.k = {32, 512};
  const double times[8] = {900, 1500, 2100, 7000, 2500, 9000, 11000, 60000};
  t.time_ns.assign(times, times + 8);
  // Every corner is exact (up to the exp(log) round trip).
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 2; ++j)
      for (std::size_t l = 0; l < 2; ++l) {
        const double measured = t.time_ns[t.index(i, j, l)];
        EXPECT_NEAR(calibrated_gemm_ns(t, bf16(1, t.m[i], t.n[j], t.k[l])), measured, measured * 1e-12);
      }
  // m = 128 and k = 128 are the log-centres of their axes (weights 1/2); n = 362 is near the
  // log-centre of 128..1024 (362.04) with its own weight.
  const std::int64_t m = 128, k = 128, n_int = 362;
  double log_r = 0;
  const double wn_hi = (std::log(static_cast<double>(n_int)) - std::log(128.0)) / (std::log(1024.0) - std::log(128.0));
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 2; ++j)
      for (std::size_t l = 0; l < 2; ++l) {
        const double w = 0.5 * (j ? wn_hi : 1 - wn_hi) * 0.5;
        const double flops = 2.0 * static_cast<double>(t.m[i] * t.n[j] * t.k[l]);
        log_r += w * std::log(flops / t.time_ns[t.index(i, j, l)]);
      }
  const double expected = 2.0 * static_cast<double>(m * n_int * k) / std::exp(log_r);
  EXPECT_NEAR(calibrated_gemm_ns(t, bf16(1, m, n_int, k)), expected, expected * 1e-12);
  // Times grow with every dimension here, so an interior point lies between the extremes.
  EXPECT_GT(expected, 900);
  EXPECT_LT(expected, 60000);
}

TEST(GemmCalibration, CostModelUsesTheTableOfTheGemmsDtypeOnly) {
  ClusterSpec c;
  c.node.gpu.name = "G";
  c.node.gpu.peak_flops = {{DType::kFp32, 1e13}, {DType::kBf16, 1e14}};
  c.node.gpu.hbm_bandwidth = 1e12;
  c.node.gpu.kernel_launch_ns = 1000;
  c.node.gpu.sm_count = 108;
  const ComputeCostModel uncalibrated(c);
  const TimeNs default_fp32 = uncalibrated.gemm_duration(GemmWork{1, 200, 100, 100, DType::kFp32, 4});
  c.node.gpu.calibration = GpuCalibration{"cal.yaml", "dev", {{DType::kBf16, line_table()}}, {}, {}};
  const ComputeCostModel m(c);
  // No launch overhead on top: the measured time holds it. 1414.21 rounds to 1414 ns.
  EXPECT_EQ(m.gemm_duration(bf16(1, 200, 100, 100)), 1414);
  EXPECT_EQ(m.gemm_duration(bf16(1, 400, 100, 100)), 2000);
  EXPECT_EQ(m.gemm_duration(GemmWork{1, 200, 100, 100, DType::kFp32, 4}), default_fp32);
  // The rate a planner's model takes: 2 * 400 * 100 * 100 = 8e6 FLOP in 2000 ns.
  EXPECT_DOUBLE_EQ(m.gemm_flop_rate(bf16(1, 400, 100, 100)), 4e12);
}

Task gemm_task(std::string id, GemmWork w) {
  Task t;
  t.id = std::move(id);
  t.rank = 0;
  t.work = w;
  return t;
}

TEST(GemmCalibration, RangeWarningsNameTheDtypeTheCountAndAnExample) {
  GpuSpec gpu;
  gpu.name = "G";
  TaskGraph g(1, {0});
  g.add_task(gemm_task("in", bf16(1, 200, 100, 100)));
  g.add_task(gemm_task("L0.fwd.fc1.c0", bf16(4, 400, 100, 100)));
  g.add_task(gemm_task("L0.fwd.fc2.c0", bf16(1, 100, 100, 300)));
  g.add_task(gemm_task("fp32", GemmWork{1, 9999, 100, 100, DType::kFp32, 4}));
  EXPECT_TRUE(calibration_range_warnings(g, gpu).empty());  // no calibration: nothing to say
  gpu.calibration = GpuCalibration{"cal.yaml", "dev", {{DType::kBf16, line_table()}}, {}, {}};
  const std::vector<std::string> w = calibration_range_warnings(g, gpu);
  ASSERT_EQ(w.size(), 1u) << "fp32 has no table: the default curve is not a range";
  EXPECT_NE(w[0].find("2 bf16 GEMM task(s)"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("below the range they cost as the smallest measured shape"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("cal.yaml (gemm.bf16: m 100..400, n 100..100, k 100..100)"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("L0.fwd.fc1.c0 (batch*m = 1600, n = 100, k = 100)"), std::string::npos) << w[0];
}

}  // namespace
}  // namespace moesim
