// NCCL transport: the all-to-all of fixed blocks and the all-to-allv as grouped ncclSend /
// ncclRecv on the members' comm streams, one communicator per channel (dispatch, combine), so
// collectives on the two comm streams never share a communicator and each communicator sees them
// in the same order on every rank (the graph's stream order).
//
// Launch modes: one process driving several GPUs (ncclCommInitAll over the devices given), or,
// with MPI, one process per GPU (rank 0 creates the ncclUniqueId, MPI_Bcast shares it, every
// process calls ncclCommInitRank). Robustness: after each step the transport waits for the
// devices with a watchdog; it polls ncclCommGetAsyncError while waiting, and on an error or after
// the timeout (MOESIM_NCCL_TIMEOUT_S, default 300 s) aborts every communicator (ncclCommAbort)
// and throws with the reason instead of hanging.
#pragma once

#include <memory>
#include <vector>

#include "runtime/comm/process_group.h"
#include "runtime/comm/transport.h"

namespace moesim::runtime {

// One process, one rank per device (devices must be CudaDevices on distinct GPUs).
std::unique_ptr<Transport> make_nccl_transport(const std::vector<DeviceOps*>& devices);

// One process per rank (`mpirun -np N moesim run`): this process is rank group.rank() on
// `device` (a CudaDevice); the unique ids are broadcast over the group.
std::unique_ptr<Transport> make_nccl_transport(DeviceOps* device, ProcessGroup& group);

}  // namespace moesim::runtime
