// `moesim model --model FILE [--json FILE]`: what a model file describes (layer pattern,
// attention, MoE layer, embeddings) and its parameter counts per block, against the counts its
// publication gives (docs/models.md). A model file without an architecture section describes one
// MoE layer only: the command refuses it, naming the file.
#pragma once

#include <iosfwd>
#include <string>

namespace moesim::cli {

struct ModelArgs {
  std::string model_path;
  std::string json_path;  // "" none, "-" stdout (then no text)
};

int run_model(const ModelArgs& args, std::ostream& out);

}  // namespace moesim::cli
