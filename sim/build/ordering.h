// The ordering policy (run.order, docs/concepts.md): in which order a pass processes its chunks,
// in which order it issues their all-to-alls and on which streams. A block asks it for a pass's
// CommOrder and emits its collectives in that order; since emission order is stream order
// (emitter.h), that is the whole schedule.
//
// Each chunk has two all-to-alls per pass: forward the dispatch (first) and the combine (second);
// backward the combine of the gradients (first) and their dispatch back (second).
//   sequential  first(c0) second(c0) first(c1) second(c1) ... on one stream;
//   mpipemoe    forward: every dispatch on comm.dispatch, every combine on comm.combine;
//               backward: first(c0) | first(c1) second(c0) | ... | second(c_last), one stream;
//   fastermoe   every first, then every second, on one stream; with memory reuse the firsts run
//               at most 2 * slots + 1 ahead of the seconds (Ordering::pass_order);
//   tutel       interleaved as mpipemoe's backward, the backward's chunks in reverse order.
// With BuildOptions::single_comm_stream every collective is on comm.dispatch and mpipemoe's
// forward issues as fastermoe's.
#pragma once

#include <utility>
#include <vector>

#include "sim/graph/task.h"
#include "sim/spec/types.h"

namespace moesim {

// Chunk processing order of a pass and the issue order of its all-to-alls.
struct CommOrder {
  // (is_second, chunk) in issue order.
  std::vector<std::pair<bool, int>> issue;
  StreamClass first_stream = StreamClass::kCommDispatch;
  StreamClass second_stream = StreamClass::kCommDispatch;
  std::vector<int> compute_chunks;

  // First and last chunk of one side (second = false / true) in issue order.
  std::pair<int, int> first_last(bool second) const;
  // Processing position of each chunk (its sequence position in the slot pools).
  std::vector<std::size_t> positions() const;
};

class Ordering {
 public:
  // `reuse`: a memory-reuse strategy bounds the chunks in flight by `slots` buffer slots.
  Ordering(OrderPolicy policy, int chunks, int slots, bool reuse, bool single_comm_stream)
      : policy_(policy), chunks_(chunks), slots_(slots), reuse_(reuse), single_comm_stream_(single_comm_stream) {}

  CommOrder pass_order(Pass pass) const;
  bool single_comm_stream() const { return single_comm_stream_; }
  // The stream of a layer-wide collective beside the all-to-alls (the shared experts' all-reduce):
  // comm.combine, which the backward and the other orders' forward leave idle, or the one channel.
  StreamClass side_stream() const {
    return single_comm_stream_ ? StreamClass::kCommDispatch : StreamClass::kCommCombine;
  }

 private:
  OrderPolicy policy_;
  int chunks_;
  int slots_;
  bool reuse_;
  bool single_comm_stream_;
};

}  // namespace moesim
