#include "runtime/comm/loopback.h"

#include <string>

#include "sim/core/error.h"

namespace moesim::runtime {

LoopbackTransport::LoopbackTransport(DeviceOps& device, int ranks) : device_(device), ranks_(ranks) {
  if (ranks < 1) throw InputError("loopback transport: at least one rank, got " + std::to_string(ranks));
  for (int r = 0; r < ranks; ++r) {
    arrived_.push_back(device_.create_event(false));
    done_.push_back(device_.create_event(false));
  }
}

template <typename Member, typename CopyBlocks>
void LoopbackTransport::exchange(const std::vector<Member>& members, CopyBlocks copy_blocks) {
  if (static_cast<int>(members.size()) != ranks_)
    throw InputError("loopback all-to-all: every one of the " + std::to_string(ranks_) +
                     " virtual ranks must take part, got " + std::to_string(members.size()));
  for (int r = 0; r < ranks_; ++r) {
    MOESIM_CHECK(members[r].rank == r && members[r].device == &device_, "members in rank order on the device");
    device_.record(arrived_[r], members[r].stream);
  }
  for (int q = 0; q < ranks_; ++q) {
    for (int r = 0; r < ranks_; ++r)
      if (r != q) device_.wait(members[q].stream, arrived_[r]);
    for (int r = 0; r < ranks_; ++r) copy_blocks(members[r], members[q]);
    device_.record(done_[q], members[q].stream);
  }
  for (int r = 0; r < ranks_; ++r)
    for (int q = 0; q < ranks_; ++q)
      if (q != r) device_.wait(members[r].stream, done_[q]);
}

void LoopbackTransport::all_to_all(const std::vector<AllToAllMember>& members, int channel) {
  (void)channel;  // one device: both channels are plain copies on the members' streams
  exchange(members, [&](const AllToAllMember& from, const AllToAllMember& to) {
    const BlockLayout& s = from.send_layout;
    const BlockLayout& d = to.recv_layout;
    MOESIM_CHECK(s.piece_bytes == d.piece_bytes && s.pieces == d.pieces, "matching block shapes");
    const auto* src = static_cast<const char*>(from.send) + s.offset(to.rank, 0);
    auto* dst = static_cast<char*>(to.recv) + d.offset(from.rank, 0);
    if (s.contiguous() && d.contiguous())
      device_.copy(dst, src, s.block_bytes(), to.stream);
    else
      device_.copy_2d(dst, d.piece_stride, src, s.piece_stride, s.piece_bytes, s.pieces, to.stream);
  });
}

void LoopbackTransport::all_to_allv(const std::vector<AllToAllvMember>& members, int channel) {
  (void)channel;
  std::vector<std::vector<std::int64_t>> send, recv;
  for (const AllToAllvMember& m : members) {
    send.push_back(m.send_bytes);
    recv.push_back(m.recv_bytes);
  }
  check_all_to_allv_counts(send, recv);
  exchange(members, [&](const AllToAllvMember& from, const AllToAllvMember& to) {
    const std::int64_t bytes = from.send_bytes[to.rank];
    if (bytes == 0) return;
    const auto* src = static_cast<const char*>(from.send) + displacements(from.send_bytes)[to.rank];
    auto* dst = static_cast<char*>(to.recv) + displacements(to.recv_bytes)[from.rank];
    device_.copy(dst, src, bytes, to.stream);
  });
}

}  // namespace moesim::runtime
