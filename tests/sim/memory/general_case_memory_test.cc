// The memory model in the GENERAL case (top-2, capacity factor 1.25, bf16 mixed precision with Adam,
// routing data counted, several local experts per GPU, swiglu and gelu), checked against values
// derived by hand from the buffer lists documented in sim/build/moe_layer_block.h and
// sim/build/memory_reuse.h and the closed form in sim/build/memory_sizes.h. Every expected number below is written out literally;
// the comments show where it comes from.
//
// Setup: M = d_model = 256, H = d_ffn = 1024, E = 16 experts, k = 2, f = 1.25, B = 1024 tokens per
// GPU, dtype bf16 (element size 2, gemm bf16), Adam, count_routing_data on, one MoE layer, cluster
// dgx-a100-2node (16 GPUs) with ep_size 4, so E_l = E / 4 = 4 local experts.
//
// Capacity: C = floor(k f B / E) = floor(2 * 1.25 * 1024 / 16) = floor(160) = 160, a multiple of
// both n = 1 and n = 4, so C = 160 in both runs. Rows R = E * C = 16 * 160 = 2560 (the dispatch
// tensor on one rank: E_l local experts x ep_size peers x C = 4 * 4 * 160, the same). Per chunk
// (n = 4): R / n = 640 rows.
//
// Model states (mixed precision, Adam: 2 B param + 2 B grad + 4 B fp32 master + 2 x 4 B Adam states
// = 16 B per parameter). Parameters = E*M + E_l*(M*fc1_out + H*M):
//   gelu   (fc1_out = H = 1024):  16*256 + 4*(256*1024 + 1024*256) = 4096 + 4*524288 = 2101248
//          -> 16 * 2101248 = 33619968 bytes.
//   swiglu (fc1_out = 2H = 2048): 16*256 + 4*(256*2048 + 1024*256) = 4096 + 4*786432 = 3149824
//          -> 16 * 3149824 = 50397184 bytes.
//
// Activation buffers (element size 2; topk is B x k x 8 bytes regardless of dtype):
//   T_I    B x M = 1024*256*2          =  524288
//   T_O    R x M = 2560*256*2          = 1310720
//   scores B x E = 1024*16*2           =   32768
//   topk   B*k*8 = 1024*2*8            =   16384
//   T_M is FC1's output, F = fc1_out wide: H for gelu, 2H for swiglu (its backward needs both
//   halves).
//   strategy none (full-size):
//     T_DI R x M = 1310720, T_DO R x M = 1310720, T_M R x F: gelu 2560*1024*2 = 5242880, swiglu
//     2560*2048*2 = 10485760.
//     All saved tensors live from the forward until bwd.gate.wgrad, so the maximum is their sum:
//     gelu   524288 + 1310720 + 32768 + 16384 + 1310720 + 5242880 + 1310720 = 9748480,
//     swiglu 524288 + 1310720 + 32768 + 16384 + 1310720 + 10485760 + 1310720 = 14991360.
//   strategy s4, n = 4, slots 2: min(2, 2n) = 2 T_DI slots and min(2, n) = 2 T_DO slots of
//     R/n x M = 640*256*2 = 327680 each, one T_M slot of R/n x F (gelu 640*1024*2 = 1310720,
//     swiglu 640*2048*2 = 2621440):
//     gelu   524288 + 1310720 + 32768 + 16384 + 2*327680 + 1310720 + 2*327680 = 4505600,
//     swiglu 524288 + 1310720 + 32768 + 16384 + 2*327680 + 2621440 + 2*327680 = 5816320
//     (all slots are written in the forward, n = 4 >= slots, and freed by bwd.gate.wgrad).
//
// Temporary, strategy none, n = 1 (every chunk task is the first and last one; one compute stream
// runs fc2.dgrad, act, fc2.wgrad, fc1.wgrad, fc1.dgrad in this order):
//   forward:  none (FC1 writes T_M).
//   backward: bwd.combine: dT_O + dDO = 2 * R x M = 2621440;
//             gelu   fc2.dgrad .. fc2.wgrad: dDO + dM = R x (M + H) = 2560*1280*2 = 6553600;
//                    fc1.dgrad: dM + dDI = 6553600 (dDO was freed by fc2.wgrad);
//             swiglu fc2.dgrad: dDO + dM (R x 2H) + dA (R x H, freed by act) =
//                    1310720 + 10485760 + 5242880 = 17039360;
//                    fc1.dgrad: dM + dDI = 10485760 + 1310720 = 11796480;
//             encode .. gate.wgrad: dT_I = B x M = 524288 (dDI freed by the dispatch before).
//   max: gelu 6553600; swiglu 17039360.
// Peak device bytes, strategy none, n = 1: the backward's first expert GEMM (all activations plus
//   the temporary maximum) dominates:
//   gelu   33619968 + 9748480 + 6553600 = 49922048;
//   swiglu 50397184 + 14991360 + 17039360 = 82427904.
//
// Temporary with s4 (n = 4) depends on how far the gradient all-to-alls and re-dispatches run ahead
// of the compute stream, so only inequalities are asserted:
//   >= dT_O + dDO.c0 = R x M + R/n x M = 1310720 + 327680 = 1638400 (both live during the first
//      gradient combine; dT_O is freed by the last one),
//   >= swiglu: the gradient pool (2 dDO and 2 dDI slots of R/n x M, dM.slot0 R/n x 2H, all
//      allocated by bwd.decode) plus dA of the chunk in fc2.dgrad .. act (R/n x H):
//      4*327680 + 2621440 + 1310720 = 5242880,
//   <= the sum of all temporary buffers of the graph (no bound from strategy none is claimed
//      here: the recomputation's pre-activation and the run-ahead all-to-alls are timing dependent).
//   Likewise ms + activations <= peak <= ms + activations + temporary maximum.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>

