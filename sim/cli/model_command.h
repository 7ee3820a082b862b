// `moesim model --model FILE [--tp N --pp N --ep N --dp N --zero S] [--json FILE]`: what a model
// file describes (layer pattern, attention, MoE layer, embeddings), its parameter counts per block
// against the counts its publication gives, its training FLOPs per token, and the model states
// each GPU of each pipeline stage holds under the layout (docs/models.md). A model file without an
// architecture section describes one MoE layer only: the command refuses it, naming the file.
#pragma once

#include <iosfwd>
#include <string>

#include "sim/memory/model_states.h"

namespace moesim::cli {

struct ModelArgs {
  std::string model_path;
  std::string json_path;  // "" none, "-" stdout (then no text)
  TrainingLayout layout;  // model states per GPU under it (default: one GPU)
};

int run_model(const ModelArgs& args, std::ostream& out);

}  // namespace moesim::cli
