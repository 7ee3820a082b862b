#include "validate/step_replay.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "sim/core/error.h"
#include "sim/driver/simulation.h"
#include "sim/spec/loader.h"
#include "sim/step/step_simulation.h"

namespace moesim::validate {

namespace {

std::string join(const std::vector<std::string>& parts) {
  std::string s;
  for (const std::string& p : parts) s += (s.empty() ? "" : "; ") + p;
  return s;
}

// The architecture the row states against the preset's: a mismatch means steps.yaml maps the row
// to the wrong model, which no simulation can make right.
void check_against_preset(const StepRow& row, const ModelSpec& model, const std::string& preset, const SourceLocation& at) {
  const ArchitectureSpec& a = model.architecture;
  if (!a.present) throw InputError(at, "preset " + preset + " has no architecture section: not a whole-network model");
  const std::tuple<const char*, std::int64_t, std::int64_t> checks[] = {
      {"attention_heads", row.heads, a.attention.num_heads},
      {"hidden_size", row.hidden, model.d_model},
      {"layers", row.layers, model.num_layers},
      {"vocab_size", row.vocab, a.vocab_size}};
  for (const auto& [column, stated, preset_value] : checks)
    if (stated != 0 && stated != preset_value)
      throw InputError(at, std::string(column) + " " + std::to_string(stated) + " is not preset " + preset + "'s " +
                               std::to_string(preset_value) + " (steps.yaml maps model " + row.model + " to it)");
}

// The outcome of a goal |value| <= limit over values, unset where nothing was compared.
GoalOutcome judge(const std::vector<std::optional<double>>& values, double limit) {
  GoalOutcome g;
  for (const auto& v : values) {
    if (!v) {
      ++g.not_judged;
      continue;
    }
    ++g.judged;
    if (std::abs(*v) <= limit) ++g.within;
    if (std::abs(*v) > std::abs(g.worst)) g.worst = *v;
  }
  return g;
}

StepSpec step_spec_of(const StepDataset& d, const StepRow& row, const StepModelMapping& mapping) {
  StepSpec spec;
  spec.layout.gpus = row.gpus;
  spec.layout.tp = row.tp;
  spec.layout.pp = row.pp;
  spec.layout.vpp = row.vpp;
  spec.layout.ep = row.ep;
  spec.layout.cp = row.cp;
  // The experts' tensor-parallel size: the row's, else the one steps.yaml states for the model,
  // else Megatron-Core's default (tp).
  spec.layout.etp = row.etp > 0 ? row.etp : mapping.etp;
  spec.part_layers = row.part_layers;
  spec.global_batch = row.global_batch;
  spec.micro_batch = row.micro_batch;
  spec.seq = row.seq;
  spec.recompute = *row.recompute;
  spec.recompute_modules = row.selective_modules;
  spec.dispatcher = row.dispatcher;
  spec.sequence_parallel = row.sequence_parallel;
  spec.overlap_moe_ep_comm = row.ep_overlap;
  // steps.yaml says how the attention core ran. The 2021-22 Megatron-LM runs (Narayanan,
  // Korthikanti) name `unfused`: Megatron-LM had no fused attention kernel then (FlashAttention
  // came in mid-2022 and reached Megatron later), so those runs computed QK^T, the masked softmax,
  // dropout and the product with V as separate kernels and kept the s x s tensors for backward.
  spec.attention = d.attention;
  // fp16 or bf16 runs: both are 16-bit tensor-core math at the same peak on A100 and H100. FP8
  // runs are moesim's fp8 GEMMs with current scaling: FP8-CS is, and so is the Megatron-Bridge
  // 26.02 tables' "FP8" on H100, whose rows' presets in Bridge's scripts/performance/configs are
  // the FP8_CS ones (LLAMA3_70B_PRETRAIN_CONFIG_H100_FP8_CS_V2, QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_
  // FP8_CS_V1; there is no delayed-scaling H100 preset). fp8-blockwise (scales per 1x128 and
  // 128x128 block, computed in the cast kernel) is not modelled: run as current scaling.
  spec.gemm_precision = row.fp8 ? DType::kFp8 : DType::kBf16;
  spec.fp8_recipe = Fp8Recipe::kCurrent;
  spec.overlap_grad_reduce = mapping.overlap_grad_reduce;
  // Fully sharded data parallelism (Megatron-FSDP, the fsdp column) shards weights, gradients and
  // optimizer states over the data-parallel replicas: ZeRO 3, its weights gathered before each
  // layer's passes and its gradients reduce-scattered every microbatch.
  if (row.fsdp) spec.zero_stage = 3;
  return spec;
}

}  // namespace

PreparedStepRow prepare_step_row(const StepDataset& d, const StepRow& row) {
  PreparedStepRow p;
  p.comparison.row = row;
  StepComparison& c = p.comparison;
  std::vector<std::string> reasons;
  if (!d.not_simulated.empty()) reasons.push_back("steps.yaml: not_simulated");
  const StepModelMapping* mapping = d.not_simulated.empty() ? d.model(row.model) : nullptr;
  if (d.not_simulated.empty() && !mapping) reasons.push_back("no preset for model '" + row.model + "' in steps.yaml");
  reasons.insert(reasons.end(), row.missing.begin(), row.missing.end());
  c.not_simulated = join(reasons);
  if (!mapping) return p;
  c.preset = mapping->preset;
  const SourceLocation at{(d.dir / d.file).string(), row.line, 1};
  p.model = load_model_spec(resolve_dataset_model(d, mapping->preset, "models." + row.model));
  check_against_preset(row, p.model, mapping->preset, at);
  // published_iteration_flops counts a dense GPT's FLOPs: an MoE row's TFLOP/s would be compared
  // with a count the source did not use.
  if (d.measure == StepMeasure::kTflopsPerGpu && p.model.has_moe_layers())
    throw InputError(at, "model " + row.model + " is an MoE model (" + mapping->preset +
                             "): tflops-per-gpu counts a dense model's FLOPs; give iteration-time or tokens-per-s-per-gpu");
  const ClusterSpec preset = load_hardware_spec(resolve_dataset_hardware(d, d.hardware, "hardware"));
  p.cluster = with_gpus(preset, row.gpus, at, "gpus");
  if (!c.not_simulated.empty()) return p;
  p.spec = step_spec_of(d, row, *mapping);
  return p;
}

StepComparison simulate_step_row(const StepDataset& d, const PreparedStepRow& p, NetworkModel network) {
  StepComparison c = p.comparison;
  if (!c.not_simulated.empty()) return c;
  StepReport report;
  try {
    report = simulate_training_step(p.model, p.cluster, p.spec, NetworkChoice{network, AllToAllAlgorithm::kPairwise}).report;
  } catch (const InputError& e) {
    // The layout is one the simulator refuses (its message says why): a result to list, not bad data.
    c.not_simulated = "the simulator refuses it: " + std::string(e.what());
    return c;
  }
  c.simulated_step_s = static_cast<double>(report.step_ns) / 1e9;
  c.fits = report.fits;
  if (d.measure == StepMeasure::kIterationTime) {
    c.simulated = c.simulated_step_s;
  } else if (d.measure == StepMeasure::kTokensPerSPerGpu) {
    const double tokens = static_cast<double>(p.spec.global_batch) * static_cast<double>(p.spec.seq);
    c.simulated = tokens / (c.simulated_step_s * c.row.gpus);
  } else {
    // TFLOP/s as the source counts them; the error does not depend on the count: with the same
    // FLOPs on both sides it is measured time / simulated time - 1.
    const double flops = published_iteration_flops(p.model, p.spec.global_batch, p.spec.seq, p.spec.recompute,
                                                   p.spec.recompute_modules);
    c.simulated = flops / (c.simulated_step_s * c.row.gpus) / 1e12;
  }
  return c;
}

std::vector<SpeedupComparison> pair_speedups(const std::vector<StepComparison>& rows) {
  const auto same_run = [](const StepRow& a, const StepRow& b) {
    return a.model == b.model && a.gpus == b.gpus && a.tp == b.tp && a.pp == b.pp && a.vpp == b.vpp && a.ep == b.ep &&
           a.etp == b.etp && a.cp == b.cp && a.fp8 == b.fp8 && a.part_layers == b.part_layers && a.global_batch == b.global_batch && a.micro_batch == b.micro_batch && a.seq == b.seq;
  };
  std::vector<SpeedupComparison> out;
  for (const StepComparison& sel : rows) {
    if (sel.row.recompute != Recompute::kSelective) continue;
    const auto full = std::find_if(rows.begin(), rows.end(), [&](const StepComparison& f) {
      return f.row.recompute == Recompute::kFull && same_run(f.row, sel.row);
    });
    if (full == rows.end()) continue;
    SpeedupComparison s;
    s.model = sel.row.model;
    s.gpus = sel.row.gpus;
    s.full_line = full->row.line;
    s.selective_line = sel.row.line;
    s.measured_published = sel.row.published_speedup_pct.has_value();
    if (s.measured_published)
      s.measured_pct = *sel.row.published_speedup_pct;
    else if (full->row.measured && sel.row.measured)
      s.measured_pct = 100 * (*full->row.measured / *sel.row.measured - 1);
    if (!full->compared() || !sel.compared()) {
      const StepComparison& missing = full->compared() ? sel : *full;
      s.not_evaluated = "line " + std::to_string(missing.row.line) + ": " + missing.not_simulated;
    } else {
      s.simulated_pct = 100 * (full->simulated_step_s / sel.simulated_step_s - 1);
    }
    out.push_back(s);
  }
  return out;
}

std::optional<GoalOutcome> row_goal(const StepDatasetReport& r) {
  if (!r.dataset.goals.row_error) return std::nullopt;
  std::vector<std::optional<double>> errors;
  for (const StepComparison& c : r.rows) errors.push_back(c.compared() ? std::optional(c.error()) : std::nullopt);
  return judge(errors, *r.dataset.goals.row_error);
}

std::optional<GoalOutcome> speedup_goal(const StepDatasetReport& r) {
  if (!r.dataset.goals.speedup_points) return std::nullopt;
  std::vector<std::optional<double>> points;
  for (const SpeedupComparison& s : r.speedups)
    points.push_back(s.not_evaluated.empty() ? std::optional(s.points()) : std::nullopt);
  return judge(points, *r.dataset.goals.speedup_points);
}

}  // namespace moesim::validate
