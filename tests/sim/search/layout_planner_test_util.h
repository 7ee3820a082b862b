// Helpers of the layout planner's tests (layout_planner_test.cc, layout_planner_moe_test.cc):
// requests on the presets and the tiny test models, and a candidate's varied axes as one string.
#pragma once

#include <cstdint>
#include <string>

#include "sim/search/layout_planner.h"
#include "sim/spec/loader.h"
#include "tests/sim/step_presets.h"

namespace moesim::search::plan_test {

inline ModelSpec preset(const std::string& name) { return moesim::testing::model_preset(name); }
inline ClusterSpec cluster(int gpus) { return moesim::testing::a100_cluster(gpus); }

inline LayoutRequest request(const std::string& model, int gpus, std::int64_t global_batch, std::int64_t seq) {
  LayoutRequest r;
  r.model = preset(model);
  r.cluster = cluster(gpus);
  r.global_batch = global_batch;
  r.seq = seq;
  r.top = 3;
  r.jobs = 2;
  return r;
}

// A step of `layout` at `global_batch` x `seq` tokens with sequence parallelism.
inline StepSpec sp_step(const StepLayout& layout, std::int64_t global_batch, std::int64_t seq) {
  StepSpec spec;
  spec.layout = layout;
  spec.global_batch = global_batch;
  spec.seq = seq;
  spec.sequence_parallel = true;
  return spec;
}

// What the planner varies, as one string.
inline std::string key(const StepSpec& s) {
  const StepLayout& l = s.layout;
  return std::to_string(l.tp) + "/" + std::to_string(l.cp) + "/" + std::to_string(l.pp) + "/" + std::to_string(l.vpp) +
         "/" + std::to_string(l.ep) + "/" + std::to_string(l.expert_tp()) + "/" + std::to_string(s.moe_chunks) + "/" +
         std::to_string(s.micro_batch) + "/" + std::string(to_string(s.recompute)) + "/" + std::to_string(s.zero_stage);
}

// tests/sim/search/data/tiny-gpt.yaml: 4 layers of width 512, quick to plan.
inline LayoutRequest tiny(int gpus, std::int64_t global_batch) {
  LayoutRequest r = request("gpt-1.7b", gpus, global_batch, 0);
  r.model = load_model_spec(std::string(MOESIM_SOURCE_DIR) + "/tests/sim/search/data/tiny-gpt.yaml");
  return r;
}

// tests/sim/search/data/tiny-moe.yaml: tiny-gpt's shape with 4 experts (top-2) in every layer.
inline LayoutRequest tiny_moe(int gpus, std::int64_t global_batch) {
  LayoutRequest r = tiny(gpus, global_batch);
  r.model = load_model_spec(std::string(MOESIM_SOURCE_DIR) + "/tests/sim/search/data/tiny-moe.yaml");
  return r;
}

inline std::int64_t count_of(const LayoutEnumeration& e, const std::string& reason) {
  for (const RejectionCount& r : e.rejections)
    if (r.reason == reason) return r.count;
  return 0;
}

}  // namespace moesim::search::plan_test
