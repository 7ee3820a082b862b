// Whole-model memory from a simulation of some of the model's MoE layers.
//
// The simulator runs `simulated` MoE layers (RunSpec::num_moe_layers) while the model has
// `model_layers` (ModelSpec::num_layers). The layers not simulated sit below the simulated ones:
// while those run their forward and backward, every lower layer holds its model states and the
// activations its backward will read. All layers are alike (one routing for every layer), so with
//   states = the rank's resident device bytes / simulated   (parameters, gradients, optimizer)
//   kept   = device bytes of the lowest simulated layer's buffers that a forward task allocates and
//            one of its backward tasks frees (its input, what it saved, slots, stashes)
// the whole model's peak on a rank is
//   peak = simulated peak + (model_layers - simulated) * (states + kept).
// Nothing the lower layers hold is freed while the simulated layers run, and once the backward
// reaches them the layers above have released theirs, so the peak of the whole model is in the
// simulated window. tests/sim/memory/model_memory_test.cc checks the formula against simulating
// all the layers, for every memory strategy and checkpointing mode.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/graph/task_graph.h"
#include "sim/memory/memory_tracker.h"
#include "sim/spec/model_spec.h"

namespace moesim {

struct ModelMemory {
  int rank = 0;
  int model_layers = 1;
  int simulated_layers = 1;
  std::int64_t simulated_peak_bytes = 0;       // the tracker's device peak over the simulated layers
  std::int64_t layer_model_state_bytes = 0;    // one layer's resident device bytes on this rank
  std::int64_t layer_kept_activation_bytes = 0;  // one layer's bytes held from its forward to its backward
  std::int64_t peak_bytes = 0;                 // the whole model's device peak on this rank

  int layers_not_simulated() const { return model_layers - simulated_layers; }
  std::int64_t per_layer_bytes() const { return layer_model_state_bytes + layer_kept_activation_bytes; }
};

// InputError naming the model file when a run would simulate more MoE layers than the model has
// (its memory verdict would count layers that do not exist). Called before simulating.
void check_simulated_layers(const ModelSpec& model, int simulated_layers);

// One entry per element of `memory` (the tracker's simulated ranks, in its order). Throws
// InputError when the run simulates more layers than the model has, and InternalError when the
// graph's layers are not alike (resident bytes not a multiple of the simulated layers) or a sum
// leaves 64 bits.
std::vector<ModelMemory> model_memory(const TaskGraph& graph, const std::vector<RankMemory>& memory,
                                      int model_layers, int simulated_layers);

}  // namespace moesim
