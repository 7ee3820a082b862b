#include "sim/driver/nccl_tests_replay.h"

namespace moesim {

std::optional<CollectiveOp> collective_of_nccl_test(const std::string& test) {
  if (test == "alltoall_perf") return CollectiveOp::kAllToAll;
  if (test == "all_reduce_perf") return CollectiveOp::kAllReduce;
  if (test == "all_gather_perf") return CollectiveOp::kAllGather;
  if (test == "reduce_scatter_perf") return CollectiveOp::kReduceScatter;
  return std::nullopt;
}

double nccl_tests_bus_factor(CollectiveOp op, int ranks) {
  if (ranks < 1) return 0.0;
  const double ring = static_cast<double>(ranks - 1) / ranks;
  return op == CollectiveOp::kAllReduce ? 2.0 * ring : ring;
}

TimeNs simulate_nccl_tests_row(const CollectiveModel& model, CollectiveOp op, std::int64_t size_bytes,
                               const std::vector<int>& group) {
  const auto n = static_cast<std::int64_t>(group.size());
  const std::int64_t per_peer = (size_bytes + n - 1) / n;
  return model.isolated_duration(CollectiveWork{op, 0, per_peer}, group);
}

}  // namespace moesim
