// The calibration micro-benchmarks on a modelled device: a HostDevice that runs every fp32
// operation for real on the CPU (so bad arguments fail; the host emulation stores fp32 only)
// while a clock per stream advances by a known cost model. Calibration must recover that model's parameters, and its file must load back into the
// simulator and reproduce the model's GEMM times.
#include "runtime/bench/calibrate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "runtime/exec/host_device.h"
#include "sim/core/error.h"
#include "sim/cost/compute_cost.h"
#include "sim/spec/loader.h"

namespace moesim::runtime {
namespace {

// The modelled costs.
constexpr double kLaunchNs = 2500;
constexpr double kHbmBytesPerNs = 2000;  // 2 TB/s
constexpr double kH2dBytesPerNs = 25, kH2dLatencyNs = 8000;
constexpr double kD2hBytesPerNs = 20, kD2hLatencyNs = 9000;

// Slow on purpose, so that the tiny test shapes take far longer than the launch gap.
double flops_per_ns(GemmMath math, Storage type) {
  if (math == GemmMath::kF32) return 15;
  if (math == GemmMath::kTf32) return 60;
  return type == Storage::kBf16 ? 240 : 250;
}

// Interference between two streams: the speed of an op of the row's class while the column's
// runs (computation, memcpy), as in a node's table. Device-to-device copies and zero-fills meet
// nothing (the calibration runs them alone).
enum Kind { kCompute = 0, kPcie = 1, kNone = 2 };
constexpr double kFactor[2][2] = {{1.0, 0.9},   // computation with computation, with memcpy
                                  {0.8, 0.7}};  // memcpy with computation, with memcpy

double gemm_ns(const GemmArgs& g) {
  return kLaunchNs + 2.0 * static_cast<double>(g.m * g.n * g.k * g.batch) / flops_per_ns(g.math, g.ab_type);
}

class ModelledDevice final : public DeviceOps {
 public:
  std::string name() const override { return "modelled test device"; }
  int create_stream() override {
    const double now = clock_.empty() ? 0 : *std::max_element(clock_.begin(), clock_.end());
    clock_.push_back(now);
    busy_from_.push_back(now);
    kind_.push_back(kNone);
    return host_.create_stream();
  }
  int create_event(bool timing) override {
    stamp_.push_back(-1);
    return host_.create_event(timing);
  }
  void record(int event, int stream) override {
    host_.record(event, stream);
    stamp_.at(static_cast<std::size_t>(event)) = clock_.at(static_cast<std::size_t>(stream));
  }
  void wait(int stream, int event) override { host_.wait(stream, event); }
  // The device drains: every stream is idle from the latest clock on.
  void synchronize() override {
    host_.synchronize();
    ++synchronizes_;
    const double now = *std::max_element(clock_.begin(), clock_.end());
    std::fill(clock_.begin(), clock_.end(), now);
    std::fill(busy_from_.begin(), busy_from_.end(), now);
  }
  float elapsed_ms(int from, int to) override {
    return static_cast<float>((stamp_.at(static_cast<std::size_t>(to)) - stamp_.at(static_cast<std::size_t>(from))) / 1e6);
  }
  void* alloc_device(std::int64_t bytes, const char* what) override { return host_.alloc_device(bytes, what); }
  void* alloc_pinned(std::int64_t bytes, const char* what) override {
    void* p = host_.alloc_pinned(bytes, what);
    pinned_.insert(p);
    return p;
  }
  void free_device(void* p) override { host_.free_device(p); }
  void free_pinned(void* p) override {
    pinned_.erase(p);
    host_.free_pinned(p);
  }
  std::int64_t library_workspace_bytes() const override { return 0; }
  void copy(void* dst, const void* src, std::int64_t bytes, int stream) override {
    host_.copy(dst, src, bytes, stream);
    const bool from_host = pinned_.count(const_cast<void*>(src)) > 0;
    const bool to_host = pinned_.count(dst) > 0;
    const double b = static_cast<double>(bytes);
    advance(stream, from_host ? kH2dLatencyNs + b / kH2dBytesPerNs
                    : to_host ? kD2hLatencyNs + b / kD2hBytesPerNs
                              : 2 * b / kHbmBytesPerNs,
            from_host || to_host ? kPcie : kNone);
  }
  void copy_2d(void*, std::int64_t, const void*, std::int64_t, std::int64_t, std::int64_t, int) override {
    FAIL() << "calibration does not use strided copies";
  }
  void zero(void* dst, std::int64_t bytes, int stream) override {
    host_.zero(dst, bytes, stream);
    advance(stream, static_cast<double>(bytes) / kHbmBytesPerNs, kNone);
  }
  void download(void* host_dst, const void* src, std::int64_t bytes) override { host_.download(host_dst, src, bytes); }
  void gemm(const GemmArgs& args, int stream) override {
    if (args.ab_type == Storage::kF32) host_.gemm(args, stream);
    ++gemms_;
    advance(stream, gemm_ns(args), kCompute);
  }
  void fill(const FillArgs& args, int stream) override {
    if (args.type == Storage::kF32) host_.fill(args, stream);
    advance(stream, kLaunchNs + static_cast<double>(args.count * storage_bytes(args.type)) / kHbmBytesPerNs, kCompute);
  }
  // The MoE kernels are not calibrated (their cost is the elementwise roofline).
  void add(const AddArgs&, int) override { unused(); }
  void route(const RouteArgs&, int) override { unused(); }
  std::int64_t assign_scratch_bytes(std::int64_t, int, int) override {
    unused();
    return 0;
  }
  void assign(const AssignArgs&, int) override { unused(); }
  void encode(const EncodeArgs&, int) override { unused(); }
  void activation(const ActivationArgs&, int) override { unused(); }
  void activation_backward(const ActivationBackwardArgs&, int) override { unused(); }
  void decode(const DecodeArgs&, int) override { unused(); }
  void decode_backward(const DecodeBackwardArgs&, int) override { unused(); }
  void encode_backward(const EncodeBackwardArgs&, int) override { unused(); }
  void route_backward(const RouteBackwardArgs&, int) override { unused(); }

