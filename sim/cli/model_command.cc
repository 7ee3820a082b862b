#include "sim/cli/model_command.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "sim/cli/output_file.h"
#include "sim/spec/loader.h"
#include "sim/core/units.h"
#include "sim/spec/model_flops.h"
#include "sim/spec/model_parameters.h"
#include "sim/spec/presets.h"

namespace moesim::cli {
namespace {

// "671.03 B", "926.68 M", "12.3 K": three significant decimals at most, for reading.
std::string count_text(double n) {
  const char* unit = "";
  double v = n;
  if (n >= 1e9) { v = n / 1e9; unit = " B"; }
  else if (n >= 1e6) { v = n / 1e6; unit = " M"; }
  else if (n >= 1e3) { v = n / 1e3; unit = " K"; }
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2f%s", v, unit);
  return buf;
}

std::string signed_percent(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.2f%%", 100 * x);
  return buf;
}

std::string layer_pattern(const ModelSpec& m, const ParameterCount& c) {
  const ArchitectureSpec& a = m.architecture;
  std::string s = std::to_string(m.num_layers) + " (" + std::to_string(c.dense_layers) + " dense, " +
                  std::to_string(c.moe_layers) + " MoE";
  if (c.moe_layers > 0) {
    s += a.moe_interval == 1 ? ": every layer" : ": every " + std::to_string(a.moe_interval) + "th layer";
    if (a.dense_layers > 0) s += " after the first " + std::to_string(a.dense_layers);
  }
  return s + ")";
}

std::string attention_text(const AttentionSpec& a) {
  std::string s = std::string(to_string(a.kind)) + ", " + std::to_string(a.num_heads) + " heads";
  if (a.kind == AttentionKind::kMla) {
    if (a.q_lora_rank > 0) s += ", q_lora_rank " + std::to_string(a.q_lora_rank);
    return s + ", kv_lora_rank " + std::to_string(a.kv_lora_rank) + ", q/k head " + std::to_string(a.qk_nope_head_dim) +
           " + " + std::to_string(a.qk_rope_head_dim) + " rope, v head " + std::to_string(a.v_head_dim);
  }
  if (a.kind == AttentionKind::kGqa) s += " in " + std::to_string(a.num_kv_heads) + " key/value groups";
  s += ", head_dim " + std::to_string(a.head_dim);
  if (a.qk_norm) s += ", q/k norm";
  if (a.sinks) s += ", sinks";
  return s;
}

void describe(const ModelSpec& m, const ParameterCount& c, std::ostream& out) {
  const ArchitectureSpec& a = m.architecture;
  out << m.name << " (" << m.origin.file << ")\n";
  out << "  layers:     " << layer_pattern(m, c) << "\n";
  out << "  attention:  " << attention_text(a.attention) << "\n";
  if (m.has_moe_layers()) {
    out << "  MoE layer:  " << m.num_experts << " routed experts top-" << m.top_k << ", d_ffn " << m.d_ffn;
    if (m.shared_experts.count > 0)
      out << ", " << m.shared_experts.count << " shared d_ffn " << m.shared_experts.d_ffn;
    out << "\n";
  }
  if (c.dense_layers > 0) out << "  dense MLP:  d_ffn " << a.dense_d_ffn << "\n";
  out << "  other:      d_model " << m.d_model << ", " << to_string(m.activation) << ", " << to_string(a.norm)
      << ", " << to_string(a.positions) << " positions, vocabulary " << a.vocab_size
      << (a.tied_embeddings ? " (tied)" : " (untied)") << ", sequence " << a.seq_len << ", MTP depth " << a.mtp_depth
      << (a.linear_bias ? ", linear biases" : "") << "\n";
}

// One count row, with the published figure beside it when there is one.
void row(std::ostream& out, const char* name, std::int64_t n, double published = 0, const std::string& note = "") {
  char buf[96];
  std::snprintf(buf, sizeof buf, "  %-22s %12s", name, count_text(static_cast<double>(n)).c_str());
  out << buf;
  if (published > 0)
    out << "   published " << count_text(published) << note << ": "
        << signed_percent(static_cast<double>(n) / published - 1);
  out << "\n";
}

void print_counts(const ModelSpec& m, const ParameterCount& c, std::ostream& out) {
  out << "parameters\n";
  row(out, "embedding", c.embedding);
  if (c.positions > 0) row(out, "learned positions", c.positions);
  row(out, "output head", c.output_head);
  row(out, "attention", c.attention);
  if (c.dense_layers > 0) row(out, "dense MLP", c.dense_mlp);
  if (c.moe_layers > 0) {
    row(out, "routed experts", c.routed_experts);
    if (c.shared_experts > 0) row(out, "shared experts", c.shared_experts);
    row(out, "routers", c.routers);
  }
  row(out, "norms", c.norms);
  const PublishedParameters none;
  const PublishedParameters& p = m.published ? *m.published : none;
  row(out, "total", c.total(), p.total);
  row(out, "active", c.active(), p.active_counts_embedding ? 0 : p.active);
  row(out, "active with embedding", c.active_with_embedding(), p.active_counts_embedding ? p.active : 0);
  if (c.mtp > 0) row(out, "MTP modules (apart)", c.mtp);
  if (m.published) out << "  source: " << p.source << "\n";
}

std::string flops_text(double f) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2f GFLOP", f / 1e9);
  return buf;
}

void print_flops(const ModelSpec& m, const ParameterCount& c, const TrainingFlops& f, std::ostream& out) {
  out << "training FLOPs per token (forward and backward GEMMs, Megatron-LM's formula; sequence "
      << m.architecture.seq_len << ")\n";
  char buf[96];
  const auto line = [&](const char* name, double v) {
    std::snprintf(buf, sizeof buf, "  %-22s %14s\n", name, flops_text(v).c_str());
    out << buf;
  };
  line("attention", f.attention);
  line("MLP and experts", f.mlp);
  line("logits", f.logits);
  if (f.mtp > 0) line("MTP norms, projection", f.mtp);
  line("total", f.total());
  line("6 x active parameters", 6.0 * static_cast<double>(c.active()));
}

std::string gib_text(double bytes) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / static_cast<double>(kGiB));
  return buf;
}

