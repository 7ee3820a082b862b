// HostProcessTransport: one rank per process, for HostDevice (the CPU emulation): each
// collective is packed into a staging buffer, exchanged with ProcessGroup::all_to_allv on the
// channel's own communicator, and unpacked into the receiver's layout.
//
// It is how the one-process-per-rank mode of `moesim run` (mpirun -np N) is tested on machines
// without GPUs: the same measure() path, rank placement, trace merging and gathered reference
// check as with NCCL on GPUs, with the MPI exchange in place of NCCL's.
#pragma once

#include <memory>

#include "runtime/comm/process_group.h"
#include "runtime/comm/transport.h"
#include "runtime/exec/host_device.h"

namespace moesim::runtime {

std::unique_ptr<Transport> make_host_process_transport(HostDevice& device, ProcessGroup& group);

}  // namespace moesim::runtime