  std::int64_t gemms() const { return gemms_; }
  std::int64_t synchronizes() const { return synchronizes_; }

 private:
  // Runs `work` ns of isolated work of `kind` on `stream` from its clock on. While another stream
  // is busy with its back-to-back run (issued earlier), the op progresses at kFactor; the other
  // stream is not slowed in turn (the calibration times only the later-issued stream).
  void advance(int stream, double work, Kind kind) {
    const auto s = static_cast<std::size_t>(stream);
    if (clock_[s] == busy_from_[s] || kind_[s] != kind) busy_from_[s] = clock_[s];
    kind_[s] = kind;
    double factor = 1.0;
    double overlap = 0.0;  // how long the other stream stays busy from this op's start
    for (std::size_t t = 0; t < clock_.size(); ++t) {
      if (t == s || kind == kNone || kind_[t] == kNone) continue;
      if (busy_from_[t] <= clock_[s] && clock_[s] < clock_[t]) {
        factor = kFactor[kind][kind_[t]];
        overlap = clock_[t] - clock_[s];
      }
    }
    clock_[s] += work / factor <= overlap ? work / factor : overlap + (work - overlap * factor);
  }
  static void unused() { ADD_FAILURE() << "calibration issued an MoE kernel"; }

  HostDevice host_;
  std::vector<double> clock_;
  std::vector<double> busy_from_;  // start of the stream's current back-to-back run
  std::vector<Kind> kind_;         // the kind of its latest op
  std::vector<double> stamp_;
  std::set<void*> pinned_;
  std::int64_t gemms_ = 0;
  std::int64_t synchronizes_ = 0;
};

CalibrationOptions small_options() {
  CalibrationOptions o;
  o.dims = {8, 16, 48};
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
  EXPECT_NE(progress.back().find("fp16 GEMMs"), std::string::npos) << progress.back();
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
  // The measured interference cells replace the node's; the others keep its values (defaults).
  const auto& f = cluster.node.interference.factors;
  EXPECT_NEAR(f[1][2], 0.9, 1e-4);  // computation with memcpy
  EXPECT_NEAR(f[2][1], 0.8, 1e-4);  // memcpy with computation
  EXPECT_NEAR(f[2][2], 0.7, 1e-4);  // memcpy with memcpy
  EXPECT_EQ(f[0][1], InterferenceTable{}.factors[0][1]);  // communication with computation: not measured
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
  EXPECT_EQ(dev.synchronizes(), 0);
}

}  // namespace
}  // namespace moesim::runtime
