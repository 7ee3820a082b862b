#include "sim/spec/types.h"

#include "sim/core/enum_names.h"
#include "sim/spec/model_architecture.h"

#include <array>
#include <utility>

namespace moesim {
namespace {

constexpr std::array<std::pair<DType, std::string_view>, 5> kDTypes{{{DType::kFp32, "fp32"},
                                                                      {DType::kTf32, "tf32"},
                                                                      {DType::kBf16, "bf16"},
                                                                      {DType::kFp16, "fp16"},
                                                                      {DType::kFp8, "fp8"}}};
constexpr std::array<std::pair<GemmLayout, std::string_view>, 3> kLayouts{
    {{GemmLayout::kNN, "nn"}, {GemmLayout::kNT, "nt"}, {GemmLayout::kTN, "tn"}}};
constexpr std::array<std::pair<Activation, std::string_view>, 3> kActivations{{
    {Activation::kRelu, "relu"}, {Activation::kGelu, "gelu"}, {Activation::kSwiglu, "swiglu"}}};
constexpr std::array<std::pair<OrderPolicy, std::string_view>, 4> kPolicies{{
    {OrderPolicy::kSequential, "sequential"},
    {OrderPolicy::kMPipeMoE, "mpipemoe"},
    {OrderPolicy::kFasterMoE, "fastermoe"},
    {OrderPolicy::kTutel, "tutel"}}};

constexpr std::array<std::pair<MemoryStrategy, std::string_view>, 5> kStrategies{{
    {MemoryStrategy::kNone, "none"},
    {MemoryStrategy::kS1, "s1"},
    {MemoryStrategy::kS2, "s2"},
    {MemoryStrategy::kS3, "s3"},
    {MemoryStrategy::kS4, "s4"}}};
constexpr std::array<std::pair<Optimizer, std::string_view>, 3> kOptimizers{{
    {Optimizer::kAdam, "adam"}, {Optimizer::kMomentum, "momentum"}, {Optimizer::kSgd, "sgd"}}};

}  // namespace

std::string_view to_string(MemoryStrategy s) { return name_of(kStrategies, s); }
std::optional<MemoryStrategy> parse_memory_strategy(std::string_view s) {
  return parse_from(kStrategies, s);
}
std::vector<std::string> memory_strategy_names() { return names_of(kStrategies); }

std::string_view to_string(Optimizer o) { return name_of(kOptimizers, o); }
std::optional<Optimizer> parse_optimizer(std::string_view s) { return parse_from(kOptimizers, s); }
std::vector<std::string> optimizer_names() { return names_of(kOptimizers); }
int optimizer_states_per_param(Optimizer o) {
  switch (o) {
    case Optimizer::kAdam:
      return 2;
    case Optimizer::kMomentum:
      return 1;
    case Optimizer::kSgd:
      return 0;
  }
  return 2;
}

std::string_view to_string(GemmLayout l) { return name_of(kLayouts, l); }
std::optional<GemmLayout> parse_gemm_layout(std::string_view s) { return parse_from(kLayouts, s); }
std::vector<std::string> gemm_layout_names() { return names_of(kLayouts); }

std::string_view to_string(DType d) { return name_of(kDTypes, d); }
std::optional<DType> parse_dtype(std::string_view s) { return parse_from(kDTypes, s); }
std::vector<std::string> dtype_names() { return names_of(kDTypes); }
int dtype_bytes(DType d) {
  switch (d) {
    case DType::kFp32:
    case DType::kTf32:
      return 4;
    case DType::kBf16:
    case DType::kFp16:
      return 2;
    case DType::kFp8:
      return 1;
  }
  return 4;
}

std::string_view to_string(Activation a) { return name_of(kActivations, a); }
std::optional<Activation> parse_activation(std::string_view s) {
  return parse_from(kActivations, s);
}
std::vector<std::string> activation_names() { return names_of(kActivations); }

std::string_view to_string(OrderPolicy p) { return name_of(kPolicies, p); }
std::optional<OrderPolicy> parse_order_policy(std::string_view s) {
  return parse_from(kPolicies, s);
}
std::vector<std::string> order_policy_names() { return names_of(kPolicies); }

namespace {
constexpr std::array<std::pair<NetworkModel, std::string_view>, 3> kNetworkModels{{
    {NetworkModel::kAuto, "auto"}, {NetworkModel::kAlphaBeta, "alpha-beta"}, {NetworkModel::kFlow, "flow"}}};
constexpr std::array<std::pair<ComputeModel, std::string_view>, 3> kComputeModels{{
    {ComputeModel::kAuto, "auto"},
    {ComputeModel::kRoofline, "roofline"},
    {ComputeModel::kPipeMoeAlphaBeta, "pipemoe-alpha-beta"}}};
constexpr std::array<std::pair<AllToAllAlgorithm, std::string_view>, 2> kAllToAll{{
    {AllToAllAlgorithm::kPairwise, "pairwise"}, {AllToAllAlgorithm::kHierarchical, "2dh"}}};
}  // namespace

std::string_view to_string(NetworkModel m) { return name_of(kNetworkModels, m); }
std::optional<NetworkModel> parse_network_model(std::string_view s) { return parse_from(kNetworkModels, s); }
std::vector<std::string> network_model_names() { return names_of(kNetworkModels); }

std::string_view to_string(ComputeModel m) { return name_of(kComputeModels, m); }
std::optional<ComputeModel> parse_compute_model(std::string_view s) { return parse_from(kComputeModels, s); }
std::vector<std::string> compute_model_names() { return names_of(kComputeModels); }

std::string_view to_string(AllToAllAlgorithm a) { return name_of(kAllToAll, a); }
std::optional<AllToAllAlgorithm> parse_all_to_all_algorithm(std::string_view s) { return parse_from(kAllToAll, s); }
std::vector<std::string> all_to_all_algorithm_names() { return names_of(kAllToAll); }

namespace {
constexpr std::array<std::pair<ActivationCheckpointing, std::string_view>, 3> kCheckpointing{
    {{ActivationCheckpointing::kNone, "none"},
     {ActivationCheckpointing::kFull, "full"},
     {ActivationCheckpointing::kCommAware, "cac"}}};
}  // namespace

std::string_view to_string(ActivationCheckpointing c) { return name_of(kCheckpointing, c); }
std::optional<ActivationCheckpointing> parse_activation_checkpointing(std::string_view s) {
  return parse_from(kCheckpointing, s);
}
std::vector<std::string> activation_checkpointing_names() { return names_of(kCheckpointing); }

namespace {
constexpr std::array<std::pair<AttentionKind, std::string_view>, 3> kAttentionKinds{
    {{AttentionKind::kMha, "mha"}, {AttentionKind::kGqa, "gqa"}, {AttentionKind::kMla, "mla"}}};
constexpr std::array<std::pair<NormKind, std::string_view>, 2> kNormKinds{
    {{NormKind::kLayerNorm, "layernorm"}, {NormKind::kRmsNorm, "rmsnorm"}}};
constexpr std::array<std::pair<PositionEmbedding, std::string_view>, 2> kPositionEmbeddings{
    {{PositionEmbedding::kRope, "rope"}, {PositionEmbedding::kLearned, "learned"}}};
}  // namespace

std::string_view to_string(AttentionKind k) { return name_of(kAttentionKinds, k); }
std::optional<AttentionKind> parse_attention_kind(std::string_view s) { return parse_from(kAttentionKinds, s); }
std::vector<std::string> attention_kind_names() { return names_of(kAttentionKinds); }
std::string_view to_string(NormKind k) { return name_of(kNormKinds, k); }
std::optional<NormKind> parse_norm_kind(std::string_view s) { return parse_from(kNormKinds, s); }
std::vector<std::string> norm_kind_names() { return names_of(kNormKinds); }
std::string_view to_string(PositionEmbedding p) { return name_of(kPositionEmbeddings, p); }
std::optional<PositionEmbedding> parse_position_embedding(std::string_view s) {
  return parse_from(kPositionEmbeddings, s);
}
std::vector<std::string> position_embedding_names() { return names_of(kPositionEmbeddings); }

}  // namespace moesim
