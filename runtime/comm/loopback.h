// Loopback transport: N virtual ranks on one device, all-to-all as device-to-device copies on the
// members' comm streams. It lets the expert-parallel numerics and the multi-rank schedule run on a
// single GPU (and on HostDevice in the host tests).
//
// Rendezvous as a collective has it: every member records an "arrived" event on its stream; each
// receiver's stream waits for all arrivals, copies the blocks addressed to it from every sender's
// buffer, and records "done"; every member's stream then waits for all receivers' "done", so
// neither a sender's later work overwrites a block still being read nor a receiver's later work
// reads a block not yet written. Events are reused: a wait binds to the latest record issued
// before it (cudaStreamWaitEvent's semantics), and both are issued within one call.
#pragma once

#include <vector>

#include "runtime/comm/transport.h"

namespace moesim::runtime {

class LoopbackTransport final : public Transport {
 public:
  // All `ranks` virtual ranks live on `device`.
  LoopbackTransport(DeviceOps& device, int ranks);
  std::string name() const override { return "loopback"; }
  int group_size() const override { return ranks_; }
  void all_to_all(const std::vector<AllToAllMember>& members, int channel) override;
  void all_to_allv(const std::vector<AllToAllvMember>& members, int channel) override;

 private:
  template <typename Member, typename CopyBlocks>
  void exchange(const std::vector<Member>& members, CopyBlocks copy_blocks);

  DeviceOps& device_;
  int ranks_;
  std::vector<int> arrived_;  // one event per rank
  std::vector<int> done_;
};

}  // namespace moesim::runtime
