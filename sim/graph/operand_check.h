// Operand accesses against the graph's order (issue 21 item 2): whether every bound read and write
// (Task::reads, Task::writes) happens while its buffer is allocated and whether every two
// accesses to the same bytes, one of them a write, are ordered by a path of the graph. The memory
// accounting trusts the builder's allocations and reuse edges; this check proves them from what
// the tasks say they touch: a slot overwritten before its last reader ran, or read after the task
// that frees it, is a violation. Tasks that no path orders may run in either order or at once
// (on a GPU as in the simulation), so a path is required, not the order of one schedule.
//
// Cost: a bitset of ancestors per task, num_tasks^2 / 8 bytes; graphs above kMaxOperandCheckTasks
// tasks are refused (InputError). For tests and `moesim graph export`'s consumers, not the engine.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "sim/graph/task_graph.h"

namespace moesim {

inline constexpr std::size_t kMaxOperandCheckTasks = 40'000;  // 200 MB of bitsets

// The violations, each one line naming both tasks (or the task and the buffer's allocating or
// freeing task), the buffer and the bytes; the first `limit` (at least 1) of them, the search
// stopping at the buffer where they were found. Empty when the graph is sound. Throws
// InternalError for a limit of 0.
std::vector<std::string> operand_violations(const TaskGraph& graph, std::size_t limit = 20);

}  // namespace moesim
