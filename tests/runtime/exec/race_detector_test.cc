// The race detector of the host emulation (race_detector.h): unordered conflicting accesses are
// caught and ordered ones are not, through stream order, chains of events and synchronize; and
// on the executor, waits left out (which give right results on the host, running in issue order)
// are caught, for every strategy.
#include "runtime/exec/race_detector.h"

#include <gtest/gtest.h>

#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "layer_test_util.h"
#include "runtime/comm/loopback.h"
#include "runtime/exec/host_device.h"
#include "runtime/exec/stream_plan.h"
#include "sim/core/error.h"

namespace moesim::runtime {
namespace {

// Whether f throws the detector's InternalError whose message contains `what` (others propagate).
bool reports(const std::function<void()>& f, const std::string& what) {
  try {
    f();
  } catch (const InternalError& e) {
    if (std::string(e.what()).find(what) != std::string::npos) return true;
    throw;
  }
  return false;
}

bool races(const std::function<void()>& f) { return reports(f, "data race"); }

struct TwoStreams {
  HostDevice dev;
  int s0 = dev.create_stream(), s1 = dev.create_stream(), s2 = dev.create_stream();
  void* a = dev.alloc_device(256, "buffer a");
  void* b = dev.alloc_device(256, "buffer b");
  void* c = dev.alloc_device(256, "buffer c");
};

TEST(RaceDetector, AWriteThenAReadOnAnotherStreamNeedsAnEvent) {
  {
    TwoStreams t;
    t.dev.zero(t.a, 256, t.s0);
    EXPECT_TRUE(races([&] { t.dev.copy(t.b, t.a, 256, t.s1); }));
  }
  {
    TwoStreams t;
    t.dev.zero(t.a, 256, t.s0);
    const int e = t.dev.create_event(false);
    t.dev.record(e, t.s0);
    t.dev.wait(t.s1, e);
    EXPECT_FALSE(races([&] { t.dev.copy(t.b, t.a, 256, t.s1); }));
  }
  {
    TwoStreams t;  // the event recorded before the write does not cover it
    const int e = t.dev.create_event(false);
    t.dev.record(e, t.s0);
    t.dev.zero(t.a, 256, t.s0);
    t.dev.wait(t.s1, e);
    EXPECT_TRUE(races([&] { t.dev.copy(t.b, t.a, 256, t.s1); }));
  }
  {
    TwoStreams t;
    t.dev.zero(t.a, 256, t.s0);
    t.dev.synchronize();
    EXPECT_FALSE(races([&] { t.dev.copy(t.b, t.a, 256, t.s1); }));
  }
}

TEST(RaceDetector, OrderIsTransitiveThroughChainsOfEvents) {
  TwoStreams t;
  t.dev.zero(t.a, 256, t.s0);
  const int e0 = t.dev.create_event(false), e1 = t.dev.create_event(false);
  t.dev.record(e0, t.s0);
  t.dev.wait(t.s1, e0);
  t.dev.zero(t.c, 256, t.s1);
  t.dev.record(e1, t.s1);
  t.dev.wait(t.s2, e1);
  EXPECT_FALSE(races([&] { t.dev.copy(t.b, t.a, 256, t.s2); }));  // s0 -> s1 -> s2
}

TEST(RaceDetector, WritesOrderAgainstEarlierReadsAndConcurrentReadsAreFine) {
  TwoStreams t;
  t.dev.zero(t.a, 256, t.s0);
  t.dev.synchronize();
  t.dev.copy(t.b, t.a, 128, t.s0);
  EXPECT_FALSE(races([&] { t.dev.copy(t.c, t.a, 256, t.s1); }));    // two readers
  EXPECT_FALSE(races([&] { t.dev.zero(t.a, 0, t.s2); }));  // nothing touched
  EXPECT_TRUE(races([&] { t.dev.zero(static_cast<char*>(t.a) + 64, 8, t.s2); }));  // write under both reads
}

TEST(RaceDetector, OnlyOverlappingBytesConflict) {
  TwoStreams t;
  t.dev.zero(t.a, 128, t.s0);
  EXPECT_FALSE(races([&] { t.dev.zero(static_cast<char*>(t.a) + 128, 128, t.s1); }));
  EXPECT_TRUE(races([&] { t.dev.zero(static_cast<char*>(t.a) + 120, 16, t.s2); }));
}

TEST(RaceDetector, HostReadsNeedASynchronizeAndPrecedeLaterWork) {
  TwoStreams t;
  std::vector<char> out(256);
  t.dev.zero(t.a, 256, t.s0);
  EXPECT_TRUE(races([&] { t.dev.download(out.data(), t.a, 256); }));
  t.dev.synchronize();
  EXPECT_FALSE(races([&] { t.dev.download(out.data(), t.a, 256); }));
  // The download returned before this was issued.
  EXPECT_FALSE(races([&] { t.dev.zero(t.a, 256, t.s1); }));
}

TEST(RaceDetector, AccessesPastAnAllocationsEndAreErrors) {
  TwoStreams t;
  EXPECT_THROW(t.dev.zero(static_cast<char*>(t.a) + 200, 100, t.s0), InternalError);  // runs past the end
  EXPECT_THROW(t.dev.zero(static_cast<char*>(t.a) + 256, 8, t.s0), InternalError);    // starts at the end
  void* empty = t.dev.alloc_device(0, "an empty buffer");
  EXPECT_THROW(t.dev.zero(empty, 4, t.s0), InternalError);
}

// Like the GPU's launcher, the host refuses an assignment without the scratch it reserved.
TEST(RaceDetector, ReadsOfUnwrittenBytesAreReportedWhenAskedFor) {
  const auto unwritten = [](const std::function<void()>& f) { return reports(f, "which nothing has written"); };
  {
    TwoStreams t;  // off by default
    EXPECT_FALSE(unwritten([&] { t.dev.copy(t.b, t.a, 256, t.s0); }));
  }
  {
    TwoStreams t;
    t.dev.check_uninitialized_reads(true);
    t.dev.zero(t.a, 128, t.s0);
    EXPECT_FALSE(unwritten([&] { t.dev.copy(t.b, t.a, 128, t.s0); }));  // the written half
    EXPECT_TRUE(unwritten([&] { t.dev.copy(t.c, t.a, 256, t.s0); }));   // the other half was never written
    float host[64];
    t.dev.synchronize();
    EXPECT_FALSE(unwritten([&] { t.dev.download(host, t.b, 128); }));
    EXPECT_TRUE(unwritten([&] { t.dev.download(host, static_cast<char*>(t.b) + 128, 128); }));
  }
}

TEST(RaceDetector, TheHostAssignmentWantsTheGpusScratch) {
  TwoStreams t;
  std::vector<std::int32_t> idx = {0, 1}, row(2), token(4), choice(4), count(2);
  AssignArgs a{idx.data(), 2, 2, 1, 2, 1, row.data(), token.data(), choice.data(), count.data()};
  EXPECT_THROW(t.dev.assign(a, t.s0), InternalError);
  a.scratch_bytes = t.dev.assign_scratch_bytes(2, 1, 2);
  a.scratch = t.dev.alloc_device(a.scratch_bytes, "assignment scratch");
  t.dev.assign(a, t.s0);
  EXPECT_EQ(row, (std::vector<std::int32_t>{0, 2}));  // expert 0 slot 0, expert 1 slot 0 (rows e * C + slot)
}

// A HostDevice that leaves out the event waits `drop` selects (by their index in issue order). For
// each wait it notes whether its event is the executor's (created after mark_executor_events(),
// not the transport's) and whether the next operation on its stream is a PCIe copy (from or to
// pinned host memory: an offload or a prefetch).
class DroppingWaits final : public DeviceOps {
 public:
  struct Wait {
    bool executor = false;
    bool before_pcie_copy = false;
  };
  explicit DroppingWaits(std::function<bool(std::int64_t)> drop) : drop_(std::move(drop)) {}
  void mark_executor_events() { first_executor_event_ = events_; }
  const std::vector<Wait>& waits() const { return waits_; }

