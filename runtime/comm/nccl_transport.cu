#include "runtime/comm/nccl_transport.h"

#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "runtime/comm/process_group.h"
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
  // One process drives every rank: ranks 0..n-1 on `devices` (ncclCommInitAll).
  explicit NcclTransport(const std::vector<DeviceOps*>& devices)
      : group_size_(static_cast<int>(devices.size())), timeout_s_(timeout_seconds()) {
    std::vector<int> ordinals;
    for (DeviceOps* d : devices) {
      devices_.push_back(cuda_device(d));
      ordinals.push_back(devices_.back()->ordinal());
    }
    for (int ch = 0; ch < kNumCommChannels; ++ch) {
      comms_[ch].resize(devices_.size());
      MOESIM_NCCL(ncclCommInitAll(comms_[ch].data(), group_size_, ordinals.data()));
    }
  }

  // One rank per process: this process is rank group.rank() on `device`. Rank 0 creates one
  // unique id per channel and the group broadcasts it; every process then joins the
  // communicator with ncclCommInitRank (which blocks until all ranks have joined).
  NcclTransport(DeviceOps* device, ProcessGroup& group)
      : first_rank_(group.rank()), group_size_(group.size()), timeout_s_(timeout_seconds()) {
    devices_.push_back(cuda_device(device));
    cuda_check(cudaSetDevice(devices_[0]->ordinal()), "cudaSetDevice");
    for (int ch = 0; ch < kNumCommChannels; ++ch) {
      ncclUniqueId id{};
      if (group.rank() == 0) MOESIM_NCCL(ncclGetUniqueId(&id));
      group.broadcast(&id, sizeof id, 0);
      comms_[ch].resize(1);
      MOESIM_NCCL(ncclCommInitRank(&comms_[ch][0], group_size_, id, first_rank_));
    }
  }

  ~NcclTransport() override {
    for (auto& channel : comms_)
      for (ncclComm_t c : channel)
        if (c != nullptr) ncclCommDestroy(c);
  }

  std::string name() const override { return "nccl " + std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR); }
  int group_size() const override { return group_size_; }

  void all_to_all(const std::vector<AllToAllMember>& members, int channel) override {
    const int n = group_size();
    MOESIM_NCCL(ncclGroupStart());
    for (const AllToAllMember& m : members) {
      ncclComm_t comm = comms_[channel].at(local_index(m.rank));
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
      ncclComm_t comm = comms_[channel].at(local_index(m.rank));
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
  static CudaDevice* cuda_device(DeviceOps* d) {
    auto* cd = dynamic_cast<CudaDevice*>(d);
    if (cd == nullptr) throw InputError("the NCCL transport needs CUDA devices");
    return cd;
  }

  // Local members are ranks first_rank_ .. first_rank_ + devices_.size() - 1.
  std::size_t local_index(int rank) const {
    MOESIM_CHECK(rank >= first_rank_ && rank - first_rank_ < static_cast<int>(devices_.size()),
                 "rank " + std::to_string(rank) + " is not local to this process");
    return static_cast<std::size_t>(rank - first_rank_);
  }

  template <typename Member>
  CudaDevice& device(const Member& m) const {
    return *devices_.at(local_index(m.rank));
  }

  [[noreturn]] void abort_all(const std::string& why) {
    for (auto& channel : comms_)
      for (ncclComm_t& c : channel) {
        if (c != nullptr) ncclCommAbort(c);
        c = nullptr;
      }
    throw InternalError("NCCL watchdog: " + why + "; the communicators were aborted");
  }

  std::vector<CudaDevice*> devices_;  // the local ranks' devices
  std::vector<ncclComm_t> comms_[kNumCommChannels];  // per channel, per local rank
  int first_rank_ = 0;
  int group_size_ = 0;
  double timeout_s_;
};

}  // namespace

std::unique_ptr<Transport> make_nccl_transport(const std::vector<DeviceOps*>& devices) {
  return std::make_unique<NcclTransport>(devices);
}

std::unique_ptr<Transport> make_nccl_transport(DeviceOps* device, ProcessGroup& group) {
  return std::make_unique<NcclTransport>(device, group);
}

}  // namespace moesim::runtime
