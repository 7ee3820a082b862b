#include "sim/step/model_ends.h"

namespace moesim {

void ModelEnds::tp_reduce(Chain& chain, const TaskName& name, bool forward) {
  // Forward: the partial sums all-reduced, or reduce-scattered into the sequence-parallel region.
  // Backward of a gather into the region: its reduce-scatter's transpose, an all-gather.
  const std::int64_t whole = d_.tokens * d_.hidden * e_.shape().element_bytes;
  const auto group = e_.shape().tensor_group(chain.stage);
  const CollectiveOp op = !d_.sequence_parallel ? CollectiveOp::kAllReduce
                          : forward              ? CollectiveOp::kReduceScatter
                                                 : CollectiveOp::kAllGather;
  e_.collective(chain, name, StreamClass::kCommDispatch, op, group, whole / static_cast<std::int64_t>(group.size()));
}

void ModelEnds::embedding_forward(Chain& chain, const std::vector<BufferId>& allocates) {
  TaskName lookup = embed(Pass::kForward, "lookup");
  lookup.allocates = allocates;
  e_.kernel(chain, lookup, e_.elementwise(d_.tokens * d_.hidden, d_.tokens * d_.hidden));
  TaskName reduce = embed(Pass::kForward, "tp.reduce");
  reduce.stage = "tp";
  tp_reduce(chain, reduce, true);
  if (d_.dropout) {
    const std::int64_t region = d_.region_tokens * d_.hidden;
    e_.kernel(chain, embed(Pass::kForward, "dropout"), e_.elementwise(region, region, region));
  }
}

void ModelEnds::embedding_backward(Chain& chain, const std::vector<BufferId>& frees) {
  if (d_.sequence_parallel) {
    TaskName gather = embed(Pass::kBackward, "tp.allgather");
    gather.stage = "tp";
    tp_reduce(chain, gather, false);
  }
  // The gradient rows added into the rank's slice of the table.
  TaskName scatter = embed(Pass::kBackward, "wgrad");
  scatter.frees = frees;
  e_.kernel(chain, scatter, e_.elementwise(2 * d_.tokens * d_.hidden, d_.tokens * d_.hidden));
}

void ModelEnds::head_forward(Chain& chain, const std::vector<BufferId>& allocates) {
  const std::int64_t region = d_.region_tokens * d_.hidden;
  TaskName norm = head(Pass::kForward, "norm");
  norm.allocates = allocates;
  e_.kernel(chain, norm, e_.elementwise(region, region));
  const auto group = e_.shape().tensor_group(chain.stage);
  const auto n = static_cast<std::int64_t>(group.size());
  const std::int64_t whole = d_.tokens * d_.hidden * e_.shape().element_bytes;
  if (d_.sequence_parallel) {
    TaskName gather = head(Pass::kForward, "tp.allgather");
    gather.stage = "tp";
    e_.collective(chain, gather, StreamClass::kCommDispatch, CollectiveOp::kAllGather, group, whole / n);
  }
  e_.kernel(chain, head(Pass::kForward, "logits"), e_.gemm(1, d_.tokens, vocab_per_rank_, d_.hidden));
  // Cross-entropy over the rank's vocabulary slice: max, exponentials and their sum, the loss.
  const std::int64_t logits = d_.tokens * vocab_per_rank_;
  e_.kernel(chain, head(Pass::kForward, "loss"), e_.elementwise(2 * logits, logits));
  for (const char* what : {"tp.max", "tp.sum", "tp.target"}) {
    TaskName reduce = head(Pass::kForward, what);
    reduce.stage = "tp";
    e_.collective(chain, reduce, StreamClass::kCommDispatch, CollectiveOp::kAllReduce, group, d_.tokens * 4 / n + 1);
  }
}

void ModelEnds::head_backward(Chain& chain, BackwardPart part, const std::vector<BufferId>& frees) {
  const std::int64_t logits = d_.tokens * vocab_per_rank_;
  const std::int64_t region = d_.region_tokens * d_.hidden;
  if (part != BackwardPart::kWeight) {
    e_.kernel(chain, head(Pass::kBackward, "loss"), e_.elementwise(logits, logits));
    e_.kernel(chain, head(Pass::kBackward, "logits.dgrad"), e_.gemm(1, d_.tokens, d_.hidden, vocab_per_rank_));
  }
  if (part != BackwardPart::kInput) {
    TaskName wgrad = head(Pass::kBackward, "logits.wgrad");
    if (part == BackwardPart::kWeight) wgrad.frees = frees;
    e_.kernel(chain, wgrad, e_.gemm(1, d_.hidden, vocab_per_rank_, d_.tokens), part == BackwardPart::kAll);
  }
  if (part == BackwardPart::kWeight) return;
  TaskName reduce = head(Pass::kBackward, d_.sequence_parallel ? "tp.reducescatter" : "tp.allreduce");
  reduce.stage = "tp";
  const auto group = e_.shape().tensor_group(chain.stage);
  const std::int64_t whole = d_.tokens * d_.hidden * e_.shape().element_bytes;
  e_.collective(chain, reduce, StreamClass::kCommDispatch,
                d_.sequence_parallel ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce, group,
                whole / static_cast<std::int64_t>(group.size()));
  TaskName norm = head(Pass::kBackward, "norm");
  if (part == BackwardPart::kAll) norm.frees = frees;
  e_.kernel(chain, norm, e_.elementwise(3 * region, region));
}

}  // namespace moesim
