// Data-race detection for the host emulation. HostDevice runs every operation at once, in issue
// order, so a missing event wait gives right results there and wrong ones on a GPU, where streams
// run concurrently. The detector reasons about the GPU instead: it keeps a vector clock per actor
// (the host thread and each stream), advanced by stream order, event record / wait pairs and
// device-wide synchronizes, and checks every byte range an operation reads or writes against the
// earlier accesses to the same bytes. Two accesses conflict when they overlap, at least one
// writes, and neither happens-before the other: then some schedule the streams and events allow
// runs them in the other order or at once, and the detector throws InternalError naming both
// operations, their streams and the bytes. It also throws for a range that runs past the end of
// an allocation (or starts in the guard after it). Memory it was not told about (host vectors) is
// not checked.
//
// Shadow state per allocation: a partition of its bytes into segments, each with its last write
// and the reads since (one per actor); segments split where accesses begin and end, so the cost of
// an access is logarithmic in the segments plus those it covers.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace moesim::runtime {

class RaceDetector {
 public:
  enum class Access { kRead, kWrite };

  void add_stream();  // streams are numbered 0, 1, ... in the order they are added
  // An allocation of `bytes`, followed by `guard` bytes that belong to it but no access may touch:
  // an access starting in the guard is out of bounds, not an access to unknown memory.
  void add_block(const void* base, std::int64_t bytes, std::string what, std::int64_t guard = 0);
  void remove_block(const void* base);

  // One operation on `stream`: a new epoch of the stream; the accesses that follow are its.
  void begin_op(int stream, const char* op);
  // An access of the current operation (writes also order against earlier reads).
  void access(const void* data, std::int64_t bytes, Access kind);
  // `rows` ranges of `width` bytes, `pitch` bytes apart (coalesced when contiguous).
  void access_rows(const void* data, std::int64_t pitch, std::int64_t width, std::int64_t rows, Access kind);
  // A blocking access by the host thread (a download): ordered after stream work only by
  // synchronize(), and before all work issued after it.
  void host_access(const char* op, const void* data, std::int64_t bytes, Access kind);

  // Reads of bytes that nothing has written since they were allocated (the host emulation's
  // counterpart of compute-sanitizer's initcheck): off by default; on, such a read throws
  // InternalError naming the operation, the allocation and the bytes. Uploads and fills count as
  // writes, so only memory no operation produced is reported.
  void check_uninitialized_reads(bool on) { uninitialized_reads_ = on; }

  void record(int event, int stream);
  void wait(int stream, int event);
  // Every operation issued so far happens-before anything issued later, by any actor.
  void synchronize();

 private:
  struct Epoch {
    int actor = -1;  // 0: the host thread, s + 1: stream s
    std::int64_t time = 0;
    const char* op = nullptr;
  };
  struct Segment {
    std::int64_t end = 0;
    Epoch write;               // actor -1: never written
    std::vector<Epoch> reads;  // since the write, at most one per actor
  };
  struct Block {
    std::int64_t bytes = 0;
    std::int64_t guard = 0;
    std::string what;
    std::map<std::int64_t, Segment> segments;  // by start offset, covering [0, bytes)
  };
  using Clock = std::vector<std::int64_t>;

  std::int64_t known(const Clock& c, int actor) const;
  bool ordered(const Epoch& earlier, int actor) const;
  std::string describe(const Epoch& e) const;
  void check(const Block& block, std::int64_t at, std::int64_t end, const Epoch& earlier, const Epoch& now,
             Access kind, const char* earlier_kind) const;
  std::map<std::int64_t, Segment>::iterator split(Block& block, std::int64_t at);
  void touch(int actor, const char* op, const void* data, std::int64_t bytes, Access kind);

  std::vector<Clock> clocks_ = {Clock(1, 0)};  // per actor
  std::vector<Clock> events_;
  std::map<const char*, Block> blocks_;        // by base address
  int current_actor_ = -1;
  bool uninitialized_reads_ = false;
  const char* current_op_ = nullptr;
};

}  // namespace moesim::runtime
