// Block: one layer of the model as the layer stack (layer_stack.h) chains them. A block emits its
// forward and backward through the Emitter; the stack hands it the task and buffer of its input
// and where to write its output, so blocks know nothing of their neighbours.
//
// Between blocks flows the hidden state, B x M per rank: L{l}.T_I is layer l's input, allocated
// by the first block's forward for layer 0 and otherwise by the block below, whose last forward
// task writes it. In backward each block returns its input's gradient; the block below frees it
// with its last reader.
//
// Adding a block (attention, a dense MLP) is a class implementing this interface in a file of its
// own, using the Emitter and whichever policies apply to it (tensor_parallel.h, grad_sync.h,
// checkpointing.h), and a place in the stack; a pipeline stage is a stack of its layers whose
// first input and last output come from, and go to, point-to-point tasks. Neither touches the MoE
// block (moe_layer_block.h).
#pragma once

#include "sim/build/handles.h"

namespace moesim {

class Block {
 public:
  virtual ~Block() = default;

  // Layer `layer`'s forward: `input` is the task that wrote its input `in` (empty for the first
  // layer), `out` the buffer its output goes to (empty for the last layer). Returns the task that
  // writes the output.
  virtual Node forward(int layer, const Node& input, const Buf& in, const Buf& out) = 0;

  struct Gradient {
    Node task;  // the last task writing the gradient of the block's input
    Buf buffer;  // that gradient, freed by the block below
  };
  // Layer `layer`'s backward after `upstream`, the gradient of its output (from the block above;
  // an empty buffer for the last layer, whose gradient is the loss's).
  virtual Gradient backward(int layer, const Gradient& upstream) = 0;
};

}  // namespace moesim
