#include "runtime/comm/nccl_transport.h"

#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "runtime/exec/cuda_device.cuh"
#include "sim/core/error.h"

namespace moesim::runtime {

namespace {

void nccl_check(ncclResult_t r, const char* call) {
  if (r != ncclSuccess) throw InternalError(std::string(call) + " failed: " + ncclGetErrorString(r));
}

#define MOESIM_NCCL(call) nccl_check((call), #call)

double timeout_seconds() {
  const char* v = std::getenv("MOESIM_NCCL_TIMEOUT_S");
  if (v == nullptr) return 300.0;
  const double t = std::atof(v);
  return t > 0 ? t : 300.0;
}

class NcclTransport final : public Transport {
 public:
  explicit NcclTransport(const std::vector<DeviceOps*>& devices) : timeout_s_(timeout_seconds()) {
    std::vector<int> ordinals;
    for (DeviceOps* d : devices) {
      auto* cd = dynamic_cast<CudaDevice*>(d);
      if (cd == nullptr) throw InputError("the NCCL transport needs CUDA devices");
      devices_.push_back(cd);
      ordinals.push_back(cd->ordinal());
    }
    const int n = static_cast<int>(devices.size());
    for (int ch = 0; ch < kNumCommChannels; ++ch) {
      comms_[ch].resize(static_cast<std::size_t>(n));
      MOESIM_NCCL(ncclCommInitAll(comms_[ch].data(), n, ordinals.data()));
    }
  }

  ~NcclTransport() override {
    for (auto& channel : comms_)
      for (ncclComm_t c : channel)
        if (c != nullptr) ncclCommDestroy(c);
  }

  std::string name() const override { return "nccl " + std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR); }
  int group_size() const override { return static_cast<int>(devices_.size()); }

  void all_to_all(const std::vector<AllToAllMember>& members, int channel) override {
    const int n = group_size();
    MOESIM_NCCL(ncclGroupStart());
    for (const AllToAllMember& m : members) {
      ncclComm_t comm = comms_[channel].at(static_cast<std::size_t>(m.rank));
      cudaStream_t st = device(m).native_stream(m.stream);
      // Pieces to and from one peer are matched in issue order (NCCL's point-to-point semantics).
      for (int p = 0; p < n; ++p) {
        const int pieces = m.send_layout.contiguous() && m.recv_layout.contiguous() ? 1 : m.send_layout.pieces;
        const std::int64_t bytes = pieces == 1 ? m.send_layout.block_bytes() : m.send_layout.piece_bytes;
        for (int i = 0; i < pieces; ++i) {
          MOESIM_NCCL(ncclSend(static_cast<const char*>(m.send) + m.send_layout.offset(p, i),
                               static_cast<std::size_t>(bytes), ncclInt8, p, comm, st));
          MOESIM_NCCL(ncclRecv(static_cast<char*>(m.recv) + m.recv_layout.offset(p, i), static_cast<std::size_t>(bytes),
                               ncclInt8, p, comm, st));
        }
      }
    }
    MOESIM_NCCL(ncclGroupEnd());
  }

  void all_to_allv(const std::vector<AllToAllvMember>& members, int channel) override {
    const int n = group_size();
    MOESIM_NCCL(ncclGroupStart());
    for (const AllToAllvMember& m : members) {
      ncclComm_t comm = comms_[channel].at(static_cast<std::size_t>(m.rank));
      cudaStream_t st = device(m).native_stream(m.stream);
      const std::vector<std::int64_t> sd = displacements(m.send_bytes), rd = displacements(m.recv_bytes);
      for (int p = 0; p < n; ++p) {
        if (m.send_bytes[p] > 0)
          MOESIM_NCCL(ncclSend(static_cast<const char*>(m.send) + sd[p], static_cast<std::size_t>(m.send_bytes[p]),
                               ncclInt8, p, comm, st));
        if (m.recv_bytes[p] > 0)
          MOESIM_NCCL(ncclRecv(static_cast<char*>(m.recv) + rd[p], static_cast<std::size_t>(m.recv_bytes[p]), ncclInt8,
                               p, comm, st));
      }
    }
    MOESIM_NCCL(ncclGroupEnd());
  }

  // Polls the devices and the communicators instead of blocking in cudaDeviceSynchronize, so a
  // peer that died or a mismatched collective ends in an error rather than a hang.
  void wait_for(const std::vector<DeviceOps*>& devices) override {
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      bool idle = true;
      for (DeviceOps* d : devices) idle = idle && dynamic_cast<CudaDevice&>(*d).idle();
      if (idle) return;
      for (auto& channel : comms_) {
        for (ncclComm_t c : channel) {
          ncclResult_t state = ncclSuccess;
          MOESIM_NCCL(ncclCommGetAsyncError(c, &state));
          if (state != ncclSuccess && state != ncclInProgress)
            abort_all(std::string("NCCL reported an asynchronous error: ") + ncclGetErrorString(state));
        }
      }
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (waited > timeout_s_)
        abort_all("the step did not finish within " + std::to_string(timeout_s_) +
                  " s (MOESIM_NCCL_TIMEOUT_S); a rank may be stuck or a collective mismatched");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

 private:
  template <typename Member>
  CudaDevice& device(const Member& m) const {
    return *devices_.at(static_cast<std::size_t>(m.rank));
  }

  [[noreturn]] void abort_all(const std::string& why) {
    for (auto& channel : comms_)
      for (ncclComm_t& c : channel) {
        if (c != nullptr) ncclCommAbort(c);
        c = nullptr;
      }
    throw InternalError("NCCL watchdog: " + why + "; the communicators were aborted");
  }

  std::vector<CudaDevice*> devices_;
  std::vector<ncclComm_t> comms_[kNumCommChannels];
  double timeout_s_;
};

}  // namespace

std::unique_ptr<Transport> make_nccl_transport(const std::vector<DeviceOps*>& devices) {
  return std::make_unique<NcclTransport>(devices);
}

}  // namespace moesim::runtime
