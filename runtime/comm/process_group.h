// ProcessGroup: the processes of one job started together by an MPI launcher (`mpirun -np N
// moesim ...`, srun), as the narrow set of operations moesim needs from MPI. `moesim sweep` shards
// its grid over them; `moesim run` makes each process one expert-parallel rank on its own GPU
// (the NCCL unique ids travel by broadcast, traces and results are merged at rank 0).
//
// Only the MPI implementation exists (mpi_plugin.cc, built when MPI is found); code that also
// runs without a launcher takes a nullable ProcessGroup* and treats nullptr as one process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace moesim::runtime {

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Rank among the processes on this host (which GPU a process takes).
  virtual int local_rank() const = 0;

  virtual void barrier() = 0;
  // `bytes` at `data` on `root` are copied to every other process's `data`.
  virtual void broadcast(void* data, std::int64_t bytes, int root) = 0;
  // True on every process when every process passes true (so that a process that failed never
  // leaves the others waiting in a later collective).
  virtual bool all_true(bool mine) = 0;
  // Element-wise maximum of every process's `values` (same length everywhere), written to
  // `values` on `root`; other processes' `values` are unchanged.
  virtual void max_to_root(std::vector<std::int64_t>& values, int root) = 0;
  // Every process's bytes, in rank order, on `root` (empty elsewhere).
  virtual std::vector<std::vector<std::byte>> gather(const std::vector<std::byte>& mine, int root) = 0;
  // Host-memory all-to-allv on one of `channel`'s own communicators (channels never share one,
  // as the graph's two comm streams never share a NCCL communicator): send_bytes[p] bytes packed
  // in peer order go to process p, recv_bytes[p] bytes arrive from it. Blocking.
  virtual void all_to_allv(const void* send, const std::vector<std::int64_t>& send_bytes, void* recv,
                           const std::vector<std::int64_t>& recv_bytes, int channel) = 0;
  // Ends every process of the job with `exit_code` (an error in one process must not leave the
  // others hanging in a collective).
  [[noreturn]] virtual void abort(int exit_code) = 0;
};

// After every process of `group` has checked the same input (`error` empty when this process's
// passed): true when all passed. Otherwise the failure is reported once: rank 0 throws InputError
// with its reason when it failed, else each failing process throws naming its rank (its host may
// differ, e.g. lack GPUs); the other processes return false and exit 0 without a word: the
// reporting process exits 2, which is the job's status under mpirun, and a quiet process that
// exited non-zero first could have the launcher kill the reporter before its message is out.
// A nullptr group is this process alone: throws when `error` is set, else true.
bool agree_on_input(ProcessGroup* group, const std::string& error);

// Whether the environment says an MPI launcher started this process (Open MPI, PMI, PMIx).
bool started_by_mpi_launcher();

// The MPI world (MPI_Init now, MPI_Finalize when it is destroyed) when started by a launcher in
// a build with MPI; nullptr otherwise: a plain run must not pay for, or depend on, MPI start-up.
// The world comes from the MPI plugin (libmoesim_mpi.so, the one file that links MPI), loaded
// only here, from beside the program or from ../lib of it. Several processes that cannot have a
// world (no plugin, a build without MPI) are refused with InputError; one alone gets nullptr.
// Call it once per process.
std::unique_ptr<ProcessGroup> launched_process_group();

// The same with the plugin looked for at `plugin_places`, in order (a test program, which is not
// built beside the plugin).
std::unique_ptr<ProcessGroup> launched_process_group(const std::vector<std::filesystem::path>& plugin_places);

}  // namespace moesim::runtime
