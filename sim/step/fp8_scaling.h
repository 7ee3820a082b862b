// FP8 delayed scaling's amax histories in the whole step (--precision fp8 --fp8-recipe delayed).
//
// Transformer Engine's DelayedScaling recipe casts with scales from each tensor's amax history and
// records the tensor's amax in the cast kernel (no pass of its own: current scaling's passes are
// StepEmitter::fp8_quantize). The histories are updated in bulk, outside the modules
// (transformer_engine/pytorch/quantization.py, FP8GlobalStateManager.reduce_and_update_fp8_tensors,
// NVIDIA/TransformerEngine commit d0067d0d):
//  - Megatron-Core wraps a model chunk's decoder layers in one fp8_autocast when the recipe is
//    delayed (TransformerBlock.forward, use_outer_fp8_context), so a chunk's forward of a
//    microbatch ends with the forward tensors' update (autocast_exit), and its backward with the
//    backward tensors' (after the backward of the chunk's first module, the last one to run:
//    reduce_and_update_bwd_fp8_tensors);
//  - an update concatenates the modules' current amaxes (torch.cat: 4 bytes each read and
//    written), all-reduces them (MAX) over the autocast's fp8_group, Megatron-Core's amax
//    reduction group (parallel_state.get_amax_reduction_group(with_context_parallel=True): the
//    stage's tp x cp x dp ranks, StepShape::stage_group), and rolls every history and recomputes
//    every scale in one kernel (tex.fused_amax_and_scale_update_after_reduction; common/recipe/
//    delayed_scaling.cu kernel_bulk: reads the reduced amax, the history and the old scale, writes
//    the history and the scale).
// Not modelled: the recomputation's copies of the forward scales (full recomputation), the MTP
// module's layers (outside the decoder's autocast), the weights' FP8 copies gathered in FP8
// (Megatron-Bridge's delayed recipe sets fp8_param_gather).
#pragma once

#include "sim/step/step_emitter.h"

namespace moesim {

// Megatron-Bridge's delayed-scaling recipe (megatron/bridge/training/mixed_precision.py,
// bf16_with_fp8_delayed_scaling_mixed): fp8_amax_history_len = 1024, amax_compute_algo "max".
inline constexpr std::int64_t kFp8AmaxHistoryLength = 1024;

// Tensors with an amax history per GEMM (TE docs, features/low_precision_training/
// fp8_delayed_scaling: forward input, weight and output; backward output gradient and input gradient).
inline constexpr std::int64_t kFp8ForwardTensorsPerGemm = 3;
inline constexpr std::int64_t kFp8BackwardTensorsPerGemm = 2;

// The bulk update after a model chunk's forward (name.pass kForward) or backward of one microbatch,
// for the chunk's `gemms` FP8 GEMMs (TransformerLayer::fp8_gemms summed over its layers): the
// concatenation, the all-reduce over the stage's ranks and the update kernel, on the chain.
// Emits nothing unless the step runs FP8 GEMMs with delayed scaling and `gemms` > 0.
void fp8_delayed_scaling_update(StepEmitter& e, Chain& chain, const TaskName& name, std::int64_t gemms);

}  // namespace moesim
