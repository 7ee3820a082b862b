#include "validate/layer_replay.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <string_view>

#include "sim/core/error.h"
#include "sim/step/step_simulation.h"
#include "validate/step_replay.h"

namespace moesim::validate {

namespace {

// The task's name after "<where>.<pass>." with a "recompute." prefix dropped: "fc1.wgrad", "softmax".
std::string_view task_name(std::string_view id) {
  for (std::string_view pass : {".fwd.", ".bwd."}) {
    const auto at = id.find(pass);
    if (at != std::string_view::npos) {
      id.remove_prefix(at + pass.size());
      break;
    }
  }
  constexpr std::string_view kRecompute = "recompute.";
  if (id.substr(0, kRecompute.size()) == kRecompute) id.remove_prefix(kRecompute.size());
  return id;
}

// The unfused or flash attention core's kernels, forward, recomputed or backward.
bool core_task(const Task& t) {
  if (t.stage == "attention") return true;
  const std::string_view n = task_name(t.id);
  return n == "scores" || n == "softmax" || n == "attn_dropout" || n == "context" || n.substr(0, 4) == "core";
}

void add(LayerPassTimes& p, const Task& t, TimeNs duration) {
  if (t.is_collective())
    p.comm += duration;
  else if (core_task(t))
    p.core += duration;
  else if (std::holds_alternative<GemmWork>(t.work))
    p.gemm += duration;
  else
    p.memory += duration;
}

// The forward and backward of `layer` for microbatch 0, as the header says.
void measure_layer(const SimulatedStep& step, int layer, LayerComparison& c) {
  const std::string prefix = "mb0.L" + std::to_string(layer) + ".";
  constexpr TimeNs kNone = std::numeric_limits<TimeNs>::max();
  TimeNs first[2] = {kNone, kNone}, last[2] = {0, 0};
  LayerPassTimes* pass[2] = {&c.forward, &c.backward};
  const TaskGraph& g = step.graph.graph;
  for (TaskIndex i = 0; i < g.num_tasks(); ++i) {
    const Task& t = g.task(i);
    if (t.layer != layer || t.id.compare(0, prefix.size(), prefix) != 0) continue;
    const int b = t.pass == Pass::kBackward || t.stage == "recompute" ? 1 : 0;
    const TaskRecord& r = step.run.trace.records[i];
    first[b] = std::min(first[b], r.start_ns);
    last[b] = std::max(last[b], r.end_ns);
    add(*pass[b], t, r.end_ns - r.start_ns);
  }
  if (first[0] == kNone || first[1] == kNone) throw InternalError("no tasks of layer " + std::to_string(layer) + " of microbatch 0");
  c.forward.span = last[0] - first[0];
  c.backward.span = last[1] - first[1];
}

LayerComparison simulate_layer_row(const StepDataset& d, const StepRow& row, NetworkModel network) {
  LayerComparison c;
  c.row = row;
  const PreparedStepRow p = prepare_step_row(d, row);
  c.not_simulated = p.comparison.not_simulated;
  if (!c.not_simulated.empty()) return c;
  c.layers = p.model.num_layers;
  c.layer = c.layers / 2;
  try {
    measure_layer(simulate_training_step(p.model, p.cluster, p.spec, NetworkChoice{network, AllToAllAlgorithm::kPairwise}),
                  c.layer, c);
  } catch (const InputError& e) {
    c.not_simulated = "the simulator refuses it: " + std::string(e.what());
  }
  return c;
}

double ms(TimeNs t) { return static_cast<double>(t) / 1e6; }

std::string percent(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", 100 * x);
  return buf;
}

}  // namespace

LayerDatasetReport replay_layer_times(const StepDataset& d, NetworkModel network) {
  LayerDatasetReport report{d, {}, network};
  if (d.layer_times.empty()) return report;
  const std::vector<StepRow> forward = read_step_table(d, d.layer_times, "forward_ms");
  const std::vector<StepRow> backward = read_step_table(d, d.layer_times, "backward_ms");
  for (std::size_t i = 0; i < forward.size(); ++i) {
    if (!forward[i].measured || !backward[i].measured)
      throw InputError(SourceLocation{(d.dir / d.layer_times).string(), forward[i].line, 1},
                       "a layer time needs forward_ms and backward_ms");
    prepare_step_row(d, forward[i]);  // bad data before any simulation
  }
  for (std::size_t i = 0; i < forward.size(); ++i) {
    report.rows.push_back(simulate_layer_row(d, forward[i], network));
    report.rows.back().measured_backward = *backward[i].measured;
  }
  return report;
}

void print_layer_report(const LayerDatasetReport& r, std::ostream& out) {
  const StepDataset& d = r.dataset;
  out << "== " << d.name << ": one layer's forward and backward (" << (d.dir / d.layer_times).generic_string() << ")\n";
  out << "   source:    " << d.source << "\n";
  out << "   simulated: " << d.hardware << " scaled to each row's GPUs, " << to_string(r.network)
      << " network model, attention " << to_string(d.attention)
      << "; the whole step, then the span of the middle layer's tasks of microbatch 0 (ms)\n";
  char line[320];
  std::snprintf(line, sizeof line, "   %4s %-8s %3s %-9s %6s %6s %7s %6s %6s %7s %6s %6s %7s\n", "line", "model", "SP", "recompute",
                "fwd", "sim", "error", "bwd", "sim", "error", "f+b", "sim", "error");
  out << line;
  for (const LayerComparison& c : r.rows) {
    const StepRow& w = c.row;
    std::snprintf(line, sizeof line, "   %4d %-8s %3s %-9s ", w.line, w.model.c_str(), w.sequence_parallel ? "yes" : "no",
                  std::string(to_string(*w.recompute)).c_str());
    out << line;
    if (!c.not_simulated.empty()) {
      out << "not simulated: " << c.not_simulated << "\n";
      continue;
    }
    const double mf = *w.measured, mb = c.measured_backward;
    const double sf = ms(c.forward.span), sb = ms(c.backward.span);
    std::snprintf(line, sizeof line, "%6.1f %6.2f %7s %6.1f %6.2f %7s %6.1f %6.2f %7s\n", mf, sf, percent(sf / mf - 1).c_str(), mb,
                  sb, percent(sb / mb - 1).c_str(), mf + mb, sf + sb, percent((sf + sb) / (mf + mb) - 1).c_str());
    out << line;
  }
  out << "   simulated time by kind (ms, the durations of the layer's tasks; overlap = their sum - span):\n";
  std::snprintf(line, sizeof line, "   %4s %-4s %7s %7s %7s %7s %7s %7s\n", "line", "pass", "GEMMs", "core", "memory", "tp comm",
                "overlap", "span");
  out << line;
  for (const LayerComparison& c : r.rows) {
    if (!c.not_simulated.empty()) continue;
    for (const auto& [name, p] : {std::pair{"fwd", &c.forward}, std::pair{"bwd", &c.backward}}) {
      std::snprintf(line, sizeof line, "   %4d %-4s %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f\n", c.row.line, name, ms(p->gemm),
                    ms(p->core), ms(p->memory), ms(p->comm), ms(p->busy() - p->span), ms(p->span));
      out << line;
    }
  }
  if (!r.rows.empty() && r.rows.front().not_simulated.empty())
    out << "   (layer " << r.rows.front().layer << " of " << r.rows.front().layers << ")\n";
}

}  // namespace moesim::validate
