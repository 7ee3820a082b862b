// The executor's per-rank state, shared by layer_executor.cc (setup, timing, downloads) and the
// lowering of tasks to device calls (lowering*.cc). Internal to runtime/exec.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/exec/layer_executor.h"
#include "runtime/exec/memory_plan.h"
#include "runtime/exec/stream_plan.h"
#include "sim/build/memory_sizes.h"
#include "sim/core/error.h"

namespace moesim::runtime {

// Sizes and types every rank shares.
struct LayerExecutor::Shared {
  LayerDims d;
  Storage type = Storage::kF32;
  GemmMath math = GemmMath::kF32;
  ActivationKind act = ActivationKind::kGelu;
  ExecutorOptions options;
  std::int64_t eb = 4;
  std::int64_t per_chunk = 0;   // C/n
  std::int64_t rows = 0;        // rows per local expert per chunk: R * C/n
  std::int64_t rows_all = 0;    // rows per chunk on either side: E_l * R * C/n = E * C/n
  std::int64_t dispatch_rows = 0;  // E * C
  std::int64_t shared_h = 0;       // Hs: the shared experts side by side (0: none)
  std::int64_t shared_f = 0;       // Fs: their FC1 width (2 Hs for swiglu)
  BlockLayout source, expert;
};

// One layer's routing on one rank, from its forward to its backward.
struct LayerRouting {
  float* probs = nullptr;
  float* topk_score = nullptr;
  float* dscores = nullptr;
  std::int32_t* topk_idx = nullptr;
  std::int32_t* topk_row = nullptr;
  std::int32_t* row_token = nullptr;
  std::int32_t* row_choice = nullptr;
  std::int32_t* tokens_per_expert = nullptr;
};

// One local rank: its plans, streams, events, memory and the pointers into it.
struct LayerExecutor::State {
  int rank = 0;
  DeviceOps* dev = nullptr;
  StreamPlan streams;
  MemoryPlan memory;
  std::vector<int> stream_ids;  // plan stream index -> device stream
  std::vector<int> events;      // plan event index -> device event
  std::vector<int> start, end;  // per graph task: timing events (-1 when not the rank's)
  std::vector<int> plan_of;     // per graph task: index into streams.tasks, -1 when not the rank's
  int origin = -1;
  char* arena = nullptr;
  char* host_arena = nullptr;
  char* workspace = nullptr;
  std::int64_t workspace_bytes = 0;
  std::map<std::string, BufferId> buffer_ids;  // "L0.T_DI.slot0" -> id
  std::vector<LayerRouting> layers;

  // Workspace tensors. Shared by the layers: every access of layer l to them is ordered before
  // every access of layer l + 1 in forward (and after it in backward) by a path of the graph
  // (the layers are chained through decode and gate), which the executor enforces.
  float* logits = nullptr;
  char* dlogits = nullptr;
  char* send = nullptr;  // source-side dispatch tensor; receives the gradient all-to-all too
  char* act_ws = nullptr;
  char* shared_act = nullptr;  // the shared experts' activation output (B x Hs)
  char* y = nullptr;     // the top layer's output
  char* dy = nullptr;    // the top layer's incoming gradient
  char* assign_scratch = nullptr;  // the device's capacity-assignment memory (the layers' routes are chained too)
  std::int64_t assign_scratch_bytes = 0;

  static std::string full_name(int layer, const std::string& name) { return "L" + std::to_string(layer) + "." + name; }
  char* buffer(int layer, const std::string& name) const {
    const auto it = buffer_ids.find(full_name(layer, name));
    MOESIM_CHECK(it != buffer_ids.end(),
                 "the graph has no buffer " + full_name(layer, name) + " on rank " + std::to_string(rank));
    const BufferPlacement& p = memory.placement(it->second);
    return (p.host ? host_arena : arena) + p.offset;
  }
  bool has(int layer, const std::string& name) const { return buffer_ids.count(full_name(layer, name)) > 0; }
  // The first byte of an operand binding (task.h) of one of the rank's buffers.
  char* at(const Operand& o) const {
    const BufferPlacement& p = memory.placement(o.buffer);
    return (p.host ? host_arena : arena) + p.offset + o.offset;
  }
  int stream_of(StreamClass c) const { return stream_ids.at(static_cast<std::size_t>(streams.stream_of_class[static_cast<int>(c)])); }
};

// One layer of one rank: what a task of that layer reads and writes.
struct RankLayer {
  RankLayer(const LayerExecutor::State& state, int layer_index, int layers)
      : st(state), r(state.layers[static_cast<std::size_t>(layer_index)]), layer(layer_index), num_layers(layers),
        dev(state.dev) {}

  const LayerExecutor::State& st;  // the rank: its device, buffers and shared workspace
  const LayerRouting& r;           // the layer's routing state on the rank
  int layer, num_layers;
  DeviceOps* dev;

  char* buffer(const std::string& name) const { return st.buffer(layer, name); }
  bool has(const std::string& name) const { return st.has(layer, name); }
  bool top() const { return layer + 1 == num_layers; }
  // The layer's output y: the next layer's input T_I, or the top layer's y.
  char* output() const { return top() ? st.y : st.buffer(layer + 1, "T_I"); }
  // The layer's incoming gradient dY: the next layer's dT_I, or the top layer's dY.
  char* upstream_grad() const { return top() ? st.dy : st.buffer(layer + 1, "dT_I"); }
};

// The weights inside the graph's `params` (and `grads`) buffer, where the builder's param_layout
// puts them (sim/build/memory_sizes.h): Wg, W1, W2, then the shared experts' W1s and W2s, packed.
struct ParamPtrs {
  char* gate;
  char* w1;
  char* w2;
  char* shared_w1;
  char* shared_w2;
};

inline ParamPtrs param_ptrs(char* base, const LayerDims& d, std::int64_t shared_f) {
  const ParamLayout at = param_layout(d, shared_f, 0);
  return ParamPtrs{base + at.gate, base + at.w1, base + at.w2, base + at.shared_w1, base + at.shared_w2};
}

}  // namespace moesim::runtime
