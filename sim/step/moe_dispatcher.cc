#include "sim/step/moe_dispatcher.h"

#include <algorithm>

#include "sim/step/moe_mlp.h"

namespace moesim {

namespace {
// torch.long: the dispatcher's counts and split sizes.
constexpr std::int64_t kCountBytes = 8;
}  // namespace

bool MoeDispatcher::active(int stage) const { return e_.shape().expert_group(stage).size() > 1; }

std::vector<int> MoeDispatcher::tensor_expert_group(int stage) const {
  std::vector<int> out;
  for (int member : e_.shape().expert_group(stage))
    for (int t = 0; t < e_.shape().layout.expert_tp(); ++t) out.push_back(member + t);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::int64_t> MoeDispatcher::split_size_copies(int stage) const {
  const auto ep = static_cast<std::int64_t>(e_.shape().expert_group(stage).size());
  // tokens_per_expert (the local experts'), input_splits, output_splits, output_splits_tp.
  return {d_.local_experts * kCountBytes, ep * kCountBytes, ep * kCountBytes, e_.shape().layout.expert_tp() * kCountBytes};
}

std::optional<TaskIndex> MoeDispatcher::routing_metadata(Chain& chain, int layer, const std::string& prefix) {
  if (!active(chain.stage)) return std::nullopt;
  const std::string stage = prefix.empty() ? "dispatcher" : "recompute";
  e_.collective(chain, name(layer, Pass::kForward, prefix + "counts.allgather", stage), StreamClass::kCommDispatch,
                CollectiveOp::kAllGather, tensor_expert_group(chain.stage), d_.experts * kCountBytes);
  // The copies run on their own stream after the counts; the chain (the permutation) goes on.
  Chain copies = chain;
  const std::vector<std::int64_t> bytes = split_size_copies(chain.stage);
  for (std::size_t i = 0; i < bytes.size(); ++i)
    e_.copy(copies, name(layer, Pass::kForward, prefix + "splits.d2h" + std::to_string(i), stage),
            CopyWork{bytes[i], CopyDirection::kDeviceToHost});
  // The dispatcher sizes the all-to-alls' buffers from them on the host (a blocking .cpu()).
  if (copies.last) e_.host_reads(*copies.last);
  return copies.last;
}

void MoeDispatcher::probs_all_to_all(Chain& chain, int layer, Pass pass, const std::string& what, bool to_experts,
                                     const std::string& prefix, const ChunkRows& rows) {
  // DeepEP's dispatch carries each token's top-k weights with it (a few bytes beside its row).
  if (d_.dispatcher == TokenDispatcher::kDeepEp) return;
  const TaskName task = name(layer, pass, prefix + what + ".probs" + rows.suffix, prefix.empty() ? "a2a" : "recompute");
  const StreamClass stream = to_experts ? StreamClass::kCommDispatch : StreamClass::kCommCombine;
  if (rows.traffic) {
    e_.all_to_allv(chain, task, stream, e_.shape().expert_group(chain.stage), rows.traffic, !to_experts);
    return;
  }
  e_.group_collective(chain, task, stream, CollectiveOp::kAllToAll, e_.shape().expert_group(chain.stage),
                      rows.rows * e_.shape().element_bytes);
}

void MoeDispatcher::sort_chunks(Chain& chain, int layer, Pass pass, const std::string& what, bool probs,
                                const std::string& prefix, const ChunkRows& rows) {
  if (d_.local_experts <= 1 || !active(chain.stage)) return;
  const std::int64_t elems = rows.rows * d_.hidden + (probs ? rows.rows : 0);
  e_.kernel(chain, name(layer, pass, prefix + what + ".sort" + rows.suffix, prefix.empty() ? "router" : "recompute"),
            e_.elementwise(elems, elems));
}

}  // namespace moesim
