// The device-copy collectives of `moesim calibrate` on a modelled device (modelled_device.h): the
// loopback transport's all-to-all fitted per rank count recovers the device's copy model, the
// probe beside a GEMM recovers its factor, the file carries both to the simulator, which prices a
// loopback all-to-all as the device ran it; bad options are refused before any device work.
#include "runtime/bench/calibrate_device_copies.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "modelled_device.h"
#include "sim/core/error.h"
#include "sim/net/alpha_beta.h"
#include "sim/spec/loader.h"

namespace moesim::runtime {
namespace {

using namespace modelled;

// A device copy costs 3 us + 2 x bytes / HBM, and runs at 0.25 of its speed beside a GEMM.
constexpr DeviceCopyModel kCopies{3000, 0.25};

CalibrationOptions copy_options() {
  CalibrationOptions o;
  o.dtypes = {DType::kFp32};
  o.dims = {8, 16};
  o.batches = {};
  o.kernel_tokens = {};
  o.loopback_ranks = {1, 2, 4};
  o.loopback_bytes = {16384, 262144, 1048576};
  o.copy_bytes = 1 << 20;
  o.min_time_ms = 0.05;
  return o;
}

// On the modelled device the receivers' streams copy in parallel, each at the full HBM rate, and
// rank 0's stream (the timer's) makes p copies of b bytes: p x (3000 + 2 b / HBM) per all-to-all,
// b = the exchange's size / p^2.
// Against the 2 p^2 b bytes the simulator counts: launch p x 3000, bandwidth p x HBM.
TEST(CalibrateDeviceCopies, RecoversTheDevicesCopiesPerRankCount) {
  ModelledDevice dev;
  dev.set_device_copy_model(kCopies);
  const CalibrationOptions o = copy_options();
  const auto gemm = [&](int stream) {
    GemmArgs g;  // bf16: the modelled device times it without running it, so it needs no operands
    g.m = g.n = g.k = 64;
    g.ab_type = g.c_type = Storage::kBf16;
    g.math = GemmMath::kHalf;
    dev.gemm(g, stream);
  };
  const DeviceCopyFigures f = measure_device_copies(dev, o, gemm);
  ASSERT_EQ(f.by_ranks.size(), 3u);
  for (const int p : {1, 2, 4}) {
    EXPECT_NEAR(static_cast<double>(f.by_ranks.at(p).launch_ns), p * kCopies.launch_ns, 1) << p;
    EXPECT_NEAR(f.by_ranks.at(p).bandwidth, p * kHbmBytesPerNs * 1e9, p * kHbmBytesPerNs * 1e9 * 1e-5) << p;
  }
  // The probe: the smallest rank count at the largest size, beside the GEMMs.
  ASSERT_TRUE(f.with_computation.has_value());
  EXPECT_NEAR(f.with_computation->factor, kCopies.with_computation, 1e-5);
  EXPECT_EQ(f.with_computation->ranks, 1);
  EXPECT_EQ(f.with_computation->bytes_per_peer, 1048576);
}

// Through calibrate() and the file: the figures load back onto the GPU, and the simulator prices a
// two-rank loopback all-to-all of 16 KiB per peer as the device ran it: 2 x (3000 + 2 x 16384 /
// 2000) = 6032.8 ns.
TEST(CalibrateDeviceCopies, FileLoadsBackAndPricesTheLoopbackAllToAll) {
  ModelledDevice dev;
  dev.set_device_copy_model(kCopies);
  const CalibrationMeasurement m = calibrate(dev, copy_options());
  const std::string yaml = calibration_yaml(m, "H100-SXM5-80GB", "moesim calibrate (test)");
  EXPECT_NE(yaml.find("device_copy_collectives:"), std::string::npos) << yaml;
  // 2 x 3 us; the bandwidth to the event timer's float precision (checked below).
  EXPECT_NE(yaml.find("    - {ranks: 2, launch: 6.000 us, bandwidth: "), std::string::npos) << yaml;
  EXPECT_NE(yaml.find(", ranks: 1, bytes_per_peer: 1048576}"), std::string::npos) << yaml;
  const std::filesystem::path p =
      std::filesystem::temp_directory_path() / ("moesim_caldc_" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(p) << yaml;
  const ClusterSpec node = load_hardware_spec(std::string(MOESIM_SOURCE_DIR) + "/hardware/nodes/hgx-h100.yaml", p.string());
  std::filesystem::remove(p);
  const GpuCalibration& cal = *node.node.gpu.calibration;
  ASSERT_EQ(cal.device_copies.by_ranks.size(), 3u);
  EXPECT_EQ(cal.device_copies.by_ranks.at(4).launch_ns, 12000);
  EXPECT_NEAR(cal.device_copies.by_ranks.at(4).bandwidth, 4 * kHbmBytesPerNs * 1e9, 4 * kHbmBytesPerNs * 1e9 * 1e-5);
  EXPECT_NEAR(cal.device_copies.with_computation->factor, kCopies.with_computation, 1e-5);

  const ClusterSpec two = loopback_cluster(node, 2);
  const TaskGraph g(2, {0, 1});
  const AlphaBetaNetwork net(g, two);
  EXPECT_EQ(net.isolated_duration(CollectiveWork{CollectiveOp::kAllToAll, 0, 16384}, {0, 1}),
            std::llround(2 * (3000 + 2 * 16384.0 / kHbmBytesPerNs)));
}

// Copies whose time does not grow with their bytes (the host issuing them bounds them) leave no
// bandwidth to fit: an InputError that names the sizes and what to change, not an internal error.
TEST(CalibrateDeviceCopies, HostBoundCopiesAskForLargerSizes) {
  ModelledDevice dev;
  dev.set_device_copy_model(DeviceCopyModel{3000, 1.0, true});
  try {
    calibrate(dev, copy_options());
    FAIL() << "no error";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("the loopback all-to-all of 1 rank(s) took 3 us, 3 us, 3 us at --loopback-bytes 16384 to "
                       "1048576: its time does not grow with its bytes"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("give larger --loopback-bytes"), std::string::npos) << msg;
  }
}

TEST(CalibrateDeviceCopies, BadOptionsAreInputErrorsBeforeAnyDeviceWork) {
  const auto error = [](const std::function<void(CalibrationOptions&)>& change) -> std::string {
    CalibrationOptions o = copy_options();
    change(o);
    ModelledDevice dev;
    try {
      calibrate(dev, o);
    } catch (const InputError& e) {
      EXPECT_EQ(dev.gemms(), 0);
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(error([](CalibrationOptions& o) { o.loopback_ranks = {2, 1}; })
                .find("loopback rank counts must be strictly increasing; 1 follows 2"),
            std::string::npos);
  EXPECT_NE(error([](CalibrationOptions& o) { o.loopback_ranks = {0, 1}; }).find("loopback rank count 0 must be positive"),
            std::string::npos);
  EXPECT_NE(error([](CalibrationOptions& o) { o.loopback_ranks = {65}; }).find("65 is above 64"), std::string::npos);
  EXPECT_NE(error([](CalibrationOptions& o) { o.loopback_bytes = {4096}; }).find("at least two sizes"),
            std::string::npos);
  EXPECT_NE(error([](CalibrationOptions& o) { o.loopback_bytes = {4096, 1024}; })
                .find("loopback all-to-all sizes must be strictly increasing"),
            std::string::npos);
  // An exchange of 16 GiB: 2 x 16 GiB = 32 GiB of buffers.
  EXPECT_NE(error([](CalibrationOptions& o) {
              o.loopback_ranks = {64};
              o.loopback_bytes = {1 << 20, std::int64_t{16} << 30};
            }).find("needs 32768 MiB of buffers, above 16 GiB"),
            std::string::npos);
  // Sizes are the exchange's: 64 ranks split 4,000 bytes into 4,096 empty blocks, and 8,192 and
  // 10,000 bytes into blocks of 2 bytes each.
  EXPECT_NE(error([](CalibrationOptions& o) {
              o.loopback_ranks = {64};
              o.loopback_bytes = {4000, 8192};
            }).find("size 4000 gives 64 ranks blocks of 0 bytes"),
            std::string::npos);
  EXPECT_NE(error([](CalibrationOptions& o) {
              o.loopback_ranks = {64};
              o.loopback_bytes = {8192, 10000};
            }).find("size 10000 gives 64 ranks blocks of 2 bytes, no larger than the size before it"),
            std::string::npos);
  // Not measured: no sizes are needed.
  EXPECT_EQ(error([](CalibrationOptions& o) {
              o.loopback_ranks = {};
              o.loopback_bytes = {};
            }),
            "no error");
}

}  // namespace
}  // namespace moesim::runtime
