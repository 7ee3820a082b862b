// Shared by the execution-plan tests: hand-built graphs and the builder's graphs over several
// models, strategies, orders and chunk counts.
#pragma once

#include <string>
#include <vector>

#include "sim/build/moe_graph.h"
#include "sim/graph/task_graph.h"
#include "sim/spec/hardware_spec.h"
#include "sim/spec/loader.h"
#include "sim/spec/model_spec.h"
#include "sim/spec/run_spec.h"

namespace moesim::runtime::testing {

inline ClusterSpec adira() {
  return load_hardware_spec(std::string(MOESIM_SOURCE_DIR) + "/hardware/clusters/adira-8x-dgx-a100.yaml");
}

// A local task on `rank` with a small elementwise body.
inline TaskIndex add_local(TaskGraph& g, const std::string& id, StreamClass stream, int rank = 0,
                           std::vector<BufferId> allocates = {}, std::vector<BufferId> frees = {}) {
  Task t;
  t.id = id;
  t.rank = rank;
  t.stream = stream;
  t.work = ElementwiseWork{64, 64, 16};
  t.allocates = std::move(allocates);
  t.frees = std::move(frees);
  return g.add_task(std::move(t));
}

struct BuilderCase {
  std::string label;
  TaskGraph graph;
};

// Small bf16 top-2 model with swiglu (FC1 twice as wide) and a shared expert, and the paper's fp32
// top-1 gelu model,
// each with every strategy, two orders and n in {1, 2, 4}, two layers.
inline std::vector<BuilderCase> builder_cases(const ClusterSpec& cluster) {
  std::vector<ModelSpec> models(2);
  models[0].name = "small-swiglu";
  models[0].d_model = 64;
  models[0].d_ffn = 96;
  models[0].num_experts = 16;
  models[0].top_k = 2;
  models[0].dtype = models[0].gemm_dtype = DType::kBf16;
  models[0].activation = Activation::kSwiglu;
  models[0].shared_experts.count = 1;  // the shared experts' buffers and edges too
  models[0].shared_experts.d_ffn = 64;
  models[1].name = "gpt-s-like";
  models[1].d_model = 768;
  models[1].d_ffn = 3072;
  models[1].num_experts = 64;
  models[1].top_k = 1;
  models[1].activation = Activation::kGelu;
  std::vector<BuilderCase> out;
  for (const ModelSpec& m : models)
    for (MemoryStrategy st : {MemoryStrategy::kNone, MemoryStrategy::kS1, MemoryStrategy::kS2, MemoryStrategy::kS3,
                              MemoryStrategy::kS4})
      for (OrderPolicy order : {OrderPolicy::kSequential, OrderPolicy::kMPipeMoE, OrderPolicy::kTutel})
        for (int n : {1, 2, 4}) {
          RunSpec run;
          run.tokens_per_gpu = 256;
          run.ep_size = 8;
          run.num_chunks = n;
          run.order = order;
          run.strategy = st;
          run.num_moe_layers = 2;
          out.push_back(BuilderCase{m.name + "/" + std::string(to_string(st)) + "/" + std::string(to_string(order)) +
                                        "/n" + std::to_string(n),
                                    build_moe_graph(m, cluster, run)});
        }
  return out;
}

}  // namespace moesim::runtime::testing
