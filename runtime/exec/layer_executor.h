// LayerExecutor: runs the local ranks' part of the MoE layer's TaskGraph on devices, with real
// numerics, and times every task (design.md: runtime/exec).
//
// Lowering (per rank, from plan_streams and plan_memory): one stream per stream class the rank
// uses; a task's cross-stream dependencies are the plan's event waits; every graph buffer sits at
// its offset in one device arena (host_pinned ones in one pinned host arena), allocated once.
// Tasks are issued in the graph's deterministic topological order; each is bracketed by two
// timing events on its stream (start after its waits, end after its work), relative to an origin
// event every stream of the rank waits for at the step's start.
//
// What each task computes is fixed by its id (L0.<pass>.<op>[.c<chunk>], lowered by lowering.h); the tensors it reads
// and writes are the graph's buffers, chunk c of a full-size buffer or, with a memory strategy,
// the slot the builder assigns (sequence position q = forward position g, or n + g for backward
// restores, writes slot q % slots). Tensors the graph does not model get an executor workspace,
// allocated once next to the arena and reported separately: the router's fp32 logits,
// probabilities and indices, the source-side dispatch tensor (encode's output, reused to receive
// the gradient all-to-all), the activation output a (FC2's input; T_M holds FC1's output h, the
// activation is re-applied where a is needed), the layer's output y and incoming gradient dY.
//
// Restore paths (MPipeMoE Table II): offload / prefetch are copies between the slot and the
// pinned host arena on the copy streams; a re-dispatch re-encodes the chunk from T_I on the comm
// stream and re-runs the all-to-all into the slot; an FC1 recompute runs the forward's FC1 GEMM
// (same shapes and kernels, so the same bits) from the restored T_DI into the T_M slot;
// recompute.act has no numerical work because T_M holds h.
//
// Weight gradients are stored like the parameters (the simulator's accounting: grads in the
// model's dtype), the first chunk in backward order writing them and later chunks accumulating.
// Layers: every MoE layer of the graph, chained as the builder chains them (layer l's decode
// writes layer l+1's T_I; layer l's backward decode reads layer l+1's dT_I); each layer has its
// own parameters (seeded per layer) and routing state, and shares the transient workspace.
// Shared experts: one dense FFN of width count x d_ffn over every token of the rank (their
// parameters after the routed experts' in `params`), its output added to y after decode and its
// input gradient to dT_I after the gate's; FC1's output in shared.T_M, the activation's output in
// a workspace, the gradients in the graph's shared.dM / dA / dX.
// Supported now: relu, gelu or swiglu, with or without shared experts, raw or renormalised scores;
// other graphs are rejected with InputError naming what is missing.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/comm/transport.h"
#include "runtime/exec/device.h"
#include "sim/graph/trace.h"
#include "sim/build/moe_graph.h"
#include "sim/graph/task_graph.h"
#include "sim/spec/model_spec.h"
#include "sim/spec/run_spec.h"

namespace moesim::runtime {

struct ExecutorRank {
  int rank = 0;
  DeviceOps* device = nullptr;
};

struct ExecutorOptions {
  std::uint64_t seed = 1;         // inputs and parameters, as reference::random_params draws them
  bool normalize_scores = false;  // kTopKNormalized
  // Keep every layer's input and input gradient (T_I, dT_I) to the step's end, so that download()
  // can read them; off for timed runs, whose arena is then what the graph's lifetimes need.
  bool keep_layer_io = true;
};

// One rank's tensors copied to the host as fp32 (values as stored, rounded to the storage type).
struct RankValues {
  std::vector<float> x, dy, gate, w1, w2;      // inputs: B x M, B x M, M x E, E_l x M x F, E_l x H x M
  std::vector<float> y, dx, dgate, dw1, dw2;   // results, shaped as their inputs
  // The shared experts (empty without them): W1s M x Fs, W2s Hs x M, and their gradients.
  std::vector<float> shared_w1, shared_w2, dshared_w1, dshared_w2;
  std::vector<std::int32_t> topk_idx;          // B x k
  std::vector<std::int32_t> topk_row;          // B x k, runtime dispatch row or -1
};

struct RankMemoryUse {
  std::int64_t arena_bytes = 0;        // the graph's device buffers (plan_memory)
  std::int64_t host_arena_bytes = 0;   // the graph's pinned host buffers
  std::int64_t workspace_bytes = 0;    // executor tensors the graph does not model
  std::int64_t library_bytes = 0;      // cuBLAS workspace
  std::int64_t device_bytes() const { return arena_bytes + workspace_bytes + library_bytes; }
};

class LayerExecutor {
 public:
  // The graph must simulate every rank in `ranks` and outlive the executor; the transport's group
  // must be the layer's expert-parallel group. Throws InputError for an unsupported graph.
  LayerExecutor(const TaskGraph& graph, const ModelSpec& model, const LayerDims& dims,
                std::vector<ExecutorRank> ranks, Transport& transport, ExecutorOptions options = {});
  ~LayerExecutor();
  LayerExecutor(const LayerExecutor&) = delete;
  LayerExecutor& operator=(const LayerExecutor&) = delete;

  // Fills parameters, inputs and dY on the devices (seeded; waits for completion).
  void initialize();
  // Overwrites every tensor a step recomputes (the graph's non-resident buffers but layer 0's
  // input, and the float workspaces but dY) with seeded noise, and waits. A step after it must
  // give the same results: on a GPU, a task that ran before the data it reads was written (a
  // missing wait) would read the noise instead of the previous step's identical values.
  void scramble(std::uint64_t seed);
  // Issues every local task once, waits for the devices, and returns the trace of the local
  // ranks' tasks (times from each rank's origin event; other ranks' records stay -1).
  Trace run_step();
  // Layer `layer`'s inputs, parameters, results and routing on `rank` (its x is the output of
  // the layer below, its dY the input gradient of the layer above). Without keep_layer_io only
  // the parameters, their gradients and the routing (x, dy, y and dx stay empty).
  RankValues download(int rank, int layer = 0) const;
  int num_layers() const { return num_layers_; }
  RankMemoryUse memory(int rank) const;
  std::vector<int> local_ranks() const;

  // Implementation details, defined in executor_state.h for the executor and its lowering.
  struct State;
  struct Shared;

 private:
  std::vector<std::unique_ptr<State>> states_;
  const TaskGraph& graph_;
  std::vector<TaskIndex> order_;
  int num_layers_ = 1;
  Transport& transport_;
  std::unique_ptr<Shared> shared_;
};

}  // namespace moesim::runtime