void print_states(const TrainingLayout& l, const std::vector<StageModelStates>& stages, std::ostream& out) {
  out << "model states per GPU (tp " << l.tp << ", pp " << l.pp << ", ep " << l.ep << ", dp " << l.dp << ", ZeRO "
      << l.zero_stage << "; mixed-precision Adam)\n";
  char buf[160];
  std::snprintf(buf, sizeof buf, "  %-7s %-9s %12s %12s %12s %12s %12s\n", "stage", "layers", "parameters", "weights",
                "gradients", "optimizer", "total");
  out << buf;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const StageModelStates& s = stages[i];
    const std::string layers = std::to_string(s.first_layer) + "-" + std::to_string(s.first_layer + s.layers - 1);
    std::snprintf(buf, sizeof buf, "  %-7zu %-9s %12s %12s %12s %12s %12s\n", i, layers.c_str(),
                  count_text(s.dense_params + s.expert_params).c_str(), gib_text(s.weight_bytes).c_str(),
                  gib_text(s.grad_bytes).c_str(), gib_text(s.optimizer_bytes).c_str(), gib_text(s.bytes()).c_str());
    out << buf;
  }
}

nlohmann::json states_json(const std::vector<StageModelStates>& stages) {
  nlohmann::json j = nlohmann::json::array();
  for (const StageModelStates& s : stages)
    j.push_back({{"first_layer", s.first_layer}, {"layers", s.layers}, {"dense_parameters", s.dense_params},
                 {"expert_parameters", s.expert_params}, {"weight_bytes", s.weight_bytes},
                 {"gradient_bytes", s.grad_bytes}, {"optimizer_bytes", s.optimizer_bytes}, {"bytes", s.bytes()}});
  return j;
}

nlohmann::json to_json(const ModelSpec& m, const ParameterCount& c, const TrainingFlops& f) {
  nlohmann::json j = {{"name", m.name},
                      {"file", m.origin.file},
                      {"dense_layers", c.dense_layers},
                      {"moe_layers", c.moe_layers},
                      {"parameters",
                       {{"embedding", c.embedding},
                        {"positions", c.positions},
                        {"output_head", c.output_head},
                        {"attention", c.attention},
                        {"dense_mlp", c.dense_mlp},
                        {"routed_experts", c.routed_experts},
                        {"shared_experts", c.shared_experts},
                        {"routers", c.routers},
                        {"norms", c.norms},
                        {"total", c.total()},
                        {"active", c.active()},
                        {"active_with_embedding", c.active_with_embedding()},
                        {"mtp", c.mtp}}}};
  j["training_flops_per_token"] = {
      {"attention", f.attention}, {"mlp", f.mlp}, {"logits", f.logits}, {"mtp", f.mtp}, {"total", f.total()}};
  if (m.published) {
    j["published"] = {{"total", m.published->total},
                      {"active", m.published->active},
                      {"active_counts_embedding", m.published->active_counts_embedding},
                      {"source", m.published->source}};
  }
  return j;
}

}  // namespace

int run_model(const ModelArgs& a, std::ostream& out) {
  check_outputs({{"--json", a.json_path}});
  const ModelSpec model = load_model_spec(resolve_model_arg(a.model_path, "--model"));
  const ParameterCount counts = count_parameters(model);
  const TrainingFlops flops = megatron_training_flops_per_token(model);
  const std::vector<StageModelStates> states = model_states_per_gpu(model, a.layout);
  if (!a.json_path.empty()) {
    nlohmann::json j = to_json(model, counts, flops);
    j["model_states_per_gpu"] = states_json(states);
    write_output("--json", a.json_path, j.dump(2) + "\n");
  }
  if (a.json_path == "-") return 0;
  describe(model, counts, out);
  print_counts(model, counts, out);
  print_flops(model, counts, flops, out);
  print_states(a.layout, states, out);
  return 0;
}

}  // namespace moesim::cli
