// How a communication kernel that holds a few SMs shares one GPU with GEMMs running on another
// stream: the question behind overlapping a MoE layer's all-to-all with another microbatch's
// computation (Megatron-Core's 1F1B all-to-all overlap, DualPipe's F&B pairs). NCCL runs a
// collective as one kernel of a few CTAs (its channels, one CTA each, 512 threads on Hopper);
// Megatron-Bridge's MoE recipes put the expert-parallel group's NCCL streams at high priority
// (`high_priority_stream_groups: ["ep"]`) so that those CTAs need not wait for the GEMMs' blocks.
//
// The probe runs a sequence of bf16 GEMMs on a stream of normal priority and, while it runs, a
// stand-in for the communication kernel on a second stream, at normal or at the device's highest
// priority, with 8 to 132 CTAs of 512 threads:
//   - copy: the CTAs copy a buffer through HBM (int4 loads and stores, grid-stride), sized so
//     that alone it takes about a third of the GEMMs' time: SM occupancy plus HBM traffic;
//   - hold: each CTA waits a fixed time on the global timer: SM occupancy alone.
// The communication kernel is launched by the host a fixed delay after the GEMMs began (mode
// "mid": it arrives in the middle of a GEMM) or first, the GEMMs 30 us after it began (mode
// "first"), and the probe reports, as medians over repetitions: its
// arrival (an event recorded on its stream just before it), when its first CTA started and its
// last ended (the kernel's own global-timer stamps, its duration placed before its end event),
// the wait between arrival and start, its stretch (duration over its duration alone) and the
// GEMMs' stretch (their time from their first launch to their end, over their time alone).
// Three GEMM sequences: two bf16 8192^3 GEMMs (each fills the GPU for over a millisecond), 32
// expert-sized bf16 4096 x 2048 x 2048 GEMMs, and one fp32 4096^3 GEMM without tensor cores (a
// kernel of other tiles and grid, mode "mid" only).
//
// Needs a GPU; run by validate/sm_share_probe.cc (`gpu_session.sh`'s bench phase).
#pragma once

#include <ostream>

namespace moesim::runtime {

struct SmShareOptions {
  int repetitions = 7;  // timed repetitions per case (two more warm up), medians reported
  int ordinal = 0;      // the GPU
};

// Runs every case and writes one table row per case to `out`. Throws InternalError when a CUDA
// or cuBLAS call fails.
void run_sm_share_probe(const SmShareOptions& options, std::ostream& out);

// The interference table's communication cells (computation.with_communication,
// communication.with_computation) measured with the copy stand-in of 8 to 66 CTAs beside bf16
// GEMMs (the two sequences above and one rank's expert GEMMs of DeepSeek-V3 and Qwen3-30B-A3B),
// each while the other side runs through the whole timed window; the computation cell also
// beside the hold kernel, the communication cell also per CTA. Unlike run_sm_share_probe, each
// GEMM of a sequence reads and writes its own operands and L2 is flushed before each run. One row
// per GEMM shape and CTA count. Throws as run_sm_share_probe.
void run_sm_share_factors(const SmShareOptions& options, std::ostream& out);

// The computation cell by GEMM shape: bf16 GEMMs from tens of output tiles to tens of thousands,
// and from 512 to 16,384 deep, each beside a hold kernel of 1, 8 and 32 CTAs (why expert-sized
// GEMMs keep about half their speed beside a communication kernel and an 8192^3 one 0.72-0.88).
// One row per shape. kWaves: one shape's tiles doubled from one per CTA to about sixteen beside
// holds of 1 to 64 CTAs instead (M from 256 to 32,768); kBatched: expert-sized GEMMs as one
// strided-batched launch of 2-16 of them beside the same GEMM alone. Throws as run_sm_share_probe.
enum class ShapeSweep { kShapes, kWaves, kBatched };
void run_sm_share_shapes(const SmShareOptions& options, ShapeSweep sweep, std::ostream& out);

}  // namespace moesim::runtime
