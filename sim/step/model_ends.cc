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
  e_.group_collective(chain, name, StreamClass::kCommDispatch, op, group, whole);
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

void ModelEnds::head_forward(Chain& chain, const std::vector<BufferId>& allocates, const std::string& where) {
  const std::int64_t region = d_.region_tokens * d_.hidden;
  TaskName norm = head(where, Pass::kForward, "norm");
  norm.allocates = allocates;
  e_.kernel(chain, norm, e_.elementwise(region, region));
  const auto group = e_.shape().tensor_group(chain.stage);
  const auto n = static_cast<std::int64_t>(group.size());
  const std::int64_t whole = d_.tokens * d_.hidden * e_.shape().element_bytes;
  if (d_.sequence_parallel) {
    TaskName gather = head(where, Pass::kForward, "tp.allgather");
    gather.stage = "tp";
    e_.group_collective(chain, gather, StreamClass::kCommDispatch, CollectiveOp::kAllGather, group, whole);
  }
  e_.kernel(chain, head(where, Pass::kForward, "logits"), e_.storage_gemm(1, d_.tokens, vocab_per_rank_, d_.hidden));
  // Cross-entropy over the rank's vocabulary slice: max, exponentials and their sum, the loss.
  const std::int64_t logits = d_.tokens * vocab_per_rank_;
  e_.kernel(chain, head(where, Pass::kForward, "loss"), e_.elementwise(2 * logits, logits));
  for (const char* what : {"tp.max", "tp.sum", "tp.target"}) {
    TaskName reduce = head(where, Pass::kForward, what);
    reduce.stage = "tp";
    e_.collective(chain, reduce, StreamClass::kCommDispatch, CollectiveOp::kAllReduce, group, d_.tokens * 4 / n + 1);
  }
}

void ModelEnds::head_backward(Chain& chain, BackwardPart part, const std::vector<BufferId>& frees,
                              const std::string& where) {
  const std::int64_t logits = d_.tokens * vocab_per_rank_;
  const std::int64_t region = d_.region_tokens * d_.hidden;
  if (part != BackwardPart::kWeight) {
    e_.kernel(chain, head(where, Pass::kBackward, "loss"), e_.elementwise(logits, logits));
    e_.kernel(chain, head(where, Pass::kBackward, "logits.dgrad"), e_.storage_gemm(1, d_.tokens, d_.hidden, vocab_per_rank_));
  }
  if (part != BackwardPart::kInput) {
    TaskName wgrad = head(where, Pass::kBackward, "logits.wgrad");
    if (part == BackwardPart::kWeight) wgrad.frees = frees;
    e_.kernel(chain, wgrad, e_.storage_gemm(1, d_.hidden, vocab_per_rank_, d_.tokens), part == BackwardPart::kAll);
  }
  if (part == BackwardPart::kWeight) return;
  TaskName reduce = head(where, Pass::kBackward, d_.sequence_parallel ? "tp.reducescatter" : "tp.allreduce");
  reduce.stage = "tp";
  const auto group = e_.shape().tensor_group(chain.stage);
  const std::int64_t whole = d_.tokens * d_.hidden * e_.shape().element_bytes;
  e_.group_collective(chain, reduce, StreamClass::kCommDispatch,
                      d_.sequence_parallel ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce, group, whole);
  TaskName norm = head(where, Pass::kBackward, "norm");
  if (part == BackwardPart::kAll) norm.frees = frees;
  e_.kernel(chain, norm, e_.elementwise(3 * region, region));
}

void ModelEnds::mtp_input_forward(Chain& chain, int depth, const std::vector<BufferId>& allocates) {
  const std::string where = "mtp" + std::to_string(depth);
  const std::int64_t region = d_.region_tokens * d_.hidden;
  TaskName lookup{where, last_layer_, Pass::kForward, "embed.lookup", "mtp"};
  lookup.allocates = allocates;
  e_.kernel(chain, lookup, e_.elementwise(d_.tokens * d_.hidden, d_.tokens * d_.hidden));
  TaskName reduce{where, last_layer_, Pass::kForward, "embed.tp.reduce", "tp"};
  tp_reduce(chain, reduce, true);
  e_.kernel(chain, {where, last_layer_, Pass::kForward, "norms", "mtp"}, e_.elementwise(2 * region, 2 * region));
  if (d_.sequence_parallel) {
    const auto group = e_.shape().tensor_group(chain.stage);
    e_.group_collective(chain, {where, last_layer_, Pass::kForward, "tp.allgather", "tp"}, StreamClass::kCommDispatch,
                        CollectiveOp::kAllGather, group, 2 * d_.tokens * d_.hidden * e_.shape().element_bytes);
  }
  // The projection is replicated on the tensor-parallel ranks in this accounting (its 2h x h
  // weights are column-parallel in Megatron-Core: h / tp columns, then gathered).
  const int tp = e_.shape().layout.tp;
  e_.kernel(chain, {where, last_layer_, Pass::kForward, "proj", "mtp"}, e_.storage_gemm(1, d_.tokens, d_.hidden / tp, 2 * d_.hidden));
}

void ModelEnds::mtp_input_backward(Chain& chain, int depth, BackwardPart part, const std::vector<BufferId>& frees) {
  const std::string where = "mtp" + std::to_string(depth);
  const int tp = e_.shape().layout.tp;
  const std::int64_t region = d_.region_tokens * d_.hidden;
  if (part != BackwardPart::kWeight)
    e_.kernel(chain, {where, last_layer_, Pass::kBackward, "proj.dgrad", "mtp"},
              e_.storage_gemm(1, d_.tokens, 2 * d_.hidden, d_.hidden / tp));
  if (part != BackwardPart::kInput) {
    TaskName wgrad{where, last_layer_, Pass::kBackward, "proj.wgrad", "mtp"};
    if (part == BackwardPart::kWeight) wgrad.frees = frees;
    e_.kernel(chain, wgrad, e_.storage_gemm(1, 2 * d_.hidden, d_.hidden / tp, d_.tokens), part == BackwardPart::kAll);
  }
  if (part == BackwardPart::kWeight) return;
  TaskName reduce{where, last_layer_, Pass::kBackward, "tp.reduce", "tp"};
  tp_reduce(chain, reduce, true);
  TaskName norms{where, last_layer_, Pass::kBackward, "norms", "mtp"};
  if (part == BackwardPart::kAll) norms.frees = frees;
  e_.kernel(chain, norms, e_.elementwise(6 * region, 2 * region));
}

}  // namespace moesim
