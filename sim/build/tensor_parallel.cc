#include "sim/build/tensor_parallel.h"

namespace moesim {

Node TensorParallel::gather_after(const Node& a2a, int layer, Pass pass, const std::string& rest, int chunk,
                                  StreamClass stream, const Uses& uses) {
  if (!drops_duplicate_tokens()) return a2a;
  const LayerDims& d = e_.dims();
  const Node gather = e_.group_collective(layer, pass, rest, "tp_gather", chunk, stream, GroupKind::kTensor,
                                          CollectiveOp::kAllGather,
                                          e_.bytes(d.gathered_rows_per_chunk(chunk), d.d_model), uses);
  e_.edge(a2a, gather);
  return gather;
}

Node TensorParallel::reduce_partial_sums(int layer, Pass pass, const std::string& rest, int chunk,
                                         StreamClass stream) {
  if (!active()) return Node{};
  const LayerDims& d = e_.dims();
  return e_.group_collective(layer, pass, rest, "tp_reduce", chunk, stream, GroupKind::kTensor,
                             CollectiveOp::kAllReduce, e_.bytes(d.rows_per_chunk(chunk), d.d_model));
}

void TensorParallel::reduce_tokens(int layer, Pass pass, const std::string& rest, StreamClass stream,
                                   Node& partial) {
  const LayerDims& d = e_.dims();
  const Node reduce = e_.group_collective(layer, pass, rest, "tp_reduce", -1, stream, GroupKind::kTensor,
                                          CollectiveOp::kAllReduce, e_.bytes(d.tokens, d.d_model));
  e_.edge(partial, reduce);
  partial = reduce;
}

}  // namespace moesim