#include "sim/driver/simulation.h"
#include "sim/build/moe_graph.h"
#include "sim/memory/memory_tracker.h"
#include "sim/spec/loader.h"

namespace moesim {
namespace {

const std::string kRoot = MOESIM_SOURCE_DIR;

ClusterSpec cluster() { return load_hardware_spec(kRoot + "/hardware/clusters/dgx-a100-2node.yaml"); }

ModelSpec small_model(Activation act, DType dtype = DType::kBf16, int top_k = 2) {
  ModelSpec s;
  s.name = "general-case";
  s.d_model = 256;
  s.d_ffn = 1024;
  s.num_experts = 16;
  s.top_k = top_k;
  s.capacity_factor = 1.25;
  s.dtype = dtype;
  s.gemm_dtype = dtype;
  s.activation = act;
  return s;
}

RunSpec small_run(int chunks, MemoryStrategy strategy, bool routing = true) {
  RunSpec r;
  r.tokens_per_gpu = 1024;
  r.ep_size = 4;
  r.num_chunks = chunks;
  r.num_moe_layers = 1;
  r.strategy = strategy;
  r.slots = 2;
  r.optimizer = Optimizer::kAdam;
  r.count_routing_data = routing;
  return r;
}

struct Simulated {
  TaskGraph graph;
  RankMemory memory;
};

Simulated simulate(const ModelSpec& model, const RunSpec& run) {
  const ClusterSpec c = cluster();
  TaskGraph graph = build_moe_graph(model, c, run);
  EngineRun r = simulate_graph(graph, c);
  RankMemory m = r.memory.front();
  return Simulated{std::move(graph), std::move(m)};
}

std::int64_t max_of(const Simulated& s, MemoryCategory c) { return s.memory.max_bytes[static_cast<int>(c)]; }
std::int64_t at_peak(const Simulated& s, MemoryCategory c) {
  return s.memory.at_peak_bytes[static_cast<int>(c)];
}

// Bytes of the rank-0 buffer named `name` (-1 if absent).
std::int64_t buffer_bytes(const TaskGraph& g, const std::string& name) {
  for (BufferId id = 0; id < g.num_buffers(); ++id)
    if (g.buffer(id).name == name) return g.buffer(id).bytes;
  return -1;
}

std::int64_t total_bytes(const TaskGraph& g, MemoryCategory c) {
  std::int64_t sum = 0;
  int rank = -1;
  for (BufferId id = 0; id < g.num_buffers(); ++id) {
    const Buffer& b = g.buffer(id);
    if (rank < 0) rank = b.rank;
    if (b.rank == rank && b.category == c) sum += b.bytes;
  }
  return sum;
}

TEST(GeneralCaseMemory, DerivedDims) {
  const ClusterSpec c = cluster();
  for (int n : {1, 4}) {
    const LayerDims d = derive_layer_dims(small_model(Activation::kSwiglu), c, small_run(n, MemoryStrategy::kNone));
    EXPECT_EQ(d.capacity, 160);
    EXPECT_EQ(d.local_experts, 4);
    EXPECT_EQ(d.ep_size, 4);
    EXPECT_EQ(d.element_bytes, 2);
    EXPECT_EQ(d.num_experts * d.capacity, 2560);               // R
    EXPECT_EQ(d.rows_per_chunk(), 2560 / n);                    // R / n
    EXPECT_EQ(d.rows_per_expert_chunk() * d.local_experts, 2560 / n);
  }
}

TEST(GeneralCaseMemory, NoneGeluN1) {
  const Simulated s = simulate(small_model(Activation::kGelu), small_run(1, MemoryStrategy::kNone));
  EXPECT_EQ(buffer_bytes(s.graph, "L0.T_I"), 524288);
  EXPECT_EQ(buffer_bytes(s.graph, "L0.T_O"), 1310720);
  EXPECT_EQ(buffer_bytes(s.graph, "L0.scores"), 32768);
  EXPECT_EQ(buffer_bytes(s.graph, "L0.topk"), 16384);
  EXPECT_EQ(buffer_bytes(s.graph, "L0.T_DI"), 1310720);
  EXPECT_EQ(buffer_bytes(s.graph, "L0.T_M"), 5242880);
  EXPECT_EQ(buffer_bytes(s.graph, "L0.T_DO"), 1310720);
  EXPECT_EQ(buffer_bytes(s.graph, "L0.bwd.dA.c0"), -1);  // gelu: dA is computed over in place
  EXPECT_EQ(max_of(s, MemoryCategory::kModelStates), 33619968);
  EXPECT_EQ(max_of(s, MemoryCategory::kActivations), 9748480);
  EXPECT_EQ(max_of(s, MemoryCategory::kTemporary), 6553600);
  EXPECT_EQ(s.memory.peak_device_bytes, 49922048);
  EXPECT_EQ(s.memory.peak_host_pinned_bytes, 0);
}

TEST(GeneralCaseMemory, NoneSwigluN1) {
  const Simulated s = simulate(small_model(Activation::kSwiglu), small_run(1, MemoryStrategy::kNone));
  EXPECT_EQ(buffer_bytes(s.graph, "L0.T_M"), 10485760);
  EXPECT_EQ(buffer_bytes(s.graph, "L0.dM"), 10485760);
  EXPECT_EQ(buffer_bytes(s.graph, "L0.bwd.dA.c0"), 5242880);
  EXPECT_EQ(max_of(s, MemoryCategory::kModelStates), 50397184);
  EXPECT_EQ(max_of(s, MemoryCategory::kActivations), 14991360);
  EXPECT_EQ(max_of(s, MemoryCategory::kTemporary), 17039360);
  // The peak is in the backward's fc2.dgrad, with every activation still saved.
  EXPECT_EQ(s.memory.peak_device_bytes, 82427904);
  EXPECT_EQ(at_peak(s, MemoryCategory::kModelStates), 50397184);
  EXPECT_EQ(at_peak(s, MemoryCategory::kActivations), 14991360);
  EXPECT_EQ(at_peak(s, MemoryCategory::kTemporary), 17039360);
}

// DeepSpeed-TED, tp = 2 (ep 4 x dp 2 on the 16 GPUs), gelu, strategy none, n = 1, duplicate token
// dropping on (C = 160 is already a multiple of n x tp = 2). Each rank holds H / 2 = 512 of each
// expert's hidden columns; T_DI, T_DO, T_O stay whole (R x M: the all-gathers complete them).
//   params = E*M + E_l*(M*H + H*M)/2 = 4096 + 4*262144 = 1052672 -> 16 B each = 16842752;
//   ZeRO-1: 2 + 2 B per parameter, the experts' 12 B over dp = 2, the gate's over ep x dp = 8:
//     4*1052672 + 12*1048576/2 + 12*4096/8 = 4210688 + 6291456 + 6144 = 10508288.
//   activations: T_I 524288 + T_O 1310720 + scores 32768 + topk 16384 + T_DI 1310720
//     + T_M (R x H/2 = 2560*512*2) 2621440 + T_DO 1310720 = 7127040.
//   temporary: dDO + dM (R x (M + H/2) = 2560*768*2) = 3932160 in fc2.dgrad .. fc2.wgrad, and
//     dM + dDI the same in fc1.dgrad (the tensor-parallel all-reduce works on dDI in place).
//   peak: the first backward expert GEMM with every activation saved:
//     16842752 + 7127040 + 3932160 = 27901952, with ZeRO-1 10508288 + 7127040 + 3932160 = 21567488.
TEST(GeneralCaseMemory, TensorParallelGeluN1) {
  for (int zero : {0, 1}) {
    RunSpec r = small_run(1, MemoryStrategy::kNone);
    r.tp_size = 2;
    r.zero_stage = zero;
    const Simulated s = simulate(small_model(Activation::kGelu), r);
    EXPECT_EQ(buffer_bytes(s.graph, "L0.T_M"), 2621440);
    EXPECT_EQ(buffer_bytes(s.graph, "L0.T_DI"), 1310720);
    EXPECT_EQ(max_of(s, MemoryCategory::kModelStates), zero == 0 ? 16842752 : 10508288);
    EXPECT_EQ(max_of(s, MemoryCategory::kActivations), 7127040);
    EXPECT_EQ(max_of(s, MemoryCategory::kTemporary), 3932160);
    EXPECT_EQ(s.memory.peak_device_bytes, zero == 0 ? 27901952 : 21567488);
  }
}

// Activation checkpointing, two layers, gelu, strategy none, n = 1. A layer's saved tensors other
// than its input are T_O 1310720 + scores 32768 + topk 16384 + T_DI 1310720 + T_M 5242880 + T_DO
// 1310720 = 9224192; inputs T_I are 524288 each.
//   none: both layers keep everything to their backward: 2 x (524288 + 9224192) = 19496960.
//   full: a layer's forward frees those at its decode; its re-run recreates them before its
//     backward, plus the re-run's output (B x M = 524288). The maximum is in layer 1's backward,
//     with both inputs held: 2 x 524288 + 9224192 + 524288 = 10797056.
//   cac: the forward also keeps T_DI and T_O (the all-to-alls' outputs, 2621440 per layer) and the
//     re-run makes only scores, topk, T_M and T_DO (6602752): in layer 1's backward
//     2 x 524288 + 2 x 2621440 + 6602752 + 524288 = 13418496.
TEST(GeneralCaseMemory, ActivationCheckpointingTwoLayers) {
  const std::pair<ActivationCheckpointing, std::int64_t> cases[] = {{ActivationCheckpointing::kNone, 19496960},
                                                                    {ActivationCheckpointing::kFull, 10797056},
                                                                    {ActivationCheckpointing::kCommAware, 13418496}};
  for (const auto& [mode, activations] : cases) {
    RunSpec r = small_run(1, MemoryStrategy::kNone);
    r.num_moe_layers = 2;
    r.checkpoint = mode;
    const Simulated s = simulate(small_model(Activation::kGelu), r);
    EXPECT_EQ(max_of(s, MemoryCategory::kActivations), activations) << to_string(mode);
  }
}

TEST(GeneralCaseMemory, S4N4Slots2) {
  for (Activation act : {Activation::kGelu, Activation::kSwiglu}) {
    SCOPED_TRACE(std::string(to_string(act)));
    const bool swiglu = act == Activation::kSwiglu;
    const Simulated s = simulate(small_model(act), small_run(4, MemoryStrategy::kS4));
    EXPECT_EQ(buffer_bytes(s.graph, "L0.T_DI.slot0"), 327680);
    EXPECT_EQ(buffer_bytes(s.graph, "L0.T_DI.slot1"), 327680);
    EXPECT_EQ(buffer_bytes(s.graph, "L0.T_DI.slot2"), -1);
    EXPECT_EQ(buffer_bytes(s.graph, "L0.T_M.slot0"), swiglu ? 2621440 : 1310720);
    EXPECT_EQ(buffer_bytes(s.graph, "L0.dM.slot0"), swiglu ? 2621440 : 1310720);
    EXPECT_EQ(buffer_bytes(s.graph, "L0.T_DO.slot0"), 327680);
    EXPECT_EQ(buffer_bytes(s.graph, "L0.T_DO.slot1"), 327680);
    EXPECT_EQ(max_of(s, MemoryCategory::kModelStates), swiglu ? 50397184 : 33619968);
    const std::int64_t acts = swiglu ? 5816320 : 4505600;
    EXPECT_EQ(max_of(s, MemoryCategory::kActivations), acts);
    EXPECT_EQ(s.memory.peak_host_pinned_bytes, 0);  // s4 offloads nothing
    // Temporary: inequalities only (see the header).
    const std::int64_t tmp = max_of(s, MemoryCategory::kTemporary);
    EXPECT_GE(tmp, 1638400);
    if (swiglu) {
      EXPECT_GE(tmp, 5242880);
    }
    EXPECT_LE(tmp, total_bytes(s.graph, MemoryCategory::kTemporary));
    const std::int64_t ms = max_of(s, MemoryCategory::kModelStates);
    EXPECT_GE(s.memory.peak_device_bytes, ms + acts);
    EXPECT_LE(s.memory.peak_device_bytes, ms + acts + tmp);
  }
}

// Changing only the storage dtype (bf16 -> fp32) doubles every element-sized buffer. Without routing
// data the activations halve exactly from fp32 to bf16; with it, everything but the topk indices
// (B x k x 8 = 16384 bytes in both) halves.
TEST(GeneralCaseMemory, Bf16HalvesFp32Activations) {
  for (MemoryStrategy strategy : {MemoryStrategy::kNone, MemoryStrategy::kS4}) {
    const int n = strategy == MemoryStrategy::kNone ? 1 : 4;
    for (Activation act : {Activation::kGelu, Activation::kSwiglu}) {
      SCOPED_TRACE(std::string(to_string(strategy)) + " " + std::string(to_string(act)));
      const auto acts = [&](DType dt, bool routing) {
        return max_of(simulate(small_model(act, dt), small_run(n, strategy, routing)), MemoryCategory::kActivations);
      };
      const std::int64_t bf16 = acts(DType::kBf16, false), fp32 = acts(DType::kFp32, false);
      EXPECT_EQ(2 * bf16, fp32);
      // Without scores (32768) and topk (16384): gelu none 9748480 - 49152 = 9699328, s4
      // 4505600 - 49152 = 4456448; swiglu none 14991360 - 49152 = 14942208, s4 5816320 - 49152 =
      // 5767168.
      const bool swiglu = act == Activation::kSwiglu;
      if (strategy == MemoryStrategy::kNone)
        EXPECT_EQ(bf16, swiglu ? 14942208 : 9699328);
      else
        EXPECT_EQ(bf16, swiglu ? 5767168 : 4456448);
      const std::int64_t bf16_r = acts(DType::kBf16, true), fp32_r = acts(DType::kFp32, true);
      EXPECT_EQ(2 * (bf16_r - 16384), fp32_r - 16384);
    }
  }
}

// k = 2 at f = 1.25: C = 160; k = 1: C = floor(1.25 * 1024 / 16) = 80, exactly half, so every
// dispatched-tensor buffer (T_DI, T_M, T_DO, T_O and their slots) doubles with top-2.
TEST(GeneralCaseMemory, TopTwoDoublesDispatchedBuffers) {
  for (MemoryStrategy strategy : {MemoryStrategy::kNone, MemoryStrategy::kS4}) {
    const int n = strategy == MemoryStrategy::kNone ? 1 : 4;
    SCOPED_TRACE(std::string(to_string(strategy)));
    const Simulated k1 = simulate(small_model(Activation::kGelu, DType::kBf16, 1), small_run(n, strategy));
    const Simulated k2 = simulate(small_model(Activation::kGelu, DType::kBf16, 2), small_run(n, strategy));
    const char* names_none[] = {"L0.T_O", "L0.T_DI", "L0.T_M", "L0.T_DO"};
    const char* names_s4[] = {"L0.T_O", "L0.T_DI.slot0", "L0.T_DI.slot1", "L0.T_M.slot0", "L0.T_DO.slot0",
                              "L0.T_DO.slot1"};
    std::int64_t dispatched_k1 = 0;
    const auto check = [&](const char* name) {
      const std::int64_t b1 = buffer_bytes(k1.graph, name), b2 = buffer_bytes(k2.graph, name);
      EXPECT_GT(b1, 0) << name;
      EXPECT_EQ(b2, 2 * b1) << name;
      dispatched_k1 += b1;
    };
    if (strategy == MemoryStrategy::kNone)
      for (const char* name : names_none) check(name);
    else
      for (const char* name : names_s4) check(name);
    // Token-sized tensors do not change, except topk (B x k x 8: 8192 -> 16384).
    EXPECT_EQ(buffer_bytes(k1.graph, "L0.T_I"), buffer_bytes(k2.graph, "L0.T_I"));
    EXPECT_EQ(buffer_bytes(k1.graph, "L0.scores"), buffer_bytes(k2.graph, "L0.scores"));
    EXPECT_EQ(buffer_bytes(k1.graph, "L0.topk"), 8192);
    // So the activation maximum grows by exactly the top-1 dispatched bytes plus 8192.
    EXPECT_EQ(max_of(k2, MemoryCategory::kActivations) - max_of(k1, MemoryCategory::kActivations),
              dispatched_k1 + 8192);
    // Model states do not depend on k.
    EXPECT_EQ(max_of(k1, MemoryCategory::kModelStates), max_of(k2, MemoryCategory::kModelStates));
  }
}

// Shared experts (one of Hs = 512, gelu, so Fs = 512) on the setup above, strategy none, n = 1:
//   model states: + M*Fs + Hs*M = 256*512 + 512*256 = 262144 parameters x 16 B = 4194304
//     -> 33619968 + 4194304 = 37814272;
//   activations: + shared.T_M B x Fs = 1024*512*2 = 1048576 -> 9748480 + 1048576 = 10797056;
//   temporaries: the shared experts' backward runs right after bwd.decode on the compute stream,
//     so shared.dX (B x M = 524288, until bwd.gate.dgrad) is live through the routed experts'
//     backward: its maximum, at fc2.dgrad, is dDO + dM + shared.dX = 6553600 + 524288 = 7077888
//     (the shared phase itself holds at most dT_O + dDO + shared.dM + shared.dX = 1310720 +
//     1310720 + 1048576 + 524288 = 4194304);
//   peak: 37814272 + 10797056 + 7077888 = 55689216, with every activation still saved.
TEST(GeneralCaseMemory, SharedExpertsSaveTheirFc1OutputAndCarryTheirGradients) {
  ModelSpec model = small_model(Activation::kGelu);
  model.shared_experts.count = 1;
  model.shared_experts.d_ffn = 512;
  const Simulated s = simulate(model, small_run(1, MemoryStrategy::kNone));
  EXPECT_EQ(buffer_bytes(s.graph, "L0.shared.T_M"), 1048576);
  EXPECT_EQ(buffer_bytes(s.graph, "L0.shared.out"), 524288);
  EXPECT_EQ(buffer_bytes(s.graph, "L0.shared.dM"), 1048576);
  EXPECT_EQ(buffer_bytes(s.graph, "L0.shared.dA"), -1);  // gelu: in place
  EXPECT_EQ(buffer_bytes(s.graph, "L0.shared.dX"), 524288);
  EXPECT_EQ(max_of(s, MemoryCategory::kModelStates), 37814272);
  EXPECT_EQ(max_of(s, MemoryCategory::kActivations), 10797056);
  EXPECT_EQ(max_of(s, MemoryCategory::kTemporary), 7077888);
  EXPECT_EQ(s.memory.peak_device_bytes, 55689216);

  model.activation = Activation::kSwiglu;  // Fs = 2 Hs = 1024, and dA (B x Hs) of its own
  const Simulated w = simulate(model, small_run(1, MemoryStrategy::kNone));
  EXPECT_EQ(buffer_bytes(w.graph, "L0.shared.T_M"), 2097152);
  EXPECT_EQ(buffer_bytes(w.graph, "L0.shared.dM"), 2097152);
  EXPECT_EQ(buffer_bytes(w.graph, "L0.shared.dA"), 1048576);
  EXPECT_EQ(max_of(w, MemoryCategory::kActivations), 14991360 + 2097152);
}

}  // namespace
}  // namespace moesim
