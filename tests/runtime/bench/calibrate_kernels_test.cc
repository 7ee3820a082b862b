// The new measurements of `moesim calibrate` on a modelled device (modelled_device.h): batched GEMM
// tables and the memory-bound kernels' figures recover the device's own cost model, survive the
// file, and price the simulator's tasks as the device ran them. The fit itself: exact on a line,
// through 0 where no fixed cost shows, refused where no bandwidth does.
#include "runtime/bench/calibrate_kernels.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "modelled_device.h"
#include "sim/core/error.h"
#include "sim/cost/compute_cost.h"
#include "sim/build/memory_kernel_traffic.h"
#include "sim/cost/memory_kernels.h"
#include "sim/spec/loader.h"

namespace moesim::runtime {
namespace {

using namespace modelled;

TEST(KernelFit, RecoversALine) {
  // 2 us + bytes / (500 bytes/ns).
  const LaunchBandwidthFit f = fit_launch_and_bandwidth({1e4, 1e5, 1e6}, {2020, 2200, 4000});
  EXPECT_NEAR(f.launch_ns, 2000, 1e-6);
  EXPECT_NEAR(f.bytes_per_ns, 500, 1e-9);
}

TEST(KernelFit, ResidualsAreRelative) {
  // Off the line by +10% at the small size and -10% at the large one: relative weights put the
  // intercept where both sizes count alike; plain least squares would follow the large size.
  const LaunchBandwidthFit f = fit_launch_and_bandwidth({1e3, 1e6, 1e6}, {1100, 1800, 2200});
  // Two distinct sizes: the line through (1e3, 1100) and the weighted middle of the two large ones.
  const double w1 = 1 / (1800.0 * 1800), w2 = 1 / (2200.0 * 2200);
  const double mid = (w1 * 1800 + w2 * 2200) / (w1 + w2);
  const double slope = (mid - 1100) / (1e6 - 1e3);
  EXPECT_NEAR(f.bytes_per_ns, 1 / slope, 1e-6);
  EXPECT_NEAR(f.launch_ns, 1100 - slope * 1e3, 1e-6);
}

TEST(KernelFit, NoFixedCostFitsThroughZero) {
  // A negative intercept is no fixed cost: refitted through 0 (time proportional to bytes).
  const LaunchBandwidthFit f = fit_launch_and_bandwidth({1e3, 2e3}, {900, 2000});
  EXPECT_EQ(f.launch_ns, 0);
  // Through 0 in relative error: slope = sum(x / t) / sum(x^2 / t^2).
  const double slope = (1e3 / 900 + 2e3 / 2000) / (1e6 / 810000 + 4e6 / 4e6);
  EXPECT_NEAR(f.bytes_per_ns, 1 / slope, 1e-9);
  EXPECT_NEAR(fit_launch_and_bandwidth({1e3}, {500}).bytes_per_ns, 2, 1e-12);  // one size: through 0
}

TEST(KernelFit, UnusableTimingsAreInternalErrors) {
  EXPECT_THROW(fit_launch_and_bandwidth({}, {}), InternalError);
  EXPECT_THROW(fit_launch_and_bandwidth({1e3, 1e3}, {100, 120}), InternalError);  // sizes that do not differ
  EXPECT_THROW(fit_launch_and_bandwidth({1e3, 1e6}, {900, 800}), InternalError);  // time falls as bytes grow
  EXPECT_THROW(fit_launch_and_bandwidth({1e3, 1e6}, {0, 800}), InternalError);
}

CalibrationOptions kernel_options(std::vector<DType> dtypes) {
  CalibrationOptions o;
  o.dtypes = std::move(dtypes);
  o.dims = {8, 16};
  o.batches = {2, 4};
  o.batched_dims = {8, 16};
  // 4 experts, top-2: 8, 32, 128 rows per expert; wide enough rows that the bytes, not the
  // event timer's float milliseconds, set the fitted bandwidths.
  o.kernel_tokens = {16, 64, 256};
  o.kernel_experts = 4;
  o.kernel_top_k = 2;
  o.kernel_d_model = 32;
  o.kernel_hidden = 64;
  o.loopback_ranks = {};  // calibrate_device_copies_test.cc
  o.copy_bytes = 1 << 20;
  o.min_time_ms = 0.05;
  return o;
}

// The modelled bandwidth of each kernel against the graph's bytes (bytes/ns): the modelled kernels
// move the graph's bytes, but for encode (2 R M against B M + R M: x (1 + k) / 2k) and the route
// in a 2-byte storage (its fp32 scores against the graph's 2-byte elements: x 1/2).
double graph_bandwidth(MemoryKernel k, int element_bytes) {
  switch (k) {
    case MemoryKernel::kRouteFwd: return kKernelBytesPerNs[kRoute] * element_bytes / 4.0;
    case MemoryKernel::kRouteBwd: return kKernelBytesPerNs[kRouteBwd];
    case MemoryKernel::kEncodeFwd: return kKernelBytesPerNs[kEncode] * 3.0 / 4.0;
    case MemoryKernel::kEncodeBwd: return kKernelBytesPerNs[kEncodeBwd];
    case MemoryKernel::kActFwd: return kKernelBytesPerNs[kAct];
    case MemoryKernel::kActBwd: return kKernelBytesPerNs[kActBwd];
    case MemoryKernel::kDecodeFwd: return kKernelBytesPerNs[kDecode];
    case MemoryKernel::kDecodeBwd: return kKernelBytesPerNs[kDecodeBwd];
  }
  return 0;
}

TEST(CalibrateKernels, RecoversTheDevicesKernelsAndBatchedGemms) {
  ModelledDevice dev;
  const CalibrationMeasurement m = calibrate(dev, kernel_options({DType::kTf32, DType::kBf16}));
  ASSERT_EQ(m.kernels.size(), 2u);  // fp32 storage (for tf32) and bf16
  for (const auto& [storage, figures] : m.kernels) {
    const int eb = storage == DType::kFp32 ? 4 : 2;
    ASSERT_EQ(figures.size(), kMemoryKernels.size());
    for (const auto& [k, f] : figures) {
      // The forward route is two launches (route, then the capacity assignment), the others one;
      // each kernel adds its fixed cost.
      const double launch = (k == MemoryKernel::kRouteFwd ? 2 : 1) * kLaunchNs + kKernelFixedNs;
      EXPECT_NEAR(static_cast<double>(f.launch_ns), launch, 1) << to_string(k) << " " << to_string(storage);
      EXPECT_NEAR(f.bandwidth, graph_bandwidth(k, eb) * 1e9, graph_bandwidth(k, eb) * 1e9 * 1e-4)
          << to_string(k) << " " << to_string(storage);
    }
  }
  // One table per layout (nn, nt, tn) and dtype; each holds its own layout's times.
  ASSERT_EQ(m.batched_gemm.size(), 3u);
  EXPECT_EQ(batched_table_count(m), 6u);
  for (const auto& [layout, tables] : m.batched_gemm) {
    ASSERT_EQ(tables.size(), 2u) << to_string(layout);
    const BatchedGemmTable& t = tables.at(DType::kBf16);
    ASSERT_EQ(t.time_ns.size(), 16u);
    for (std::size_t b = 0; b < 2; ++b)
      for (std::size_t i = 0; i < 2; ++i)
        for (std::size_t j = 0; j < 2; ++j)
          for (std::size_t l = 0; l < 2; ++l) {
            GemmArgs g;
            g.batch = t.batch[b], g.m = t.m[i], g.n = t.n[j], g.k = t.k[l];
            g.trans_a = layout == GemmLayout::kTN, g.trans_b = layout == GemmLayout::kNT;
            g.ab_type = Storage::kBf16, g.math = GemmMath::kHalf;
            EXPECT_NEAR(t.time_ns[t.index(b, i, j, l)], gemm_ns(g), gemm_ns(g) * 1e-6) << to_string(layout);
          }
  }
}

// Written, loaded back and applied: the simulator prices the graph's tasks as the device ran them.
TEST(CalibrateKernels, FileLoadsBackAndPricesTheTasks) {
  ModelledDevice dev;
  const CalibrationOptions o = kernel_options({DType::kTf32, DType::kBf16});
  const CalibrationMeasurement m = calibrate(dev, o);
  const std::string yaml = calibration_yaml(m, "H100-SXM5-80GB", "moesim calibrate (test)");
  EXPECT_NE(yaml.find("schema_version: 2\n"), std::string::npos);
  EXPECT_NE(yaml.find("# batch=4 m=16 n=8\n"), std::string::npos) << yaml;
  const std::filesystem::path p =
      std::filesystem::temp_directory_path() / ("moesim_calk_" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(p) << yaml;
  const ClusterSpec cluster = load_hardware_spec(std::string(MOESIM_SOURCE_DIR) + "/hardware/nodes/hgx-h100.yaml", p.string());
  const CalibrationSpec read = load_calibration(p.string());
  std::filesystem::remove(p);
  // The same numbers, to the file's precision (0.1 ns for GEMMs, 1 ns and 1 MB/s for kernels).
  EXPECT_NE(yaml.find("\nbatched_gemm_tn:"), std::string::npos) << yaml;
  for (GemmLayout layout : {GemmLayout::kNN, GemmLayout::kNT, GemmLayout::kTN}) {
    const BatchedGemmTable& t = m.batched_gemm.at(layout).at(DType::kBf16);
    const BatchedGemmTable& back = read.batched_gemm.at(layout).at(DType::kBf16);
    ASSERT_EQ(back.time_ns.size(), t.time_ns.size());
    for (std::size_t i = 0; i < t.time_ns.size(); ++i) EXPECT_NEAR(back.time_ns[i], t.time_ns[i], 0.05);
  }
  for (const auto& [storage, figures] : m.kernels)
    for (const auto& [k, f] : figures) {
      EXPECT_EQ(read.kernels.at(storage).at(k).launch_ns, f.launch_ns);
      EXPECT_NEAR(read.kernels.at(storage).at(k).bandwidth, f.bandwidth, 0.5e6);
    }
  // A batched expert GEMM and the activation, each priced as the device ran it.
  const ComputeCostModel bf16(cluster, 2), fp32(cluster, 4);
  GemmArgs g;
  g.batch = 4, g.m = 16, g.n = 8, g.k = 16, g.ab_type = Storage::kBf16, g.math = GemmMath::kHalf;
  EXPECT_NEAR(static_cast<double>(bf16.gemm_duration(GemmWork{4, 16, 8, 16, DType::kBf16, 2})), gemm_ns(g), 0.6);
  // A weight gradient's tn GEMM is priced from the tn table, as the device ran it transposed.
  g.trans_a = true;
  EXPECT_NEAR(static_cast<double>(bf16.gemm_duration(GemmWork{4, 16, 8, 16, DType::kBf16, 2, GemmLayout::kTN})),
              gemm_ns(g), 0.6);
  g.trans_a = false;
  const KernelShape shape{64, 4, 2, 32, 64, 64, 128};
  for (const auto& [eb, cost] : {std::pair<int, const ComputeCostModel*>{2, &bf16}, {4, &fp32}}) {
    Task act;
    act.id = "L0.fwd.act.c0";
    act.stage = "act";
    act.work = memory_kernel_traffic(MemoryKernel::kActFwd, shape, eb);
    const auto& w = std::get<ElementwiseWork>(act.work);
    EXPECT_NEAR(static_cast<double>(cost->isolated_duration(act)),
                kernel_ns(kAct, static_cast<double>(w.bytes_read + w.bytes_written)), 1.5);
  }
}

}  // namespace
}  // namespace moesim::runtime
