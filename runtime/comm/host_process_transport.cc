#include "runtime/comm/host_process_transport.h"

#include <cstddef>
#include <numeric>
#include <string>
#include <vector>

#include "sim/core/error.h"

namespace moesim::runtime {

namespace {

class HostProcessTransport final : public Transport {
 public:
  HostProcessTransport(HostDevice& device, ProcessGroup& group) : device_(device), group_(group) {}

  std::string name() const override { return "host processes (MPI)"; }
  int group_size() const override { return group_.size(); }

  void all_to_all(const std::vector<AllToAllMember>& members, int channel) override {
    const AllToAllMember& m = only_member(members);
    const int n = group_size();
    const BlockLayout& s = m.send_layout;
    const BlockLayout& d = m.recv_layout;
    MOESIM_CHECK(s.piece_bytes == d.piece_bytes && s.pieces == d.pieces, "matching block shapes");
    const std::int64_t block = s.block_bytes();
    std::vector<std::byte> out(static_cast<std::size_t>(block * n)), in(out.size());
    // Peer p's block, piece by piece, packed at p * block (the order NCCL's pieces travel in).
    for (int p = 0; p < n; ++p)
      device_.copy_2d(out.data() + p * block, s.piece_bytes, static_cast<const char*>(m.send) + s.offset(p, 0),
                      s.piece_stride, s.piece_bytes, s.pieces, m.stream);
    const std::vector<std::int64_t> counts(static_cast<std::size_t>(n), block);
    group_.all_to_allv(out.data(), counts, in.data(), counts, channel);
    for (int p = 0; p < n; ++p)
      device_.copy_2d(static_cast<char*>(m.recv) + d.offset(p, 0), d.piece_stride, in.data() + p * block,
                      d.piece_bytes, d.piece_bytes, d.pieces, m.stream);
  }

  void all_to_allv(const std::vector<AllToAllvMember>& members, int channel) override {
    const AllToAllvMember& m = only_member(members);
    MOESIM_CHECK(static_cast<int>(m.send_bytes.size()) == group_size() &&
                     static_cast<int>(m.recv_bytes.size()) == group_size(),
                 "one byte count per rank");
    // Already packed in peer order on both sides; the exchange copies straight between them.
    const auto total = [](const std::vector<std::int64_t>& v) { return std::accumulate(v.begin(), v.end(), std::int64_t{0}); };
    device_.note_transfer(m.stream, "MPI all-to-allv", m.send, total(m.send_bytes), m.recv, total(m.recv_bytes));
    group_.all_to_allv(m.send, m.send_bytes, m.recv, m.recv_bytes, channel);
  }

 private:
  const AllToAllMember& only_member(const std::vector<AllToAllMember>& members) const {
    check_members(members);
    return members[0];
  }
  const AllToAllvMember& only_member(const std::vector<AllToAllvMember>& members) const {
    check_members(members);
    return members[0];
  }
  template <typename Member>
  void check_members(const std::vector<Member>& members) const {
    if (members.size() != 1 || members[0].rank != group_.rank() || members[0].device != &device_)
      throw InternalError("host process transport: each process is exactly one rank (its own), got " +
                          std::to_string(members.size()) + " member(s)");
  }

  HostDevice& device_;
  ProcessGroup& group_;
};

}  // namespace

std::unique_ptr<Transport> make_host_process_transport(HostDevice& device, ProcessGroup& group) {
  return std::make_unique<HostProcessTransport>(device, group);
}

}  // namespace moesim::runtime
