// HostDevice: DeviceOps on the CPU. Every operation runs at once when issued, in fp32 storage
// (host_kernels.h); streams and events only check that they exist. Because the executor issues
// tasks in a topological order, running each at issue time is one of the executions the graph
// allows, so results equal what a correct GPU run must produce up to floating-point association.
// Event "times" count recorded events (issue order, not time): traces from it have the right
// shape, not durations.
//
// Because running in issue order hides a missing wait, every operation also declares the bytes it
// reads and writes to a RaceDetector (race_detector.h), which throws InternalError for two
// accesses that the streams, events and synchronizes leave unordered: a race on a GPU. A kernel's
// gathered rows (encode, decode and their backward) are declared row by row from its index table.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/exec/device.h"
#include "runtime/exec/race_detector.h"

namespace moesim::runtime {

class HostDevice final : public DeviceOps {
 public:
  std::string name() const override { return "host emulation (fp32)"; }
  int create_stream() override {
    races_.add_stream();
    return streams_++;
  }
  int create_event(bool timing) override;
  void record(int event, int stream) override;
  void wait(int stream, int event) override;
  void synchronize() override { races_.synchronize(); }
  // Report reads of memory nothing has written (RaceDetector::check_uninitialized_reads).
  void check_uninitialized_reads(bool on) { races_.check_uninitialized_reads(on); }
  float elapsed_ms(int from, int to) override;

  void* alloc_device(std::int64_t bytes, const char* what) override;
  void* alloc_pinned(std::int64_t bytes, const char* what) override { return alloc_device(bytes, what); }
  void free_device(void* p) override;
  void free_pinned(void* p) override { free_device(p); }
  std::int64_t library_workspace_bytes() const override { return 0; }

  void copy(void* dst, const void* src, std::int64_t bytes, int stream) override;
  void copy_2d(void* dst, std::int64_t dst_pitch, const void* src, std::int64_t src_pitch, std::int64_t width,
               std::int64_t rows, int stream) override;
  void zero(void* dst, std::int64_t bytes, int stream) override;
  void download(void* host_dst, const void* src, std::int64_t bytes) override;

  void gemm(const GemmArgs& args, int stream) override;
  void fill(const FillArgs& args, int stream) override;
  void add(const AddArgs& args, int stream) override;
  void route(const RouteArgs& args, int stream) override;
  // The sequential assignment needs none; the GPU's arrays are reserved and declared written all the
  // same, so that the race detector checks the executor's sharing of them (cub's temporary storage,
  // sized by the GPU, is left out).
  std::int64_t assign_scratch_bytes(std::int64_t tokens, int top_k, int experts) override {
    return 4 * 4 * tokens * top_k + 4 * static_cast<std::int64_t>(experts);
  }
  void assign(const AssignArgs& args, int stream) override;
  void encode(const EncodeArgs& args, int stream) override;
  void activation(const ActivationArgs& args, int stream) override;
  void activation_backward(const ActivationBackwardArgs& args, int stream) override;
  void decode(const DecodeArgs& args, int stream) override;
  void decode_backward(const DecodeBackwardArgs& args, int stream) override;
  void encode_backward(const EncodeBackwardArgs& args, int stream) override;
  void route_backward(const RouteBackwardArgs& args, int stream) override;

  // An exchange that the host runs for `stream` (HostProcessTransport's MPI all-to-allv): it reads
  // `src` and writes `dst` as an operation of that stream.
  void note_transfer(int stream, const char* op, const void* src, std::int64_t src_bytes, void* dst,
                     std::int64_t dst_bytes);

  // Operations issued per stream (what the tests inspect).
  const std::vector<std::int64_t>& ops_per_stream() const { return ops_; }
  std::int64_t waits() const { return waits_; }

 private:
  // Starts operation `op` on `stream` (counted, and a new epoch for the race detector).
  void on(int stream, const char* op);
  void reads(const void* p, std::int64_t bytes) { races_.access(p, bytes, RaceDetector::Access::kRead); }
  void writes(const void* p, std::int64_t bytes) { races_.access(p, bytes, RaceDetector::Access::kWrite); }
  // Rows index[i] >= 0 of `base` (row_bytes each), as runs of consecutive rows.
  void reads_rows(const void* base, std::int64_t row_bytes, const std::int32_t* index, std::int64_t count);
  // A matrix of `rows` x `cols` elements with row stride ld, `batch` of them `stride` apart.
  void matrix(const void* p, int element_bytes, std::int64_t batch, std::int64_t stride, std::int64_t rows,
              std::int64_t ld, std::int64_t cols, RaceDetector::Access kind);

  RaceDetector races_;

  int streams_ = 0;
  std::vector<std::int64_t> ops_;
  std::vector<std::int64_t> event_stamp_;  // -1 until recorded
  std::int64_t clock_ = 0;
  std::int64_t waits_ = 0;
  std::map<void*, std::unique_ptr<std::byte[]>> blocks_;
};

// `devices` HostDevices as a DeviceProvider, so that measure() runs on machines without GPUs
// (tests): one rank or N loopback ranks on device 0, or one rank per process of a ProcessGroup
// (host_process_transport.h). Several devices in one process have no transport (InputError).
std::unique_ptr<DeviceProvider> make_host_provider(int devices = 1);

}  // namespace moesim::runtime
