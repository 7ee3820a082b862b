// The calibration micro-benchmarks on a modelled device (modelled_device.h). Calibration must
// recover the model's parameters, and its file must load back into the simulator and reproduce
// the model's GEMM times.
#include "runtime/bench/calibrate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "modelled_device.h"
#include "sim/core/error.h"
#include "sim/cost/compute_cost.h"
#include "sim/spec/loader.h"

namespace moesim::runtime {
namespace {

using namespace modelled;

CalibrationOptions small_options() {
  CalibrationOptions o;
  o.dims = {8, 16, 48};
  o.batches = {2, 4};
  o.batched_dims = {8, 16};
  // 4 experts, top-2: 16 tokens give 32 rows, 8 per expert.
  o.kernel_tokens = {16, 32, 64};
  o.kernel_experts = 4;
  o.kernel_top_k = 2;
  o.kernel_d_model = 8;
  o.kernel_hidden = 16;
  o.loopback_ranks = {1, 2};
  o.loopback_bytes = {1024, 16384};
  o.copy_bytes = 1 << 20;
  o.min_time_ms = 0.05;
  return o;
}

TEST(Calibrate, RecoversTheDevicesCostModel) {
  ModelledDevice dev;
  std::vector<std::string> progress;
  CalibrationOptions o = small_options();
  o.progress = [&](const std::string& s) { progress.push_back(s); };
  const CalibrationMeasurement m = calibrate(dev, o);
  EXPECT_EQ(m.device, "modelled test device");
  // A one-element fill: the launch gap plus 4 bytes of traffic (0.002 ns).
  EXPECT_EQ(m.kernel_launch_ns, 2500);
  EXPECT_NEAR(m.hbm_bandwidth, kHbmBytesPerNs * 1e9, 1e-6 * kHbmBytesPerNs * 1e9);
  // Latency = a 64-byte copy (plus 64 B / bandwidth, under 4 ns); bandwidth within 64 B / 1 MiB.
  EXPECT_NEAR(static_cast<double>(m.pcie_h2d.latency_ns), kH2dLatencyNs, 4);
  EXPECT_NEAR(static_cast<double>(m.pcie_d2h.latency_ns), kD2hLatencyNs, 4);
  EXPECT_NEAR(m.pcie_h2d.bandwidth, kH2dBytesPerNs * 1e9, 1e-4 * kH2dBytesPerNs * 1e9);
  EXPECT_NEAR(m.pcie_d2h.bandwidth, kD2hBytesPerNs * 1e9, 1e-4 * kD2hBytesPerNs * 1e9);
  ASSERT_EQ(m.gemm.size(), 4u);
  for (const auto& [dtype, t] : m.gemm) {
    ASSERT_EQ(t.time_ns.size(), 27u);
    for (std::size_t i = 0; i < 3; ++i)
      for (std::size_t j = 0; j < 3; ++j)
        for (std::size_t l = 0; l < 3; ++l) {
          GemmArgs g;
          g.m = t.m[i];
          g.n = t.n[j];
          g.k = t.k[l];
          // Written out rather than taken from the code under test: tf32 is fp32 storage with
          // TF32 math, bf16 and fp16 are half storage with tensor-core math.
          switch (dtype) {
            case DType::kFp32: g.ab_type = Storage::kF32, g.math = GemmMath::kF32; break;
            case DType::kTf32: g.ab_type = Storage::kF32, g.math = GemmMath::kTf32; break;
            case DType::kBf16: g.ab_type = Storage::kBf16, g.math = GemmMath::kHalf; break;
            case DType::kFp16: g.ab_type = Storage::kF16, g.math = GemmMath::kHalf; break;
            case DType::kFp8: FAIL() << "the calibration measured fp8, which the runtime cannot run"; break;
          }
          const double expected = gemm_ns(g);
          EXPECT_NEAR(t.time_ns[t.index(i, j, l)], expected, expected * 1e-6) << to_string(dtype) << " " << g.m << "x" << g.n << "x" << g.k;
        }
  }
  EXPECT_GE(dev.gemms(), 4 * 27 * (o.warmup + 1 + o.min_reps));
  // The interference cells one GPU shows, recovered from the model's factors (to the event
  // timer's float precision).
  ASSERT_EQ(m.interference.size(), 3u);
  const auto cell = [&](InterferenceClass op, InterferenceClass col) {
    for (const InterferenceCell& c : m.interference)
      if (c.op == op && c.column == static_cast<int>(col)) return c.factor;
    return -1.0;
  };
  EXPECT_NEAR(cell(InterferenceClass::kComputation, InterferenceClass::kMemcpy), kFactor[kCompute][kPcie], 1e-6);
  EXPECT_NEAR(cell(InterferenceClass::kMemcpy, InterferenceClass::kComputation), kFactor[kPcie][kCompute], 1e-6);
  EXPECT_NEAR(cell(InterferenceClass::kMemcpy, InterferenceClass::kMemcpy), kFactor[kPcie][kPcie], 1e-6);
  ASSERT_FALSE(progress.empty());
  EXPECT_TRUE(std::any_of(progress.begin(), progress.end(),
                          [](const std::string& p) { return p.find("fp16 tn batched GEMMs") != std::string::npos; }));
  EXPECT_NE(progress.back().find("memory-bound kernels in fp16"), std::string::npos) << progress.back();
}

TEST(Calibrate, FileLoadsBackAndReproducesTheMeasuredGemms) {
  ModelledDevice dev;
  CalibrationOptions o = small_options();
  o.dtypes = {DType::kBf16, DType::kTf32};
  const CalibrationMeasurement m = calibrate(dev, o);
  const std::string yaml = calibration_yaml(m, "H100-SXM5-80GB", "moesim calibrate (test), 2026-11-23");
  EXPECT_NE(yaml.find("# Calibration of H100-SXM5-80GB, measured on modelled test device."), std::string::npos);
  const std::filesystem::path p = std::filesystem::temp_directory_path() / ("moesim_cal_" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(p) << yaml;
  const std::string root = MOESIM_SOURCE_DIR;
  const ClusterSpec cluster = load_hardware_spec(root + "/hardware/nodes/hgx-h100.yaml", p.string());
  std::filesystem::remove(p);
  ASSERT_TRUE(cluster.node.gpu.calibration.has_value());
  EXPECT_EQ(cluster.node.gpu.calibration->device, "modelled test device");
  EXPECT_EQ(cluster.node.gpu.kernel_launch_ns, 2500);
  EXPECT_NEAR(cluster.node.pcie_h2d.effective_bandwidth(), 25e9, 25e9 * 1e-4);
  // The measured interference cells replace the node's; the others keep the node file's values
  // (hgx-h100.yaml's measured communication cells, not the A100 defaults).
  const auto& f = cluster.node.interference.factors;
  EXPECT_NEAR(f[1][2], 0.9, 1e-4);  // computation with memcpy
  EXPECT_NEAR(f[2][1], 0.8, 1e-4);  // memcpy with computation
  EXPECT_NEAR(f[2][2], 0.7, 1e-4);  // memcpy with memcpy
  const ClusterSpec node = load_hardware_spec(root + "/hardware/nodes/hgx-h100.yaml");
  EXPECT_DOUBLE_EQ(f[0][1], 0.690);  // communication with computation: not measured, the node's
  EXPECT_DOUBLE_EQ(f[1][0], 0.538);  // computation with communication: not measured, the node's
  EXPECT_EQ(f[0][1], node.node.interference.factors[0][1]);
  EXPECT_NE(yaml.find("interference:  # measured cells"), std::string::npos) << yaml;
  const ComputeCostModel cost(cluster);
  for (std::int64_t mm : o.dims) {
    for (std::int64_t n : o.dims) {
      GemmArgs g;
      g.m = mm;
      g.n = n;
      g.k = 16;
      g.ab_type = Storage::kBf16;
      g.math = GemmMath::kHalf;
      // The file keeps 0.1 ns; the simulator rounds to 1 ns.
      EXPECT_NEAR(static_cast<double>(cost.gemm_duration(GemmWork{1, mm, n, 16, DType::kBf16, 2})), gemm_ns(g), 0.6);
    }
  }
  // Between measured shapes the time lies between its neighbours'.
  const TimeNs mid = cost.gemm_duration(GemmWork{1, 32, 16, 16, DType::kBf16, 2});
  EXPECT_GT(mid, cost.gemm_duration(GemmWork{1, 16, 16, 16, DType::kBf16, 2}));
  EXPECT_LT(mid, cost.gemm_duration(GemmWork{1, 48, 16, 16, DType::kBf16, 2}));
}

TEST(Calibrate, BadOptionsAreInputErrorsBeforeAnyDeviceWork) {
  ModelledDevice dev;
  const auto error = [&](CalibrationOptions o) -> std::string {
    try {
      calibrate(dev, o);
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  };
  CalibrationOptions o = small_options();
  o.dims = {16, 8};
  EXPECT_NE(error(o).find("strictly increasing; 8 follows 16"), std::string::npos);
  o.dims = {};
  EXPECT_NE(error(o).find("dimension list is empty"), std::string::npos);
  o.dims = {0, 8};
  EXPECT_NE(error(o).find("must be positive"), std::string::npos);
  o = small_options();
  o.dtypes = {};
  EXPECT_NE(error(o).find("no dtype"), std::string::npos);
  o = small_options();
  o.copy_bytes = 100;
  EXPECT_NE(error(o).find("at least 1 KiB"), std::string::npos);
  o = small_options();
  o.max_reps = 0;
  EXPECT_NE(error(o).find("min_reps <= max_reps"), std::string::npos);
  o = small_options();
  o.batches = {1, 2};
  EXPECT_NE(error(o).find("GEMM batch 1 must be at least 2"), std::string::npos) << error(o);
  o.batches = {4, 2};
  EXPECT_NE(error(o).find("GEMM batches must be strictly increasing; 2 follows 4"), std::string::npos) << error(o);
  o = small_options();
  o.batched_dims = {};
  EXPECT_NE(error(o).find("batched GEMM dimension list is empty"), std::string::npos);
  o = small_options();
  o.kernel_tokens = {3};
  EXPECT_NE(error(o).find("kernel token count 3 x top_k 2 is not a multiple of the 4 experts"), std::string::npos)
      << error(o);
  o.kernel_tokens = {32, 16};
  EXPECT_NE(error(o).find("strictly increasing; 16 follows 32"), std::string::npos);
  o = small_options();
  o.kernel_top_k = 5;
  EXPECT_NE(error(o).find("1 <= top_k <= experts"), std::string::npos);
  EXPECT_EQ(dev.synchronizes(), 0);
}

}  // namespace
}  // namespace moesim::runtime
