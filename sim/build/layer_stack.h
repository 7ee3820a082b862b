// The layer stack: the model's blocks, one per layer, chained forward from layer 0 and backward
// from the last layer, with the hidden state L{l}.T_I between them (block.h).
#pragma once

#include <vector>

#include "sim/build/block.h"
#include "sim/build/emitter.h"

namespace moesim {

// Emits the step: every layer's forward, then every layer's backward in reverse. blocks[l] is
// layer l's block (one object may serve several layers).
void emit_layer_stack(Emitter& emitter, const std::vector<Block*>& blocks);

}  // namespace moesim
