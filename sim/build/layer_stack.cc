#include "sim/build/layer_stack.h"

namespace moesim {

void emit_layer_stack(Emitter& e, const std::vector<Block*>& blocks) {
  const int layers = static_cast<int>(blocks.size());
  const std::int64_t hidden = e.bytes(e.dims().tokens, e.dims().d_model);
  // Layer l's input T_I: the step's input for layer 0 (allocated by its first task), else the
  // output of layer l-1, allocated by the task of that layer that writes it.
  Buf next_input = e.buffer(0, "T_I", -1, hidden, MemoryCategory::kActivations);
  Node output;
  for (int l = 0; l < layers; ++l) {
    const Buf input = next_input;
    next_input = l + 1 < layers ? e.buffer(l + 1, "T_I", -1, hidden, MemoryCategory::kActivations) : Buf{};
    output = blocks[static_cast<std::size_t>(l)]->forward(l, output, input, next_input);
  }
  Block::Gradient upstream{output, Buf{}};
  for (int l = layers - 1; l >= 0; --l) upstream = blocks[static_cast<std::size_t>(l)]->backward(l, upstream);
}

}  // namespace moesim