  std::string name() const override { return dev_.name(); }
  int create_stream() override { return dev_.create_stream(); }
  int create_event(bool timing) override {
    ++events_;
    return dev_.create_event(timing);
  }
  void record(int event, int stream) override { dev_.record(event, stream); }
  void wait(int stream, int event) override {
    const auto index = static_cast<std::int64_t>(waits_.size());
    waits_.push_back(Wait{event >= first_executor_event_, false});
    pending_[stream].push_back(waits_.size() - 1);
    if (!drop_(index)) dev_.wait(stream, event);
  }
  void synchronize() override { dev_.synchronize(); }
  float elapsed_ms(int from, int to) override { return dev_.elapsed_ms(from, to); }
  void* alloc_device(std::int64_t bytes, const char* what) override { return dev_.alloc_device(bytes, what); }
  void* alloc_pinned(std::int64_t bytes, const char* what) override {
    void* p = dev_.alloc_pinned(bytes, what);
    pinned_[static_cast<const char*>(p)] = bytes;
    return p;
  }
  void free_device(void* p) override { dev_.free_device(p); }
  void free_pinned(void* p) override {
    pinned_.erase(static_cast<const char*>(p));
    dev_.free_pinned(p);
  }
  std::int64_t library_workspace_bytes() const override { return 0; }
  void copy(void* d, const void* s, std::int64_t n, int st) override {
    issued(st, pinned(d) || pinned(s));
    dev_.copy(d, s, n, st);
  }
  void copy_2d(void* d, std::int64_t dp, const void* s, std::int64_t sp, std::int64_t w, std::int64_t r,
               int st) override {
    issued(st, pinned(d) || pinned(s));
    dev_.copy_2d(d, dp, s, sp, w, r, st);
  }
  void zero(void* d, std::int64_t n, int st) override { issued(st), dev_.zero(d, n, st); }
  void download(void* h, const void* s, std::int64_t n) override { dev_.download(h, s, n); }
  void gemm(const GemmArgs& a, int s) override { issued(s), dev_.gemm(a, s); }
  void fill(const FillArgs& a, int s) override { issued(s), dev_.fill(a, s); }
  void add(const AddArgs& a, int s) override { issued(s), dev_.add(a, s); }
  void route(const RouteArgs& a, int s) override { issued(s), dev_.route(a, s); }
  std::int64_t assign_scratch_bytes(std::int64_t b, int k, int e) override { return dev_.assign_scratch_bytes(b, k, e); }
  void assign(const AssignArgs& a, int s) override { issued(s), dev_.assign(a, s); }
  void encode(const EncodeArgs& a, int s) override { issued(s), dev_.encode(a, s); }
  void activation(const ActivationArgs& a, int s) override { issued(s), dev_.activation(a, s); }
  void activation_backward(const ActivationBackwardArgs& a, int s) override { issued(s), dev_.activation_backward(a, s); }
  void decode(const DecodeArgs& a, int s) override { issued(s), dev_.decode(a, s); }
  void decode_backward(const DecodeBackwardArgs& a, int s) override { issued(s), dev_.decode_backward(a, s); }
  void encode_backward(const EncodeBackwardArgs& a, int s) override { issued(s), dev_.encode_backward(a, s); }
  void route_backward(const RouteBackwardArgs& a, int s) override { issued(s), dev_.route_backward(a, s); }

