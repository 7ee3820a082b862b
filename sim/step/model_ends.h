// The tasks of the model's two ends for one microbatch: the input embedding (first model part)
// and the output head with the loss (last model part), vocabulary-parallel over the
// tensor-parallel ranks as in Megatron-LM: each rank holds V/tp rows of the embedding and columns
// of the output layer; the embedding's partial outputs are all-reduced (reduce-scattered with
// sequence parallelism); the cross-entropy reduces its row maximum, its sum of exponentials and
// the target logits over the ranks (three all-reduces of one fp32 value per token).
#pragma once

#include <vector>

#include "sim/step/step_emitter.h"
#include "sim/step/transformer_layer.h"

namespace moesim {

class ModelEnds {
 public:
  ModelEnds(StepEmitter& emitter, const TransformerDims& dims, std::int64_t vocab, int num_layers)
      : e_(emitter), d_(dims), vocab_per_rank_(vocab / emitter.shape().layout.tp), last_layer_(num_layers - 1) {}

  void embedding_forward(Chain& chain, const std::vector<BufferId>& allocates);
  void embedding_backward(Chain& chain, const std::vector<BufferId>& frees);
  // `where`: "head" for the model's output, "mtp<d>.head" for a multi-token prediction module's.
  void head_forward(Chain& chain, const std::vector<BufferId>& allocates, const std::string& where = "head");
  void head_backward(Chain& chain, BackwardPart part, const std::vector<BufferId>& frees,
                     const std::string& where = "head");
  // A multi-token prediction module's own tasks around its transformer layer (DeepSeek-V3,
  // section 2.2): the shifted tokens' embedding, the two norms, and the projection of their
  // concatenation (2h -> h); and their backward.
  void mtp_input_forward(Chain& chain, int depth, const std::vector<BufferId>& allocates);
  void mtp_input_backward(Chain& chain, int depth, BackwardPart part, const std::vector<BufferId>& frees);

 private:
  TaskName embed(Pass pass, const std::string& what) const { return {"embed", 0, pass, what, "embedding"}; }
  TaskName head(const std::string& where, Pass pass, const std::string& what) const {
    return {where, last_layer_, pass, what, "head"};
  }
  void tp_reduce(Chain& chain, const TaskName& name, bool forward);

  StepEmitter& e_;
  const TransformerDims& d_;
  std::int64_t vocab_per_rank_;
  int last_layer_;
};

}  // namespace moesim
