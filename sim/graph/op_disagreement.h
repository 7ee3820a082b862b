// The message of a task whose op disagrees with its work (op_agrees in task.h), for the two places
// that refuse one: TaskGraph::add_task and the graph JSON reader.
#pragma once

#include <string>

#include "sim/graph/task.h"

namespace moesim {

// "op 'gemm' disagrees with its elementwise work (its op would be 'elementwise' or another
// memory-bound kernel)".
std::string op_disagreement(Op op, const Work& work);

}  // namespace moesim
