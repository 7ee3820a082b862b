#include "runtime/exec/race_detector.h"

#include <algorithm>

#include "sim/core/error.h"

namespace moesim::runtime {

void RaceDetector::add_stream() { clocks_.emplace_back(); }

void RaceDetector::add_block(const void* base, std::int64_t bytes, std::string what, std::int64_t guard) {
  Block b;
  b.bytes = bytes;
  b.guard = guard;
  b.what = std::move(what);
  if (bytes > 0) b.segments.emplace(0, Segment{bytes, Epoch{}, {}});
  blocks_[static_cast<const char*>(base)] = std::move(b);
}

void RaceDetector::remove_block(const void* base) { blocks_.erase(static_cast<const char*>(base)); }

std::int64_t RaceDetector::known(const Clock& c, int actor) const {
  return static_cast<std::size_t>(actor) < c.size() ? c[static_cast<std::size_t>(actor)] : 0;
}

bool RaceDetector::ordered(const Epoch& earlier, int actor) const {
  return earlier.actor < 0 || earlier.actor == actor ||
         known(clocks_[static_cast<std::size_t>(actor)], earlier.actor) >= earlier.time;
}

std::string RaceDetector::describe(const Epoch& e) const {
  return std::string(e.op) + (e.actor == 0 ? " on the host" : " on stream " + std::to_string(e.actor - 1));
}

void RaceDetector::check(const Block& block, std::int64_t at, std::int64_t end, const Epoch& earlier,
                         const Epoch& now, Access kind, const char* earlier_kind) const {
  if (ordered(earlier, now.actor)) return;
  throw InternalError("data race on " + block.what + ", bytes [" + std::to_string(at) + ", " + std::to_string(end) +
                      "): " + describe(now) + (kind == Access::kWrite ? " writes" : " reads") + " them and " +
                      describe(earlier) + " " + earlier_kind +
                      " them, and no stream order, event or synchronize orders the two");
}

std::map<std::int64_t, RaceDetector::Segment>::iterator RaceDetector::split(Block& block, std::int64_t at) {
  auto it = block.segments.upper_bound(at);
  if (it == block.segments.begin()) return it;  // an empty block: no segments
  --it;
  if (it->first == at) return it;
  if (at >= it->second.end) return std::next(it);  // at == block.bytes
  Segment tail = it->second;
  it->second.end = at;
  return block.segments.emplace_hint(std::next(it), at, std::move(tail));
}

void RaceDetector::touch(int actor, const char* op, const void* data, std::int64_t bytes, Access kind) {
  if (bytes <= 0 || blocks_.empty()) return;
  const char* p = static_cast<const char*>(data);
  auto b = blocks_.upper_bound(p);
  if (b == blocks_.begin()) return;  // not device memory the detector knows
  --b;
  Block& block = b->second;
  const std::int64_t at = p - b->first;
  if (at >= block.bytes + block.guard) return;  // past the allocation and its guard: other memory
  if (at + bytes > block.bytes)
    throw InternalError(std::string(op) + " accesses bytes [" + std::to_string(at) + ", " + std::to_string(at + bytes) +
                        ") of " + block.what + ", which has " + std::to_string(block.bytes));
  const Epoch now{actor, known(clocks_[static_cast<std::size_t>(actor)], actor), op};
  auto it = split(block, at);
  const auto last = split(block, at + bytes);
  for (; it != last; ++it) {
    Segment& s = it->second;
    if (uninitialized_reads_ && kind == Access::kRead && s.write.actor < 0)
      throw InternalError(std::string(op) + " reads bytes [" + std::to_string(it->first) + ", " +
                          std::to_string(s.end) + ") of " + block.what + ", which nothing has written");
    check(block, it->first, s.end, s.write, now, kind, "writes");
    if (kind == Access::kWrite) {
      for (const Epoch& r : s.reads) check(block, it->first, s.end, r, now, kind, "reads");
      s.write = now;
      s.reads.clear();
    } else {
      auto same = std::find_if(s.reads.begin(), s.reads.end(), [&](const Epoch& r) { return r.actor == actor; });
      if (same != s.reads.end())
        *same = now;
      else
        s.reads.push_back(now);
    }
  }
}

void RaceDetector::begin_op(int stream, const char* op) {
  MOESIM_CHECK(stream >= 0 && static_cast<std::size_t>(stream) + 1 < clocks_.size(),
               "race detector: unknown stream " + std::to_string(stream));
  current_actor_ = stream + 1;
  current_op_ = op;
  Clock& c = clocks_[static_cast<std::size_t>(current_actor_)];
  if (c.size() <= static_cast<std::size_t>(current_actor_)) c.resize(static_cast<std::size_t>(current_actor_) + 1, 0);
  ++c[static_cast<std::size_t>(current_actor_)];
}

void RaceDetector::access(const void* data, std::int64_t bytes, Access kind) {
  MOESIM_CHECK(current_actor_ > 0, "race detector: an access outside an operation");
  touch(current_actor_, current_op_, data, bytes, kind);
}

void RaceDetector::access_rows(const void* data, std::int64_t pitch, std::int64_t width, std::int64_t rows,
                               Access kind) {
  if (rows <= 0 || width <= 0) return;
  if (pitch == width) {
    access(data, width * rows, kind);
    return;
  }
  for (std::int64_t r = 0; r < rows; ++r) access(static_cast<const char*>(data) + r * pitch, width, kind);
}

void RaceDetector::host_access(const char* op, const void* data, std::int64_t bytes, Access kind) {
  Clock& host = clocks_[0];
  if (host.empty()) host.resize(1, 0);
  ++host[0];
  touch(0, op, data, bytes, kind);
  // The access blocks the host until it is done, so whatever any stream is given later follows it.
  for (std::size_t a = 1; a < clocks_.size(); ++a) {
    Clock& c = clocks_[a];
    if (c.empty()) c.resize(1, 0);
    c[0] = std::max(c[0], clocks_[0][0]);
  }
}

void RaceDetector::record(int event, int stream) {
  MOESIM_CHECK(event >= 0 && stream >= 0 && static_cast<std::size_t>(stream) + 1 < clocks_.size(),
               "race detector: unknown event or stream");
  if (events_.size() <= static_cast<std::size_t>(event)) events_.resize(static_cast<std::size_t>(event) + 1);
  events_[static_cast<std::size_t>(event)] = clocks_[static_cast<std::size_t>(stream) + 1];
}

void RaceDetector::wait(int stream, int event) {
  MOESIM_CHECK(static_cast<std::size_t>(event) < events_.size() && static_cast<std::size_t>(stream) + 1 < clocks_.size(),
               "race detector: wait on an event never recorded");
  Clock& c = clocks_[static_cast<std::size_t>(stream) + 1];
  const Clock& e = events_[static_cast<std::size_t>(event)];
  if (c.size() < e.size()) c.resize(e.size(), 0);
  for (std::size_t i = 0; i < e.size(); ++i) c[i] = std::max(c[i], e[i]);
}

void RaceDetector::synchronize() {
  Clock all;
  for (const Clock& c : clocks_) {
    if (all.size() < c.size()) all.resize(c.size(), 0);
    for (std::size_t i = 0; i < c.size(); ++i) all[i] = std::max(all[i], c[i]);
  }
  for (Clock& c : clocks_) c = all;
}

}  // namespace moesim::runtime
