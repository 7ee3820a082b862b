// ModelSpec: the MoE model whose layer is simulated (models/*.yaml).
//
// Notation follows MPipeMoE (IPDPS'23) Table I: M = d_model, H = d_ffn, E = num_experts, k = top_k,
// f = capacity_factor. A swiglu activation doubles FC1's output width (gate and up projections).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "sim/core/error.h"
#include "sim/spec/model_architecture.h"
#include "sim/spec/types.h"

namespace moesim {

struct SharedExpertSpec {
  int count = 0;            // dense experts every token passes through (DeepSeek-style); 0 = none
  std::int64_t d_ffn = 0;   // hidden size of each shared expert
};

// Parameter counts a publication gives for the model, to check the architecture against
// (`moesim model` prints the difference; tests/sim/spec/model_parameters_test.cc bounds it).
struct PublishedParameters {
  double total = 0;                      // parameters
  double active = 0;                     // 0: not published
  bool active_counts_embedding = false;  // the publication's active count includes the input embedding
  std::string source;
};

struct ModelSpec {
  std::string name;
  SourceLocation origin;          // the file it was read from
  std::int64_t d_model = 0;       // M
  std::int64_t d_ffn = 0;         // H, hidden size of one routed expert
  int num_experts = 0;            // E
  int top_k = 1;                  // k
  double capacity_factor = 1.0;   // f
  // The model file gives no capacity_factor: no token is ever dropped (Megatron-Core's
  // moe_expert_capacity_factor None). Balanced layouts use f = 1 (every expert gets its even
  // share); an imbalanced routing in the training step keeps every routed row (sim/step/moe_routing.h).
  bool dropless = false;
  DType dtype = DType::kFp32;     // storage type of activations and parameters
  DType gemm_dtype = DType::kFp32;  // math mode of GEMMs (tf32 on fp32 storage, as PyTorch 1.7-1.11)
  Activation activation = Activation::kGelu;
  int num_layers = 1;             // layers of the whole model (memory accounting); MoE layers simulated come from RunSpec
  SharedExpertSpec shared_experts;
  ArchitectureSpec architecture;  // the whole network; absent: the file describes its MoE layer only
  std::optional<PublishedParameters> published;
  // Group-limited routing (DeepSeek-V3's n_group / topk_group, Megatron-Core's
  // moe_router_num_groups / moe_router_group_topk): the experts in `num_groups` groups of
  // consecutive ids, each token routed to its top-k among the experts of its best `group_topk`
  // groups. Unset: routed among all experts. What it changes in moesim: the bytes a dispatcher that
  // sends each token once per node moves (sim/step/dedup_dispatch.h).
  struct RouterGroups {
    int num_groups = 0;
    int group_topk = 0;
  };
  std::optional<RouterGroups> router_groups;

  // False for a model whose every layer is dense (it has none of the MoE keys above).
  bool has_moe_layers() const { return num_experts > 0; }

  int element_bytes() const { return dtype_bytes(dtype); }
  // Width of FC1's output (T_M before the activation).
  std::int64_t fc1_out_dim() const { return activation == Activation::kSwiglu ? 2 * d_ffn : d_ffn; }
};

}  // namespace moesim
