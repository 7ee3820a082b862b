// --dispatcher: the MoE layers' token dispatcher in the whole step (StepSpec::dispatcher,
// sim/step/dedup_dispatch.h), read by simulate and plan with one help text and one parse; and the
// help of --overlap-moe-expert-parallel-comm, simulate's overlap of those all-to-alls.
#pragma once

#include <string>

#include "sim/core/error.h"
#include "sim/spec/step_spec.h"
#include "sim/spec/yaml_reader.h"

namespace moesim::cli {

inline constexpr const char* kDispatcherFlagHelp =
    "MoE token dispatcher (whole step): alltoall (Megatron-Core's all-to-all dispatcher, one row per token and "
    "expert; default) | deepep (DeepEP's normal kernels through Megatron-Core's flex dispatcher, HybridEP's "
    "bytes too: each token once per node over RDMA, then once per GPU over NVLink; dropless models, uniform "
    "routing; docs/training-step.md#token-dispatchers---dispatcher)";

inline constexpr const char* kOverlapMoeEpCommHelp =
    "Megatron-Core's overlap_moe_expert_parallel_comm (whole step, MoE models, --pp 1 or --vpp > 1, --ep > 1, no "
    "full recomputation, --zero 0-2): its combined "
    "1F1B, one more warmup forward and each steady-state forward overlapped with an earlier microbatch's backward, "
    "one's all-to-alls beside the other's kernels (docs/training-step.md#all-to-all-overlap-in-1f1b---overlap-moe-expert-parallel-comm)";

inline constexpr const char* kPlanOverlapMoeEpCommHelp =
    "with --global-batch: also try each MoE layout Megatron-Core's combined 1F1B runs on (--pp 1 or --vpp > 1, "
    "--ep > 1, no full recomputation, ZeRO below 3) with it (docs/planning.md)";

inline TokenDispatcher parse_dispatcher_flag(const std::string& value) {
  if (auto d = parse_token_dispatcher(value)) return *d;
  throw InputError("--dispatcher '" + value + "' is not valid; valid: " + YamlValue::join_names(token_dispatcher_names()));
}

}  // namespace moesim::cli
