// The timeline: a compact, line-oriented text of a simulated step that diffs well.
//
// It pins behaviour (tests/golden/): one line per task with its start and end in integer
// nanoseconds, the rank(s) and stream it ran on, then each simulated rank's peak memory. Lines are
// sorted by (start, end, ranks, stream, id) rather than by task index, so a builder that emits the
// same tasks in another order writes the same bytes; only a change in what is simulated shows.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "sim/graph/trace.h"
#include "sim/graph/task_graph.h"
#include "sim/memory/memory_tracker.h"

namespace moesim {

// Ranks as a compact list: consecutive runs as "a-b", others comma-separated ("0-7", "0,8,16").
std::string compact_rank_list(const std::vector<int>& ranks);

// Writes the timeline text (format version 1, documented in docs/golden.md).
void write_timeline(std::ostream& out, const TaskGraph& graph, const Trace& trace,
                    const std::vector<RankMemory>& memory);

}  // namespace moesim
