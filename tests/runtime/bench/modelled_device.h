// A modelled device for the calibration tests: a HostDevice that runs every fp32 operation for
// real on the CPU (so bad arguments fail; the host emulation stores fp32 only) while a clock per
// stream advances by a known cost model, which the calibrations must recover.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "runtime/exec/host_device.h"

namespace moesim::runtime::modelled {

// The modelled costs.
constexpr double kLaunchNs = 2500;
constexpr double kHbmBytesPerNs = 2000;  // 2 TB/s
constexpr double kH2dBytesPerNs = 25, kH2dLatencyNs = 8000;
constexpr double kD2hBytesPerNs = 20, kD2hLatencyNs = 9000;

// Slow on purpose, so that the tiny test shapes take far longer than the launch gap.
inline double flops_per_ns(GemmMath math, Storage type) {
  if (math == GemmMath::kF32) return 15;
  if (math == GemmMath::kTf32) return 60;
  return type == Storage::kBf16 ? 240 : 250;
}

// Interference between two streams: the speed of an op of the row's class while the column's
// runs (computation, memcpy), as in a node's table. Zero-fills meet nothing, device-to-device
// copies only what DeviceCopyModel says.
enum Kind { kCompute = 0, kPcie = 1, kNone = 2, kDeviceCopy = 3 };
constexpr double kFactor[2][2] = {{1.0, 0.9},   // computation with computation, with memcpy
                                  {0.8, 0.7}};  // memcpy with computation, with memcpy

// Device-to-device copies: a fixed cost each (0 unless a test sets one) and, while a computation
// runs on another stream, a speed factor of their own (1 unless set); they meet nothing else.
struct DeviceCopyModel {
  double launch_ns = 0;
  double with_computation = 1.0;
  // Every copy takes launch_ns whatever its bytes, as the host thread issuing small copies bounds
  // them on a GPU.
  bool host_bound = false;
};

// A batched launch runs its GEMMs at a rate that falls with the batch (the expert GEMMs' measured
// behaviour: many small GEMMs do not fill the GPU as one GEMM of their rows does), so a batched
// table differs from the single table read at batch x m.
inline double batch_efficiency(std::int64_t batch) { return batch <= 1 ? 1.0 : 1.0 / (1.0 + 0.1 * std::log2(static_cast<double>(batch))); }

// A transposed operand slows the modelled device (a weight gradient's A^T most), so that each
// layout's table differs and a test can tell which one priced a GEMM.
inline double layout_efficiency(const GemmArgs& g) { return g.trans_a ? 0.6 : g.trans_b ? 0.8 : 1.0; }

inline double gemm_ns(const GemmArgs& g) {
  return kLaunchNs + 2.0 * static_cast<double>(g.m * g.n * g.k * g.batch) /
                         (flops_per_ns(g.math, g.ab_type) * batch_efficiency(g.batch) * layout_efficiency(g));
}

// The MoE kernels: each a launch, a fixed cost of its own and its bytes as the simulator's task
// graph counts them (written out here, not taken from the code under test) over a bandwidth of its
// own; the capacity assignment that follows the forward route costs its launch only. The route
// kernels' scores are fp32 whatever the storage, so the modelled route reads and writes 4-byte
// elements; the others the storage's.
constexpr double kKernelFixedNs = 1500;
enum ModelledKernel { kRoute, kEncode, kAct, kDecode, kDecodeBwd, kActBwd, kEncodeBwd, kRouteBwd };
constexpr double kKernelBytesPerNs[] = {100, 900, 1200, 700, 600, 1100, 800, 150};
inline double kernel_ns(ModelledKernel k, double bytes) { return kLaunchNs + kKernelFixedNs + bytes / kKernelBytesPerNs[k]; }

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
                              : device_copy_.launch_ns + (device_copy_.host_bound ? 0 : 2 * b / kHbmBytesPerNs),
            from_host || to_host ? kPcie : kDeviceCopy);
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
  // The MoE kernels run on the host where their storage is fp32 (routing always is) and cost
  // kernel_ns. B tokens, E experts, top-k, rows R = B k, width M or H, e bytes per element.
  void add(const AddArgs&, int) override { ADD_FAILURE() << "calibration issued an add"; }
  void route(const RouteArgs& a, int stream) override {  // reads B E, writes B E + 2 B k
    host_.route(a, stream);
    advance(stream, kernel_ns(kRoute, 4.0 * static_cast<double>(2 * a.tokens * a.experts + 2 * a.tokens * a.top_k)), kCompute);
  }
  std::int64_t assign_scratch_bytes(std::int64_t tokens, int top_k, int experts) override {
    return host_.assign_scratch_bytes(tokens, top_k, experts);
  }
  void assign(const AssignArgs& a, int stream) override {
    host_.assign(a, stream);
    advance(stream, kLaunchNs, kCompute);
  }
  // Encode gathers R rows of M: it reads and writes R M, where the graph counts B M + R M read and
  // written (its effective bandwidth against the graph's bytes differs from this one).
  void encode(const EncodeArgs& a, int stream) override {
    if (a.type == Storage::kF32) host_.encode(a, stream);
    advance(stream, kernel_ns(kEncode, e(a.type) * static_cast<double>(2 * (a.row_end - a.row_begin) * a.d_model)), kCompute);
  }
  void activation(const ActivationArgs& a, int stream) override {  // gelu: reads R H, writes R H
    if (a.type == Storage::kF32) host_.activation(a, stream);
    advance(stream, kernel_ns(kAct, e(a.type) * static_cast<double>(2 * a.rows * a.width)), kCompute);
  }
  void activation_backward(const ActivationBackwardArgs& a, int stream) override {  // reads 2 R H, writes R H
    if (a.type == Storage::kF32) host_.activation_backward(a, stream);
    advance(stream, kernel_ns(kActBwd, e(a.type) * static_cast<double>(3 * a.rows * a.width)), kCompute);
  }
  void decode(const DecodeArgs& a, int stream) override {  // reads B k M + B k, writes B M
    if (a.type == Storage::kF32) host_.decode(a, stream);
    const std::int64_t bk = a.tokens * a.top_k;
    advance(stream, kernel_ns(kDecode, e(a.type) * static_cast<double>(bk * a.d_model + bk + a.tokens * a.d_model)), kCompute);
  }
  void decode_backward(const DecodeBackwardArgs& a, int stream) override {  // reads B M + B k M + B k, writes B k M + B k
    if (a.type == Storage::kF32) host_.decode_backward(a, stream);
    const std::int64_t bk = a.tokens * a.top_k;
    advance(stream, kernel_ns(kDecodeBwd, e(a.type) * static_cast<double>(a.tokens * a.d_model + 2 * bk * a.d_model + 2 * bk)), kCompute);
  }
  void encode_backward(const EncodeBackwardArgs& a, int stream) override {  // reads B k M, writes B M
    if (a.type == Storage::kF32) host_.encode_backward(a, stream);
    advance(stream, kernel_ns(kEncodeBwd, e(a.type) * static_cast<double>((a.tokens * a.top_k + a.tokens) * a.d_model)), kCompute);
  }
  void route_backward(const RouteBackwardArgs& a, int stream) override {  // reads B E + B k, writes B E
    if (a.type == Storage::kF32) host_.route_backward(a, stream);
    advance(stream, kernel_ns(kRouteBwd, e(a.type) * static_cast<double>(2 * a.tokens * a.experts + a.tokens * a.top_k)), kCompute);
  }


  void set_device_copy_model(DeviceCopyModel m) { device_copy_ = m; }
  std::int64_t gemms() const { return gemms_; }
  std::int64_t synchronizes() const { return synchronizes_; }
  // `ns` of communication on `stream` (a modelled transport's collective): meets nothing.
  void communicate(int stream, double ns) { advance(stream, ns, kNone); }

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
      const double f = factor_of(kind, kind_[t]);
      if (f < factor && busy_from_[t] <= clock_[s] && clock_[s] < clock_[t]) {
        factor = f;
        overlap = clock_[t] - clock_[s];
      }
    }
    clock_[s] += work / factor <= overlap ? work / factor : overlap + (work - overlap * factor);
  }
  double factor_of(Kind op, Kind other) const {
    if (op == kDeviceCopy) return other == kCompute ? device_copy_.with_computation : 1.0;
    if (other == kDeviceCopy) return 1.0;
    return kFactor[op][other];
  }
  static double e(Storage s) { return static_cast<double>(storage_bytes(s)); }

  HostDevice host_;
  std::vector<double> clock_;
  std::vector<double> busy_from_;  // start of the stream's current back-to-back run
  std::vector<Kind> kind_;         // the kind of its latest op
  std::vector<double> stamp_;
  std::set<void*> pinned_;
  DeviceCopyModel device_copy_;
  std::int64_t gemms_ = 0;
  std::int64_t synchronizes_ = 0;
};

}  // namespace moesim::runtime::modelled
