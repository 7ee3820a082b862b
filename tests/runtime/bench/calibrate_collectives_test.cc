// The all-to-all micro-benchmark (runtime/bench/calibrate_collectives.h): on modelled devices whose
// transport takes latency + (ranks - 1) x bytes / bandwidth per collective, the measured points
// are that line and the network fit recovers it; on the host emulation with the loopback
// transport the collectives run for real (race-checked) and every size gets a time.
#include "runtime/bench/calibrate_collectives.h"
#include "sim/driver/least_squares.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "modelled_device.h"
#include "runtime/comm/loopback.h"
#include "runtime/exec/host_device.h"
#include "sim/core/error.h"

namespace moesim::runtime {
namespace {

using modelled::ModelledDevice;

constexpr double kLatencyNs = 20000, kBytesPerNs = 300;  // 20 us, 300 GB/s per GPU

// Each member's stream is busy for latency + (ranks - 1) x block / bandwidth per collective.
class ModelledTransport final : public Transport {
 public:
  explicit ModelledTransport(int ranks) : ranks_(ranks) {}
  std::string name() const override { return "modelled"; }
  int group_size() const override { return ranks_; }
  void all_to_all(const std::vector<AllToAllMember>& members, int) override {
    ++collectives_;
    for (const AllToAllMember& m : members)
      dynamic_cast<ModelledDevice&>(*m.device)
          .communicate(m.stream, kLatencyNs + (ranks_ - 1) * static_cast<double>(m.send_layout.block_bytes()) / kBytesPerNs);
  }
  void all_to_allv(const std::vector<AllToAllvMember>&, int) override { ADD_FAILURE() << "not an all-to-allv"; }
  int collectives() const { return collectives_; }

 private:
  int ranks_;
  int collectives_ = 0;
};

AllToAllCalibrationOptions small_options() {
  AllToAllCalibrationOptions o;
  o.bytes_per_peer = {256, 4096, 65536, 1 << 20};
  o.min_time_ms = 0.5;
  return o;
}

TEST(CalibrateCollectives, MeasuresTheTransportsLineAndTheFitRecoversIt) {
  const int n = 4;
  std::vector<std::unique_ptr<ModelledDevice>> devices;
  std::vector<ExecutorRank> ranks;
  for (int r = 0; r < n; ++r) {
    devices.push_back(std::make_unique<ModelledDevice>());
    ranks.push_back(ExecutorRank{n - 1 - r, devices.back().get()});  // any order
  }
  ModelledTransport transport(n);
  std::vector<std::string> progress;
  AllToAllCalibrationOptions o = small_options();
  o.progress = [&](const std::string& s) { progress.push_back(s); };
  const std::vector<AllToAllPoint> points = measure_all_to_all(transport, ranks, o);
  ASSERT_EQ(points.size(), 4u);
  for (const AllToAllPoint& p : points) {
    const double want = kLatencyNs + (n - 1) * static_cast<double>(p.bytes_per_peer) / kBytesPerNs;
    EXPECT_NEAR(p.time_ns, want, 1e-6 * want) << p.bytes_per_peer;
  }
  EXPECT_EQ(progress.size(), 4u);
  // Repetitions: at least min_reps, and enough for min_time_ms on the small sizes.
  EXPECT_GE(transport.collectives(), 4 * (2 + 1 + 3));
  const AllToAllLine line = fit_all_to_all(points, n);
  EXPECT_NEAR(line.latency_ns, kLatencyNs, 1e-3 * kLatencyNs);
  EXPECT_NEAR(line.bandwidth, kBytesPerNs * 1e9, 1e-6 * kBytesPerNs * 1e9);
}

TEST(CalibrateCollectives, RunsRealAllToAllsOnTheHostEmulation) {
  HostDevice device;
  const int n = 3;
  LoopbackTransport transport(device, n);
  std::vector<ExecutorRank> ranks;
  for (int r = 0; r < n; ++r) ranks.push_back(ExecutorRank{r, &device});
  AllToAllCalibrationOptions o = small_options();
  o.bytes_per_peer = {64, 4096};
  o.min_reps = 1;
  o.max_reps = 2;
  const std::vector<AllToAllPoint> points = measure_all_to_all(transport, ranks, o);
  // Every access of the exchanges was checked against the streams' order by the race detector;
  // the host's times mean nothing for a GPU, but every size has one.
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].bytes_per_peer, 64);
  EXPECT_EQ(points[1].bytes_per_peer, 4096);
  for (const AllToAllPoint& p : points) EXPECT_GE(p.time_ns, 0.0);
}

TEST(CalibrateCollectives, RefusesWhatItCannotMeasureBeforeTouchingADevice) {
  ModelledDevice a, b;
  ModelledTransport two(2), three(3);
  const std::vector<ExecutorRank> ranks = {{0, &a}, {1, &b}};
  const auto error = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error([&] { measure_all_to_all(two, {{0, &a}}, small_options()); }).find("at least 2 ranks"),
            std::string::npos);
  EXPECT_NE(error([&] { measure_all_to_all(three, ranks, small_options()); }).find("the group has 3 ranks, 2 are local"),
            std::string::npos);
  AllToAllCalibrationOptions o = small_options();
  o.bytes_per_peer = {4096, 256};
  EXPECT_NE(error([&] { measure_all_to_all(two, ranks, o); }).find("positive and ascending"), std::string::npos);
  EXPECT_NE(error([&] { measure_all_to_all(two, {{0, &a}, {0, &b}}, small_options()); }).find("each once"),
            std::string::npos);
  EXPECT_EQ(two.collectives(), 0);
}

}  // namespace
}  // namespace moesim::runtime
