#include "runtime/exec/host_device.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "runtime/comm/host_process_transport.h"
#include "runtime/kernels/host_kernels.h"
#include "sim/core/error.h"

#include <unistd.h>

namespace moesim::runtime {

void HostDevice::on(int stream, const char* op) {
  MOESIM_CHECK(stream >= 0 && stream < streams_, "unknown stream " + std::to_string(stream));
  if (ops_.size() < static_cast<std::size_t>(streams_)) ops_.resize(streams_, 0);
  ++ops_[stream];
  races_.begin_op(stream, op);
}

void HostDevice::reads_rows(const void* base, std::int64_t row_bytes, const std::int32_t* index, std::int64_t count) {
  std::vector<std::int64_t> rows;
  for (std::int64_t i = 0; i < count; ++i)
    if (index[i] >= 0) rows.push_back(index[i]);
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  for (std::size_t i = 0; i < rows.size();) {
    std::size_t j = i + 1;
    while (j < rows.size() && rows[j] == rows[j - 1] + 1) ++j;
    reads(static_cast<const char*>(base) + rows[i] * row_bytes, static_cast<std::int64_t>(j - i) * row_bytes);
    i = j;
  }
}

void HostDevice::matrix(const void* p, int element_bytes, std::int64_t batch, std::int64_t stride, std::int64_t rows,
                        std::int64_t ld, std::int64_t cols, RaceDetector::Access kind) {
  const auto* base = static_cast<const char*>(p);
  if (ld == cols && (batch == 1 || stride == rows * ld)) {
    races_.access(base, batch * rows * cols * element_bytes, kind);
    return;
  }
  for (std::int64_t b = 0; b < batch; ++b)
    races_.access_rows(base + b * stride * element_bytes, ld * element_bytes, cols * element_bytes, rows, kind);
}

int HostDevice::create_event(bool timing) {
  (void)timing;
  event_stamp_.push_back(-1);
  return static_cast<int>(event_stamp_.size()) - 1;
}

void HostDevice::record(int event, int stream) {
  MOESIM_CHECK(event >= 0 && static_cast<std::size_t>(event) < event_stamp_.size(), "unknown event");
  MOESIM_CHECK(stream >= 0 && stream < streams_, "unknown stream");
  event_stamp_[event] = clock_++;
  races_.record(event, stream);
}

void HostDevice::wait(int stream, int event) {
  MOESIM_CHECK(stream >= 0 && stream < streams_, "unknown stream");
  MOESIM_CHECK(event >= 0 && static_cast<std::size_t>(event) < event_stamp_.size(), "unknown event");
  // Issued in a topological order, the awaited work has already run.
  MOESIM_CHECK(event_stamp_[event] >= 0, "wait on an event never recorded");
  ++waits_;
  races_.wait(stream, event);
}

float HostDevice::elapsed_ms(int from, int to) {
  return static_cast<float>(event_stamp_.at(to) - event_stamp_.at(from)) * 1e-3f;
}

void* HostDevice::alloc_device(std::int64_t bytes, const char* what) {
  MOESIM_CHECK(bytes >= 0, std::string("negative allocation for ") + what);
  // A guard after the bytes: an access that starts just past the end (an off-by-one row) is
  // reported by the race detector instead of landing in another allocation.
  constexpr std::int64_t kGuard = 256;
  auto block = std::make_unique<std::byte[]>(static_cast<std::size_t>(bytes + kGuard));
  // Poison so that a read of never-written bytes shows up as NaN rather than as a lucky zero.
  std::memset(block.get(), 0xFF, static_cast<std::size_t>(bytes + kGuard));
  void* p = block.get();
  blocks_.emplace(p, std::move(block));
  races_.add_block(p, bytes, what, kGuard);
  return p;
}

void HostDevice::free_device(void* p) {
  if (p == nullptr) return;
  blocks_.erase(p);
  races_.remove_block(p);
}

void HostDevice::copy(void* dst, const void* src, std::int64_t bytes, int stream) {
  on(stream, "copy");
  reads(src, bytes);
  writes(dst, bytes);
  std::memmove(dst, src, static_cast<std::size_t>(bytes));
}

void HostDevice::copy_2d(void* dst, std::int64_t dst_pitch, const void* src, std::int64_t src_pitch,
                         std::int64_t width, std::int64_t rows, int stream) {
  on(stream, "copy_2d");
  races_.access_rows(src, src_pitch, width, rows, RaceDetector::Access::kRead);
  races_.access_rows(dst, dst_pitch, width, rows, RaceDetector::Access::kWrite);
  for (std::int64_t r = 0; r < rows; ++r)
    std::memmove(static_cast<char*>(dst) + r * dst_pitch, static_cast<const char*>(src) + r * src_pitch,
                 static_cast<std::size_t>(width));
}

void HostDevice::zero(void* dst, std::int64_t bytes, int stream) {
  on(stream, "zero");
  writes(dst, bytes);
  std::memset(dst, 0, static_cast<std::size_t>(bytes));
}

void HostDevice::download(void* host_dst, const void* src, std::int64_t bytes) {
  races_.host_access("download", src, bytes, RaceDetector::Access::kRead);
  std::memcpy(host_dst, src, static_cast<std::size_t>(bytes));
}

void HostDevice::note_transfer(int stream, const char* op, const void* src, std::int64_t src_bytes, void* dst,
                               std::int64_t dst_bytes) {
  on(stream, op);
  reads(src, src_bytes);
  writes(dst, dst_bytes);
}

void HostDevice::gemm(const GemmArgs& a, int s) {
  on(s, "gemm");
  const int ab = storage_bytes(a.ab_type);
  matrix(a.a, ab, a.batch, a.stride_a, a.trans_a ? a.k : a.m, a.lda, a.trans_a ? a.m : a.k, RaceDetector::Access::kRead);
  matrix(a.b, ab, a.batch, a.stride_b, a.trans_b ? a.n : a.k, a.ldb, a.trans_b ? a.k : a.n, RaceDetector::Access::kRead);
  matrix(a.c, storage_bytes(a.c_type), a.batch, a.stride_c, a.m, a.ldc, a.n, RaceDetector::Access::kWrite);
  host::gemm(a);
}

void HostDevice::fill(const FillArgs& a, int s) {
  on(s, "fill");
  writes(a.out, a.count * storage_bytes(a.type));
  host::fill(a);
}

void HostDevice::add(const AddArgs& a, int s) {
  on(s, "add");
  reads(a.src, a.count * storage_bytes(a.type));
  writes(a.dst, a.count * storage_bytes(a.type));
  host::add(a);
}

void HostDevice::route(const RouteArgs& a, int s) {
  on(s, "route");
  reads(a.logits, a.tokens * a.experts * 4);
  writes(a.probs, a.tokens * a.experts * 4);
  writes(a.topk_idx, a.tokens * a.top_k * 4);
  writes(a.topk_score, a.tokens * a.top_k * 4);
  host::route(a);
}

void HostDevice::assign(const AssignArgs& a, int s) {
  on(s, "assign");
  // The GPU's launcher refuses missing scratch too: the host tests must see it first.
  const std::int64_t needed = assign_scratch_bytes(a.tokens, a.top_k, a.experts);
  if (a.scratch == nullptr || a.scratch_bytes < needed)
    throw InternalError("the capacity assignment got " + std::to_string(a.scratch_bytes) + " bytes of scratch, needs " +
                        std::to_string(needed));
  reads(a.topk_idx, a.tokens * a.top_k * 4);
  writes(a.topk_row, a.tokens * a.top_k * 4);
  writes(a.row_token, a.experts * a.capacity * 4);
  writes(a.row_choice, a.experts * a.capacity * 4);
  writes(a.tokens_per_expert, a.experts * 4);
  writes(a.scratch, a.scratch_bytes);
  host::assign(a);
}

void HostDevice::encode(const EncodeArgs& a, int s) {
  on(s, "encode");
  const std::int64_t row_bytes = a.d_model * storage_bytes(a.type);
  reads(a.row_token + a.row_begin, (a.row_end - a.row_begin) * 4);
  reads_rows(a.x, row_bytes, a.row_token + a.row_begin, a.row_end - a.row_begin);
  writes(static_cast<char*>(a.out) + a.row_begin * row_bytes, (a.row_end - a.row_begin) * row_bytes);
  host::encode(a);
}

void HostDevice::activation(const ActivationArgs& a, int s) {
  on(s, "activation");
  const int eb = storage_bytes(a.type);
  const std::int64_t in_width = a.act == ActivationKind::kSwiglu ? 2 * a.width : a.width;
  reads(a.h, a.rows * in_width * eb);
  writes(a.a, a.rows * a.width * eb);
  host::activation(a);
}

void HostDevice::activation_backward(const ActivationBackwardArgs& a, int s) {
  on(s, "activation backward");
  const int eb = storage_bytes(a.type);
  const std::int64_t in_width = a.act == ActivationKind::kSwiglu ? 2 * a.width : a.width;
  reads(a.h, a.rows * in_width * eb);
  reads(a.da, a.rows * a.width * eb);
  writes(a.dh, a.rows * in_width * eb);
  if (a.a != nullptr) writes(a.a, a.rows * a.width * eb);
  host::activation_backward(a);
}

void HostDevice::decode(const DecodeArgs& a, int s) {
  on(s, "decode");
  const std::int64_t row_bytes = a.d_model * storage_bytes(a.type);
  reads(a.topk_row, a.tokens * a.top_k * 4);
  reads(a.topk_score, a.tokens * a.top_k * 4);
  reads_rows(a.expert_out, row_bytes, a.topk_row, a.tokens * a.top_k);
  writes(a.y, a.tokens * row_bytes);
  host::decode(a);
}

void HostDevice::decode_backward(const DecodeBackwardArgs& a, int s) {
  on(s, "decode backward");
  const std::int64_t row_bytes = a.d_model * storage_bytes(a.type);
  reads(a.dy, a.tokens * row_bytes);
  reads(a.topk_row, a.tokens * a.top_k * 4);
  reads(a.topk_score, a.tokens * a.top_k * 4);
  reads(a.row_token, a.rows * 4);
  reads(a.row_choice, a.rows * 4);
  reads_rows(a.expert_out, row_bytes, a.topk_row, a.tokens * a.top_k);
  writes(a.d_expert_out, a.rows * row_bytes);
  writes(a.dscores, a.tokens * a.top_k * 4);
  host::decode_backward(a);
}

void HostDevice::encode_backward(const EncodeBackwardArgs& a, int s) {
  on(s, "encode backward");
  const std::int64_t row_bytes = a.d_model * storage_bytes(a.type);
  reads(a.topk_row, a.tokens * a.top_k * 4);
  reads_rows(a.d_dispatch, row_bytes, a.topk_row, a.tokens * a.top_k);
  writes(a.dx, a.tokens * row_bytes);
  host::encode_backward(a);
}

void HostDevice::route_backward(const RouteBackwardArgs& a, int s) {
  on(s, "route backward");
  reads(a.probs, a.tokens * a.experts * 4);
  reads(a.topk_idx, a.tokens * a.top_k * 4);
  reads(a.topk_score, a.tokens * a.top_k * 4);
  reads(a.dscores, a.tokens * a.top_k * 4);
  writes(a.dlogits, a.tokens * a.experts * storage_bytes(a.type));
  host::route_backward(a);
}

namespace {

class HostProvider final : public DeviceProvider {
 public:
  explicit HostProvider(int devices) : devices_(devices) {}
  std::string unavailable_reason() const override { return devices_ > 0 ? "" : "the host provider has no devices"; }
  int num_devices() const override { return devices_; }
  std::string describe(int ordinal) const override { return "host emulation (fp32) #" + std::to_string(ordinal); }
  // Each process emulates its own devices: never shared with another process.
  std::string identity(int ordinal) const override {
    return "host emulation of process " + std::to_string(::getpid()) + " #" + std::to_string(ordinal);
  }
  std::unique_ptr<DeviceOps> open(int ordinal) override {
    MOESIM_CHECK(ordinal >= 0 && ordinal < devices_, "no host device " + std::to_string(ordinal));
    return std::make_unique<HostDevice>();
  }
  std::unique_ptr<Transport> multi_device_transport(const std::vector<DeviceOps*>& devices) override {
    throw InputError("host emulation has no transport between " + std::to_string(devices.size()) +
                     " devices of one process (use loopback ranks, or one process per rank)");
  }
  std::unique_ptr<Transport> process_transport(DeviceOps* device, ProcessGroup& group) override {
    auto* host = dynamic_cast<HostDevice*>(device);
    MOESIM_CHECK(host != nullptr, "the host provider's transport needs its own HostDevice");
    return make_host_process_transport(*host, group);
  }

 private:
  int devices_;
};

}  // namespace

std::unique_ptr<DeviceProvider> make_host_provider(int devices) { return std::make_unique<HostProvider>(devices); }

}  // namespace moesim::runtime
