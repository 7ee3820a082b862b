// Single tasks for the engine and model tests, built by hand.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "sim/graph/task.h"

namespace moesim::testing {

// A task of fixed duration `ns` on `stream` of `rank`.
inline Task host_task(std::string id, int rank, StreamClass stream, TimeNs ns) {
  Task t;
  t.id = std::move(id);
  t.rank = rank;
  t.stream = stream;
  t.work = HostWork{ns};
  return t;
}

// A host <-> device copy of `bytes` on the copy stream of its direction.
inline Task copy_task(std::string id, int rank, CopyDirection direction, std::int64_t bytes) {
  Task t;
  t.id = std::move(id);
  t.rank = rank;
  t.stream = direction == CopyDirection::kDeviceToHost ? StreamClass::kCopyD2H : StreamClass::kCopyH2D;
  t.work = CopyWork{bytes, direction};
  return t;
}

// An all-to-all of `bytes` per peer over `group` (collectives have no single rank).
inline Task all_to_all_task(std::string id, GroupId group, std::int64_t bytes,
                            StreamClass stream = StreamClass::kCommDispatch) {
  Task t;
  t.id = std::move(id);
  t.rank = -1;
  t.stream = stream;
  t.work = CollectiveWork{CollectiveOp::kAllToAll, group, bytes};
  return t;
}

}  // namespace moesim::testing
