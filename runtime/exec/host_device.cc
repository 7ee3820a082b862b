#include "runtime/exec/host_device.h"

#include <cstring>

#include "runtime/comm/host_process_transport.h"
#include "runtime/kernels/host_kernels.h"
#include "sim/core/error.h"

#include <unistd.h>

namespace moesim::runtime {

void HostDevice::on(int stream) {
  MOESIM_CHECK(stream >= 0 && stream < streams_, "unknown stream " + std::to_string(stream));
  if (ops_.size() < static_cast<std::size_t>(streams_)) ops_.resize(streams_, 0);
  ++ops_[stream];
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
}

void HostDevice::wait(int stream, int event) {
  MOESIM_CHECK(stream >= 0 && stream < streams_, "unknown stream");
  MOESIM_CHECK(event >= 0 && static_cast<std::size_t>(event) < event_stamp_.size(), "unknown event");
  // Issued in a topological order, the awaited work has already run.
  MOESIM_CHECK(event_stamp_[event] >= 0, "wait on an event never recorded");
  ++waits_;
}

float HostDevice::elapsed_ms(int from, int to) {
  return static_cast<float>(event_stamp_.at(to) - event_stamp_.at(from)) * 1e-3f;
}

void* HostDevice::alloc_device(std::int64_t bytes, const char* what) {
  MOESIM_CHECK(bytes >= 0, std::string("negative allocation for ") + what);
  auto block = std::make_unique<std::byte[]>(static_cast<std::size_t>(bytes > 0 ? bytes : 1));
  // Poison so that a read of never-written bytes shows up as NaN rather than as a lucky zero.
  std::memset(block.get(), 0xFF, static_cast<std::size_t>(bytes > 0 ? bytes : 1));
  void* p = block.get();
  blocks_.emplace(p, std::move(block));
  return p;
}

void HostDevice::free_device(void* p) {
  if (p != nullptr) blocks_.erase(p);
}

void HostDevice::copy(void* dst, const void* src, std::int64_t bytes, int stream) {
  on(stream);
  std::memmove(dst, src, static_cast<std::size_t>(bytes));
}

void HostDevice::copy_2d(void* dst, std::int64_t dst_pitch, const void* src, std::int64_t src_pitch,
                         std::int64_t width, std::int64_t rows, int stream) {
  on(stream);
  for (std::int64_t r = 0; r < rows; ++r)
    std::memmove(static_cast<char*>(dst) + r * dst_pitch, static_cast<const char*>(src) + r * src_pitch,
                 static_cast<std::size_t>(width));
}

void HostDevice::zero(void* dst, std::int64_t bytes, int stream) {
  on(stream);
  std::memset(dst, 0, static_cast<std::size_t>(bytes));
}

void HostDevice::download(void* host_dst, const void* src, std::int64_t bytes) {
  std::memcpy(host_dst, src, static_cast<std::size_t>(bytes));
}

void HostDevice::gemm(const GemmArgs& a, int s) { on(s); host::gemm(a); }
void HostDevice::fill(const FillArgs& a, int s) { on(s); host::fill(a); }
void HostDevice::add(const AddArgs& a, int s) { on(s); host::add(a); }
void HostDevice::route(const RouteArgs& a, int s) { on(s); host::route(a); }
void HostDevice::assign(const AssignArgs& a, int s) { on(s); host::assign(a); }
void HostDevice::encode(const EncodeArgs& a, int s) { on(s); host::encode(a); }
void HostDevice::activation(const ActivationArgs& a, int s) { on(s); host::activation(a); }
void HostDevice::activation_backward(const ActivationBackwardArgs& a, int s) { on(s); host::activation_backward(a); }
void HostDevice::decode(const DecodeArgs& a, int s) { on(s); host::decode(a); }
void HostDevice::decode_backward(const DecodeBackwardArgs& a, int s) { on(s); host::decode_backward(a); }
void HostDevice::encode_backward(const EncodeBackwardArgs& a, int s) { on(s); host::encode_backward(a); }
void HostDevice::route_backward(const RouteBackwardArgs& a, int s) { on(s); host::route_backward(a); }

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