 private:
  bool pinned(const void* p) const {
    const char* c = static_cast<const char*>(p);
    auto it = pinned_.upper_bound(c);
    if (it == pinned_.begin()) return false;
    --it;
    return c < it->first + it->second;
  }
  void issued(int stream, bool pcie_copy = false) {
    for (std::size_t w : pending_[stream]) waits_[w].before_pcie_copy = pcie_copy;
    pending_[stream].clear();
  }

  HostDevice dev_;
  std::function<bool(std::int64_t)> drop_;
  int events_ = 0;
  int first_executor_event_ = 0;
  std::vector<Wait> waits_;
  std::map<int, std::vector<std::size_t>> pending_;  // stream -> its waits since its last operation
  std::map<const char*, std::int64_t> pinned_;       // base -> bytes
};

struct StepWithDrops {
  bool raced = false;
  std::vector<DroppingWaits::Wait> waits;  // every wait issued
  std::int64_t plan_waits = 0;             // the stream plans' waits, over both ranks
  std::int64_t origin_waits = 0;           // each rank's streams but the first wait for its origin
};

// initialize() and one step of a 2-rank layer on loopback ranks, leaving out the waits `drop`
// selects.
StepWithDrops step(MemoryStrategy strategy, const std::function<bool(std::int64_t)>& drop) {
  const ModelSpec model = testing::tiny_model(8, 2, Activation::kGelu);
  RunSpec run;
  run.tokens_per_gpu = 48;
  run.ep_size = 2;
  run.num_chunks = 2;
  run.strategy = strategy;
  const ClusterSpec cluster = testing::adira();
  BuildOptions options;
  options.representative_rank = false;
  const TaskGraph graph = build_moe_graph(model, cluster, run, options);
  DroppingWaits device(drop);
  LoopbackTransport transport(device, 2);
  device.mark_executor_events();
  LayerExecutor exec(graph, model, derive_layer_dims(model, cluster, run), {{0, &device}, {1, &device}}, transport);
  StepWithDrops out;
  out.raced = races([&] {
    exec.initialize();
    exec.run_step();
  });
  out.waits = device.waits();
  for (int r = 0; r < 2; ++r) {
    const StreamPlan plan = plan_streams(graph, r);
    out.plan_waits += plan.num_waits();
    out.origin_waits += static_cast<std::int64_t>(plan.streams.size()) - 1;
  }
  return out;
}

// Without its waits the executor gives right results on the host (issue order) and wrong ones on
// a GPU; the detector sees the difference. Each wait of the stream plans on its own protects data
// (leaving it out is a race), except those before an offload or a prefetch: the graph's order of
// these copies after a chunk's compute (MPipeMoE's schedule) goes beyond their data. The
// executor's waits at the step's origin (timing; initialize() synchronized) and the transport's
// (partly implied by its earlier exchanges) are not counted.
TEST(RaceDetector, EveryWaitOfTheStreamPlanProtectsDataOrSchedulesAPcieCopy) {
  for (MemoryStrategy st : {MemoryStrategy::kNone, MemoryStrategy::kS1, MemoryStrategy::kS2, MemoryStrategy::kS3,
                            MemoryStrategy::kS4}) {
    const std::string label(to_string(st));
    const StepWithDrops all = step(st, [](std::int64_t) { return false; });
    EXPECT_FALSE(all.raced) << label;
    EXPECT_TRUE(step(st, [](std::int64_t) { return true; }).raced) << label;
    std::int64_t executor = 0, protecting = 0, scheduling = 0;
    for (std::size_t i = 0; i < all.waits.size(); ++i) {
      if (!all.waits[i].executor || executor++ < all.origin_waits) continue;
      if (step(st, [i](std::int64_t w) { return w == static_cast<std::int64_t>(i); }).raced)
        ++protecting;
      else
        EXPECT_TRUE(all.waits[i].before_pcie_copy) << label << ": wait " << i << " protects no data";
      scheduling += all.waits[i].before_pcie_copy ? 1 : 0;
    }
    EXPECT_EQ(executor - all.origin_waits, all.plan_waits) << label;
    EXPECT_GT(protecting, all.plan_waits / 2) << label;
    std::cout << label << ": " << protecting << " of " << all.plan_waits << " plan waits protect data, " << scheduling
              << " order PCIe copies\n";
  }
}

}  // namespace
}  // namespace moesim::runtime
