// The MPI plugin (libmoesim_mpi.so): the ProcessGroup of a job started by an MPI launcher, over
// MPI_COMM_WORLD. It is the one file of moesim that links MPI: the programs load it with dlopen
// only when a launcher started them (process_group.cc), so that a plain `moesim simulate` neither
// loads libmpi nor needs it installed.
#include <mpi.h>

#include <cstdlib>
#include <limits>
#include <map>
#include <string>

#include "runtime/comm/process_group.h"
#include "sim/core/error.h"

namespace moesim::runtime {

namespace {

// MPI counts are ints: larger messages are refused with the reason rather than truncated.
int mpi_count(std::int64_t bytes, const char* what) {
  if (bytes < 0 || bytes > std::numeric_limits<int>::max())
    throw InternalError(std::string(what) + ": " + std::to_string(bytes) +
                        " bytes do not fit one MPI message (at most 2^31 - 1)");
  return static_cast<int>(bytes);
}

class MpiWorld final : public ProcessGroup {
 public:
  MpiWorld() {
    MPI_Init(nullptr, nullptr);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm node = MPI_COMM_NULL;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local_rank_);
    MPI_Comm_free(&node);
  }
  ~MpiWorld() override {
    for (auto& [channel, comm] : channels_) MPI_Comm_free(&comm);
    MPI_Finalize();
  }
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }

  void barrier() override { MPI_Barrier(MPI_COMM_WORLD); }

  void broadcast(void* data, std::int64_t bytes, int root) override {
    MPI_Bcast(data, mpi_count(bytes, "broadcast"), MPI_BYTE, root, MPI_COMM_WORLD);
  }

  bool all_true(bool mine) override {
    int in = mine ? 1 : 0, out = 0;
    MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return out == 1;
  }

  void max_to_root(std::vector<std::int64_t>& values, int root) override {
    const int n = mpi_count(static_cast<std::int64_t>(values.size()), "max_to_root");
    if (rank_ == root)
      MPI_Reduce(MPI_IN_PLACE, values.data(), n, MPI_INT64_T, MPI_MAX, root, MPI_COMM_WORLD);
    else
      MPI_Reduce(values.data(), nullptr, n, MPI_INT64_T, MPI_MAX, root, MPI_COMM_WORLD);
  }

  std::vector<std::vector<std::byte>> gather(const std::vector<std::byte>& mine, int root) override {
    const int my_count = mpi_count(static_cast<std::int64_t>(mine.size()), "gather");
    std::vector<int> counts(rank_ == root ? static_cast<std::size_t>(size_) : 0);
    MPI_Gather(&my_count, 1, MPI_INT, counts.data(), 1, MPI_INT, root, MPI_COMM_WORLD);
    std::vector<int> displs(counts.size());
    std::int64_t total = 0;
    for (std::size_t p = 0; p < counts.size(); ++p) {
      displs[p] = mpi_count(total, "gather");
      total += counts[p];
    }
    std::vector<std::byte> all(static_cast<std::size_t>(total));
    MPI_Gatherv(mine.data(), my_count, MPI_BYTE, all.data(), counts.data(), displs.data(), MPI_BYTE, root,
                MPI_COMM_WORLD);
    std::vector<std::vector<std::byte>> out;
    for (std::size_t p = 0; p < counts.size(); ++p)
      out.emplace_back(all.begin() + displs[p], all.begin() + displs[p] + counts[p]);
    return out;
  }

  void all_to_allv(const void* send, const std::vector<std::int64_t>& send_bytes, void* recv,
                   const std::vector<std::int64_t>& recv_bytes, int channel) override {
    MOESIM_CHECK(static_cast<int>(send_bytes.size()) == size_ && static_cast<int>(recv_bytes.size()) == size_,
                 "all_to_allv needs one count per process");
    std::vector<int> sc, sd, rc, rd;
    std::int64_t so = 0, ro = 0;
    for (int p = 0; p < size_; ++p) {
      sc.push_back(mpi_count(send_bytes[static_cast<std::size_t>(p)], "all_to_allv"));
      sd.push_back(mpi_count(so, "all_to_allv"));
      so += send_bytes[static_cast<std::size_t>(p)];
      rc.push_back(mpi_count(recv_bytes[static_cast<std::size_t>(p)], "all_to_allv"));
      rd.push_back(mpi_count(ro, "all_to_allv"));
      ro += recv_bytes[static_cast<std::size_t>(p)];
    }
    MPI_Alltoallv(send, sc.data(), sd.data(), MPI_BYTE, recv, rc.data(), rd.data(), MPI_BYTE, channel_comm(channel));
  }

  [[noreturn]] void abort(int exit_code) override {
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);  // MPI_Abort does not return; this keeps [[noreturn]] true if it did
  }

 private:
  // Created on first use: every process issues the same collectives in the same order, so the
  // MPI_Comm_dup (collective over the world) happens at the same point everywhere.
  MPI_Comm channel_comm(int channel) {
    auto it = channels_.find(channel);
    if (it != channels_.end()) return it->second;
    MPI_Comm comm = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    return channels_.emplace(channel, comm).first->second;
  }

  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  std::map<int, MPI_Comm> channels_;
};

}  // namespace

}  // namespace moesim::runtime

// What process_group.cc looks up in the loaded plugin (C linkage: an unmangled name). Called once
// per process; MPI_Init runs here, MPI_Finalize when the returned world is destroyed.
extern "C" moesim::runtime::ProcessGroup* moesim_mpi_world_create() { return new moesim::runtime::MpiWorld(); }
