// StepSpec: a whole training step of a whole-network model (issue 23): the parallel layout over
// the cluster's GPUs, the batch, the pipeline schedule, recomputation and sequence parallelism.
// `moesim simulate --global-batch ...` builds one; sim/step simulates it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moesim {

// Activation recomputation (Korthikanti et al., MLSys 2023): none keeps every activation of a
// layer for its backward; selective drops the attention core's (QK^T, softmax, dropout, attention
// over V) and re-runs that core in backward; full keeps only each layer's input and re-runs the
// layer's forward before its backward.
enum class Recompute { kNone, kSelective, kFull };
std::string_view to_string(Recompute r);
std::optional<Recompute> parse_recompute(std::string_view s);
std::vector<std::string> recompute_names();

// How the attention core runs: flash (FlashAttention: one fused kernel, no s x s tensor kept, the
// softmax statistics instead) or unfused (Megatron-LM of 2021-22: a batched GEMM for QK^T, a
// fused scale-mask-softmax kernel, dropout, a batched GEMM with V; the s x s scores, softmax
// output and dropout mask are kept for backward).
enum class AttentionKernel { kFlash, kUnfused };
std::string_view to_string(AttentionKernel a);
std::optional<AttentionKernel> parse_attention_kernel(std::string_view s);
std::vector<std::string> attention_kernel_names();

}  // namespace moesim
