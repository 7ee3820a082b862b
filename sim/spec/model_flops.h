// Training FLOPs of a whole-network model (sim/spec/model_architecture.h), by the formula
// Megatron-LM reports model TFLOP/s and MFU with: num_floating_point_operations, transformer
// branch, in megatron/training/training.py of NVIDIA/Megatron-LM at commit 001b00c2 (2025).
//
// Per token of a sequence of seq_len tokens, forward plus backward (3x the forward GEMMs, 2 FLOPs
// a multiply-add), counting GEMMs only (no norms, softmax, router or activations):
//   MLP        6 h (f_d ffn_dense L_dense + f_e (ffn_expert k + ffn_shared S) L_moe),  f = 3 gated, 2 not
//   attention  6 (h (q + 2 kv) + q s + q h) per layer (MHA/GQA: q = heads x head_dim, kv = groups
//              x head_dim; the causal mask halves the two s x s products), or MLA's terms
//   logits     6 h V (1 + mtp),  MTP modules  6 mtp (3 h + 2 h^2) plus one layer each
// MTP modules add a layer of the kind of the last layer. The vocabulary is taken as the file gives
// it (Megatron pads it to a multiple of 128 x tensor-parallel size: give the padded size to match).
#pragma once

#include "sim/spec/model_spec.h"

namespace moesim {

struct TrainingFlops {
  double attention = 0;  // per token, every layer's attention (core and projections)
  double mlp = 0;        // dense MLPs, routed (top_k) and shared experts
  double logits = 0;     // output head, one per MTP module too
  double mtp = 0;        // MTP modules' norms and projection
  double total() const { return attention + mlp + logits + mtp; }
};

// Throws InputError (the model file) without an architecture section.
TrainingFlops megatron_training_flops_per_token(const ModelSpec& model);

}  // namespace moesim
