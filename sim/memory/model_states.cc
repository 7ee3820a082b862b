#include "sim/memory/model_states.h"

#include <algorithm>
#include <string>

#include "sim/core/error.h"
#include "sim/spec/model_parameters.h"

namespace moesim {
namespace {

void require_divides(int divisor, std::int64_t value, const std::string& what, const std::string& flag) {
  if (value % divisor != 0)
    throw InputError(flag + " " + std::to_string(divisor) + " must divide " + what + " (" + std::to_string(value) + ")");
}

void check_layout(const ModelSpec& m, const TrainingLayout& l) {
  require_architecture(m);
  for (const auto& [value, flag] : {std::pair{l.tp, "--tp"}, {l.pp, "--pp"}, {l.ep, "--ep"}, {l.dp, "--dp"}})
    if (value < 1) throw InputError(std::string(flag) + " must be at least 1, got " + std::to_string(value));
  if (l.zero_stage < 0 || l.zero_stage > 3)
    throw InputError("--zero must be 0, 1, 2 or 3, got " + std::to_string(l.zero_stage));
  require_divides(l.pp, m.num_layers, "the model's layers", "--pp");
  check_tensor_expert_parallel(m, l.tp, l.ep, l.etp);
}

// Adds one layer's parameters as one GPU of its stage holds them.
void add_layer(StageModelStates& s, const LayerParameters& p, const TrainingLayout& l) {
  const LocalLayerParameters local = local_layer_parameters(p, l.tp, l.ep, l.expert_tp());
  s.dense_params += static_cast<double>(local.dense);
  s.expert_params += static_cast<double>(local.expert);
}

// The bytes of `params` parameters whose states are replicated over `replicas` GPUs.
void add_bytes(StageModelStates& s, double params, double replicas, const ModelSpec& m, int zero) {
  const bool fp32 = m.dtype == DType::kFp32;
  const double weight = fp32 ? 4 : m.element_bytes();
  const double optimizer = fp32 ? 8 : 12;  // two fp32 moments (+ fp32 master weights)
  s.weight_bytes += params * weight / (zero >= 3 ? replicas : 1);
  s.grad_bytes += params * 4 / (zero >= 2 ? replicas : 1);
  s.optimizer_bytes += params * optimizer / (zero >= 1 ? replicas : 1);
}

// The head's stage's extras (the last stage; DualPipeV's first): final norm, output head, MTP modules (each a layer of the last one's kind).
void add_last_stage(StageModelStates& s, const ModelSpec& m, const ParameterCount& c, const TrainingLayout& l) {
  // Tied embeddings: a head on another stage than the embedding holds its own copy of the table.
  const bool own_copy = l.pp > 1 && !l.head_on_first_stage;
  const std::int64_t head = c.output_head > 0 ? c.output_head : (own_copy ? c.embedding : 0);
  s.dense_params += static_cast<double>(model_norm_parameters(m)) + static_cast<double>(head) / l.tp;
  for (int i = 0; i < m.architecture.mtp_depth; ++i) {
    add_layer(s, layer_parameters(m, m.num_layers - 1), l);
    s.dense_params += static_cast<double>(mtp_extra_parameters(m)) / l.tp;
  }
}

}  // namespace

void check_tensor_expert_parallel(const ModelSpec& m, int tp, int ep, int etp) {
  const AttentionSpec& a = m.architecture.attention;
  require_divides(tp, a.num_heads, "the attention heads", "--tp");
  if (a.kind != AttentionKind::kMla) require_divides(tp, a.num_kv_heads, "the key/value groups", "--tp");
  if (m.architecture.dense_d_ffn > 0) require_divides(tp, m.architecture.dense_d_ffn, "dense_d_ffn", "--tp");
  if (m.has_moe_layers()) {
    require_divides(ep, m.num_experts, "the experts", "--ep");
    const bool folded = etp > 0 && etp != tp;
    require_divides(folded ? etp : tp, m.d_ffn, "the experts' d_ffn", folded ? "--etp" : "--tp");
    if (m.shared_experts.count > 0) require_divides(tp, m.shared_experts.d_ffn, "the shared experts' d_ffn", "--tp");
  } else if (ep > 1) {
    throw InputError("--ep " + std::to_string(ep) + ": model " + m.name + " has no experts to split");
  }
}

std::vector<StageModelStates> model_states_per_gpu(const ModelSpec& m, const TrainingLayout& l) {
  check_layout(m, l);
  const int per_stage = m.num_layers / l.pp;
  std::vector<std::vector<int>> stage_layers(static_cast<std::size_t>(l.pp));
  for (int st = 0; st < l.pp; ++st)
    for (int layer = st * per_stage; layer < (st + 1) * per_stage; ++layer)
      stage_layers[static_cast<std::size_t>(st)].push_back(layer);
  return model_states_per_gpu(m, l, stage_layers);
}

std::vector<StageModelStates> model_states_per_gpu(const ModelSpec& m, const TrainingLayout& l,
                                                   const std::vector<std::vector<int>>& stage_layers) {
  TrainingLayout whole = l;
  whole.pp = 1;  // the layer split is given: only the other rules apply
  check_layout(m, whole);
  if (static_cast<int>(stage_layers.size()) != l.pp)
    throw InternalError("model_states_per_gpu: " + std::to_string(stage_layers.size()) + " stage layer lists for pp " +
                        std::to_string(l.pp));
  const ParameterCount c = count_parameters(m);
  std::vector<StageModelStates> stages(static_cast<std::size_t>(l.pp));
  for (int st = 0; st < l.pp; ++st) {
    StageModelStates& s = stages[static_cast<std::size_t>(st)];
    const std::vector<int>& layers = stage_layers[static_cast<std::size_t>(st)];
    s.first_layer = layers.empty() ? 0 : *std::min_element(layers.begin(), layers.end());
    s.layers = static_cast<int>(layers.size());
    for (int layer : layers) add_layer(s, layer_parameters(m, layer), l);
    const bool end_stage = st == 0 || st == l.pp - 1;
    if (st == 0 || (end_stage && l.ends_on_both_end_stages))
      // The vocabulary-parallel table over tp; learned positions whole on every rank (Megatron-LM).
      s.dense_params += static_cast<double>(c.embedding) / l.tp + static_cast<double>(c.positions);
    const int head_stage = l.head_on_first_stage ? 0 : l.pp - 1;
    if (st == head_stage || (end_stage && l.ends_on_both_end_stages)) add_last_stage(s, m, c, l);
    // The stage's ranks over the tensor-parallel ones: ep x dp with etp = tp.
    add_bytes(s, s.dense_params, static_cast<double>(l.ep) * l.dp * l.expert_tp() / l.tp, m, l.zero_stage);
    add_bytes(s, s.expert_params, l.dp, m, l.zero_stage);
  }
  return stages;
}

}  // namespace moesim
