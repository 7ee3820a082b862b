// What nccl-tests measures, in moesim's terms: the collective of each nccl-tests program, the
// simulated time of one row of its output, and the bus bandwidth it prints. Shared by
// `moesim collective --against` and `moesim validate published`, so that both hold a log against
// the same simulation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/core/units.h"
#include "sim/graph/task.h"
#include "sim/net/collective_model.h"

namespace moesim {

// The collective an nccl-tests program measures (alltoall_perf, all_reduce_perf, all_gather_perf,
// reduce_scatter_perf); nullopt for one moesim does not model.
std::optional<CollectiveOp> collective_of_nccl_test(const std::string& test);

// nccl-tests' busbw = algbw x this factor: 2(n-1)/n for all-reduce, (n-1)/n for all-gather,
// reduce-scatter and all-to-all (nccl-tests doc/PERFORMANCE.md). 0 for n < 1.
double nccl_tests_bus_factor(CollectiveOp op, int ranks);

// The simulated out-of-place time of one nccl-tests row: `size_bytes` is nccl-tests' size column
// (the per-rank buffer; all-gather: the gathered output; reduce-scatter: the input). A ring's block,
// or an all-to-all's share per peer, is 1/n of it, rounded up as NCCL pads a ring's last block.
TimeNs simulate_nccl_tests_row(const CollectiveModel& model, CollectiveOp op, std::int64_t size_bytes,
                               const std::vector<int>& group);

}  // namespace moesim
