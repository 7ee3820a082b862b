#include "sim/cli/step_plan_command.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>

#include "sim/cli/cluster_flags.h"
#include "sim/cli/list_args.h"
#include "sim/cli/output_file.h"
#include "sim/cli/progress.h"
#include "sim/core/error.h"
#include "sim/search/layout_planner.h"
#include "sim/search/thread_pool.h"
#include "sim/spec/loader.h"
#include "sim/spec/presets.h"
#include "sim/spec/yaml_reader.h"
#include "sim/spec/step_options.h"
#include "sim/step/step_shape.h"

namespace moesim::cli {
namespace {

using Json = nlohmann::ordered_json;
using search::LayoutPlan;
using search::PlannedLayout;

double gib(std::int64_t bytes) { return static_cast<double>(bytes) / static_cast<double>(std::int64_t{1} << 30); }

// `values` without repeats, in the order first given.
template <typename T>
std::vector<T> first_of_each(const std::vector<T>& values) {
  std::vector<T> out;
  for (const T& v : values)
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  return out;
}

// A comma-separated list of names (--recompute, --schedules), each once in the order first given;
// InputError naming the flag, the name and the valid ones otherwise.
template <typename Parse>
auto named_list(const char* flag, const std::string& text, const char* what, Parse parse,
                const std::vector<std::string>& valid) {
  std::vector<typename decltype(parse(std::string_view()))::value_type> out;
  for (const std::string& name : text.empty() ? std::vector<std::string>{} : split_list(flag, text)) {
    const auto value = parse(name);
    if (!value)
      throw InputError(std::string(flag) + ": '" + name + "' is not " + what + "; valid: " + YamlValue::join_names(valid));
    out.push_back(*value);
  }
  return first_of_each(out);
}

std::vector<int> degrees(const char* flag, const std::string& text) {
  std::vector<int> out;
  if (!text.empty())
    for (std::int64_t v : parse_int_list(flag, text, 1, kMaxGroupSize)) out.push_back(static_cast<int>(v));
  return first_of_each(out);
}

// A list flag of a whole-step option's values (--pp, --vpp, --cp, --etp): the option's range.
std::vector<int> step_degrees(const char* flag, const std::string& text) {
  std::vector<int> out;
  const StepOption& o = step_option(flag);
  if (!text.empty())
    for (std::int64_t v : parse_int_list(flag, text, static_cast<std::int64_t>(o.min), static_cast<std::int64_t>(o.max)))
      out.push_back(static_cast<int>(v));
  return first_of_each(out);
}

search::LayoutAxes fixed_axes(const PlanArgs& a, const StepPlanArgs& s) {
  search::LayoutAxes only;
  only.tp = degrees("--tp", a.tp);
  only.ep = degrees("--ep", a.ep);
  only.pp = step_degrees("--pp", s.pp);
  only.vpp = step_degrees("--vpp", s.vpp);
  only.cp = step_degrees("--cp", s.cp);
  only.etp = step_degrees("--etp", s.etp);
  if (!s.micro_batch.empty()) {
    const StepOption& mb = step_option("--micro-batch");
    only.micro_batch = first_of_each(parse_int_list("--micro-batch", s.micro_batch, static_cast<std::int64_t>(mb.min),
                                                    static_cast<std::int64_t>(mb.max)));
  }
  only.recompute = named_list("--recompute", s.recompute, "a recomputation", parse_recompute, recompute_names());
  return only;
}

std::vector<RecomputeModules> selective_sets(const StepPlanArgs& s, const search::LayoutAxes& only) {
  if (s.recompute_modules.empty()) return {};
  if (std::find(only.recompute.begin(), only.recompute.end(), Recompute::kSelective) == only.recompute.end())
    throw InputError("--recompute-modules '" + s.recompute_modules +
                     "' says what selective recomputation re-runs; give --recompute with selective among its values");
  return parse_recompute_module_sets(s.recompute_modules);
}

// The recompute column's word for a layout: "selective" for the one set a request gives (or the
// default), "sel <k>" for the k-th of several (the footnote says what each re-runs).
std::string recompute_word(const StepSpec& s, const std::vector<RecomputeModules>& sets) {
  if (s.recompute != Recompute::kSelective || sets.size() < 2) return std::string(to_string(s.recompute));
  const auto it = std::find(sets.begin(), sets.end(), s.recompute_modules);
  return "sel " + std::to_string(it - sets.begin() + 1);
}

search::LayoutRequest layout_request(const PlanArgs& a, const StepPlanArgs& s) {
  search::LayoutRequest r;
  r.model = load_model_spec(resolve_model_arg(a.model_path, "--model"));
  r.cluster = scaled_cluster(load_hardware_spec(resolve_hardware_arg(a.hardware_path, "--hardware"), a.calibration_path),
                             a.gpus, a.nodes);
  r.global_batch = s.global_batch;
  StepSpec one;  // the options every layout takes: --seq, --attention, --host-launch-us, --dispatcher
  s.options.apply(one);
  r.seq = one.seq;
  r.attention = one.attention;
  RunSpec run;  // the run options the layout plan reads: --network, --compute, --routing, --seed
  a.options.apply(run);
  r.network = NetworkChoice{run.network, AllToAllAlgorithm::kPairwise, run.compute};
  if (!a.chunks.empty()) r.moe_chunks = parse_chunk_list("--chunks", a.chunks);
  r.schedules = named_list("--schedules", s.schedules, "a schedule", parse_pipeline_schedule, pipeline_schedule_names());
  if (!s.zero_stages.empty())
    for (std::int64_t z : parse_int_list("--zero-stages", s.zero_stages, 0, 3)) r.zero_stages.push_back(static_cast<int>(z));
  r.only = fixed_axes(a, s);
  r.selective_sets = selective_sets(s, r.only);
  // A set that drops nothing of this model is a mistake of the request, not a layout's rejection.
  for (const RecomputeModules& modules : r.selective_sets) {
    StepSpec spec;
    spec.recompute = Recompute::kSelective;
    spec.recompute_modules = modules;
    check_recompute_modules(r.model, spec);
  }
  r.routing = run.routing;
  r.seed = run.seed;
  r.host_launch_ns = one.host_launch_ns;
  r.dispatcher = one.dispatcher;
  r.try_moe_ep_overlap = s.overlap_moe_ep_comm;
  r.try_tp_pp_dp_mapping = s.tp_pp_dp_mapping;
  if (r.try_moe_ep_overlap && !r.model.has_moe_layers())
    throw InputError("--overlap-moe-expert-parallel-comm overlaps the MoE layers' all-to-alls; " + r.model.name +
                     " has none");
  r.top = s.top;
  r.jobs = a.jobs > 0 ? a.jobs : search::default_jobs();
  return r;
}

// "6,8,8,7": an uneven split's layers per model part, as --part-layers takes them.
std::string part_layers_text(const std::vector<int>& parts) {
  std::string out;
  for (std::size_t k = 0; k < parts.size(); ++k) out += (k ? "," : "") + std::to_string(parts[k]);
  return out;
}

// `moe`: the model has MoE layers, whose layouts also say etp and the sub-stage chunks (a dense
// model's are always etp = tp and 1, so its output leaves them out).
std::string layout_words(const PlannedLayout& p, bool moe) {
  const StepSpec& s = p.candidate.spec;
  std::ostringstream out;
  out << "tp " << s.layout.tp << ", cp " << s.layout.cp << ", pp " << s.layout.pp << ", vpp " << s.layout.vpp
      << ", ep " << s.layout.ep;
  if (moe) out << ", etp " << s.layout.expert_tp();
  out << ", dp " << s.layout.dp() << ", micro-batch " << s.micro_batch;
  if (moe) out << ", chunks " << s.moe_chunks;
  if (s.moe_strategy != MemoryStrategy::kNone) out << ", memory reuse " << to_string(s.moe_strategy);
  if (s.schedule) out << ", schedule " << to_string(*s.schedule);
  if (s.overlap_moe_ep_comm) out << ", combined 1F1B (--overlap-moe-expert-parallel-comm)";
  if (s.tp_pp_dp_mapping) out << ", ranks tp-cp-pp-dp (--use-tp-pp-dp-mapping)";
  out << ", recompute " << to_string(s.recompute);
  if (s.recompute == Recompute::kSelective) out << " (" << to_string(s.recompute_modules) << ")";
  out << ", ZeRO " << s.zero_stage;
  if (!s.part_layers.empty()) out << ", layers per part " << part_layers_text(s.part_layers);
  return out.str();
}

// ", host launches X us each" when the host is modelled (--host-launch-us), ", MoE dispatcher
// deepep" for --dispatcher deepep; nothing for the defaults.
std::string host_launch_text(const search::LayoutRequest& r) {
  return (r.host_launch_ns ? ", " + host_launch_phrase(*r.host_launch_ns) : std::string()) +
         (r.dispatcher != TokenDispatcher::kAllToAll ? ", MoE dispatcher " + std::string(to_string(r.dispatcher))
                                                     : std::string());
}

// ", ZeRO stages 0,1,2,3", ", schedules ...", ", memory reuse ..." for what --zero-stages,
// --schedules and --strategies name; nothing for their defaults.
std::string tried_text(const search::LayoutRequest& r) {
  std::string out;
  auto list = [&](const char* what, const std::vector<std::string>& names) {
    if (names.empty()) return;
    out += std::string(", ") + what + " ";
    for (std::size_t k = 0; k < names.size(); ++k) out += (k ? "," : "") + names[k];
  };
  std::vector<std::string> zeros, schedules, strategies;
  if (!r.zero_stages.empty())
    for (int z : search::zero_stages(r)) zeros.push_back(std::to_string(z));
  for (PipelineSchedule s : r.schedules) schedules.emplace_back(to_string(s));
  for (MemoryStrategy s : r.moe_strategies) strategies.emplace_back(to_string(s));
  list("ZeRO stages", zeros);
  list("schedules", schedules);
  list("memory reuse", strategies);
  if (r.try_moe_ep_overlap) out += ", each with and without the combined 1F1B where it runs";
  if (r.try_tp_pp_dp_mapping) out += ", each with pp > 1 in the rank orders tp-cp-ep-dp-pp and tp-cp-pp-dp";
  return out;
}

void print_header(std::ostream& out, const search::LayoutRequest& r, const LayoutPlan& plan) {
  const std::int64_t seq = r.seq > 0 ? r.seq : r.model.architecture.seq_len;
  out << "moesim: layouts of " << r.model.name << " on " << r.cluster.num_gpus() << " x " << r.cluster.node.gpu.name
      << " (" << r.cluster.name << "), global batch " << r.global_batch << " x " << seq << " tokens, "
      << to_string(r.attention) << " attention"
      << (r.routing.balanced() ? std::string() : ", routing " + r.routing.to_string() + " (seed " + std::to_string(r.seed) + ")")
      << host_launch_text(r) << tried_text(r) << "\n";
  const auto& e = plan.enumeration;
  out << "candidates: " << e.considered << " considered, " << e.fitting.size() << " legal and fit (closed-form memory), "
      << plan.estimates.size() << " estimated, the best " << plan.simulated.size() << " simulated in full\n";
  if (!e.rejections.empty()) out << "rejected:\n";
  char buf[64];
  for (const auto& rej : e.rejections) {
    std::snprintf(buf, sizeof buf, "%8lld  ", static_cast<long long>(rej.count));
    out << buf << rej.reason << "\n";
  }
}

// The table's optional columns: `moe` the etp and chunks (layout_words), `reuse` the MoE
// memory-reuse strategy (when the request tries strategies), `schedule` the pipeline schedule
// (when it names schedules), `overlap` whether the MoE all-to-alls run in the combined 1F1B (when
// it tries that), `ranks` the rank order (when it tries tp-cp-pp-dp).
struct TableColumns {
  bool moe = false, reuse = false, schedule = false, overlap = false, ranks = false;
};

TableColumns table_columns(const search::LayoutRequest& r) {
  return {r.model.has_moe_layers(), !r.moe_strategies.empty(), !r.schedules.empty(), r.try_moe_ep_overlap,
          r.try_tp_pp_dp_mapping};
}

std::string table_row(std::size_t rank, const PlannedLayout& p, const TableColumns& c,
                      const std::vector<RecomputeModules>& sets) {
  const auto [moe, reuse, schedule, overlap, ranks] = c;
  const StepSpec& s = p.candidate.spec;
  const StepReport& r = *p.simulated;
  char buf[256];
  std::string row;
  std::snprintf(buf, sizeof buf, "%4zu  %2d  %2d  %2d  %3d  %3d", rank, s.layout.tp, s.layout.cp, s.layout.pp,
                s.layout.vpp, s.layout.ep);
  row += buf;
  if (moe) {
    std::snprintf(buf, sizeof buf, "  %3d", s.layout.expert_tp());
    row += buf;
  }
  std::snprintf(buf, sizeof buf, "  %3d  %3lld", s.layout.dp(), static_cast<long long>(s.micro_batch));
  row += buf;
  if (moe) {
    std::snprintf(buf, sizeof buf, "  %6d", s.moe_chunks);
    row += buf;
  }
  if (reuse) {
    std::snprintf(buf, sizeof buf, "  %5s", std::string(to_string(s.moe_strategy)).c_str());
    row += buf;
  }
  if (schedule) {
    std::snprintf(buf, sizeof buf, "  %-11s", std::string(to_string(s.effective_schedule())).c_str());
    row += buf;
  }
  if (overlap) row += s.overlap_moe_ep_comm ? "  yes    " : "  no     ";
  if (ranks) row += s.tp_pp_dp_mapping ? "  tp-pp-dp" : "  default ";
  std::snprintf(buf, sizeof buf, "  %-9s  %4d  %9.4f  %12.1f  %8.1f  %11.1f  %4.1f%%  %6.3f  %8.2f  %s\n",
                recompute_word(s, sets).c_str(), s.zero_stage, static_cast<double>(r.step_ns) * 1e-9,
                r.tokens_per_s_per_gpu, p.estimate.tokens_per_s_per_gpu, r.model_tflops_per_gpu, 100 * r.mfu,
                r.bubble_fraction, gib(r.peak_memory_bytes), r.fits ? "yes" : "no");
  return row + buf;
}

// The table footnote's words on what selective recomputation re-runs, for the sets given.
std::string selective_note(const std::vector<RecomputeModules>& sets) {
  if (sets.size() == 1) return "; selective re-runs " + to_string(sets.front());
  std::string out;
  for (std::size_t k = 0; k < sets.size(); ++k) out += "; sel " + std::to_string(k + 1) + " re-runs " + to_string(sets[k]);
  return out;
}

// `sets`: the selective recomputations' module sets the request gives (none: the default).
void print_table(std::ostream& out, const LayoutPlan& plan, int top, const TableColumns& c,
                 const std::vector<RecomputeModules>& sets) {
  const auto [moe, reuse, schedule, overlap, ranks] = c;
  if (plan.simulated.empty()) {
    out << "\nno layout is legal and fits\n";
    return;
  }
  out << "\nrank  tp  cp  pp  vpp   ep" << (moe ? "  etp" : "") << "   dp   mb" << (moe ? "  chunks" : "")
      << (reuse ? "  reuse" : "") << (schedule ? "  schedule   " : "") << (overlap ? "  a2a ovl" : "")
      << (ranks ? "  ranks   " : "") << "  recompute  zero   step (s)  tokens/s/GPU  estimate  TFLOP/s/GPU    MFU  bubble  peak GiB  fits\n";
  const std::size_t shown = std::min(plan.simulated.size(), static_cast<std::size_t>(std::max(top, 0)));
  for (std::size_t k = 0; k < shown; ++k) out << table_row(k + 1, plan.simulated[k], c, sets);
  for (std::size_t k = 0; k < shown; ++k) {
    const std::vector<int>& parts = plan.simulated[k].candidate.spec.part_layers;
    if (!parts.empty())
      out << "rank " << k + 1 << ": the pipeline's parts do not divide the layers; layers per part "
          << part_layers_text(parts) << " (--part-layers)\n";
  }
  out << "(simulated in full; estimate: the ranking's tokens/s per GPU from a sample of a few microbatches"
      << (schedule ? " (zb-h1, dualpipe, dualpipev: the whole step)" : "") << "; sequence parallel with tp > 1"
      << (schedule ? "" : "; schedule 1f1b, interleaved with vpp > 1")
      << (moe ? "; etp: the experts' tensor-parallel size, folded where it is not tp; chunks: the MoE layers' "
                "sub-stage pipelining"
              : "")
      << (reuse ? "; reuse: the MoE layers' memory-reuse strategy (--strategies)" : "")
      << (overlap ? "; a2a ovl: the MoE all-to-alls overlapped in Megatron-Core's combined 1F1B "
                    "(--overlap-moe-expert-parallel-comm)"
                  : "")
      << (ranks ? "; ranks: default tp-cp-ep-dp-pp, or tp-pp-dp: tp-cp-pp-dp (--use-tp-pp-dp-mapping)" : "")
      << selective_note(sets) << ")\n";
}

Json layout_json(const PlannedLayout& p) {
  const StepSpec& s = p.candidate.spec;
  const StepReport& r = *p.simulated;
  Json j;
  j["tp"] = s.layout.tp;
  j["cp"] = s.layout.cp;
  j["pp"] = s.layout.pp;
  j["vpp"] = s.layout.vpp;
  j["ep"] = s.layout.ep;
  j["etp"] = s.layout.expert_tp();
  j["dp"] = s.layout.dp();
  j["micro_batch"] = s.micro_batch;
  j["moe_chunks"] = s.moe_chunks;
  j["moe_strategy"] = std::string(to_string(s.moe_strategy));
  j["schedule"] = std::string(to_string(s.effective_schedule()));
  j["overlap_moe_expert_parallel_comm"] = s.overlap_moe_ep_comm;
  j["rank_order"] = s.tp_pp_dp_mapping ? "tp-cp-pp-dp" : "tp-cp-ep-dp-pp";
  j["recompute"] = std::string(to_string(s.recompute));
  if (s.recompute == Recompute::kSelective) j["recompute_modules"] = to_string(s.recompute_modules);
  j["sequence_parallel"] = s.sequence_parallel;
  j["zero"] = s.zero_stage;
  j["part_layers"] = s.part_layers;  // empty: an even split
  j["estimate"] = {{"step_time_s", static_cast<double>(p.estimate.step_ns) * 1e-9},
                   {"tokens_per_s_per_gpu", p.estimate.tokens_per_s_per_gpu},
                   {"sampled_microbatches", p.estimate.sampled_microbatches},
                   {"memory_bytes", p.candidate.memory_estimate_bytes}};
  j["step_time_s"] = static_cast<double>(r.step_ns) * 1e-9;
  j["tokens_per_s_per_gpu"] = r.tokens_per_s_per_gpu;
  j["model_tflops_per_gpu"] = r.model_tflops_per_gpu;
  j["mfu"] = r.mfu;
  j["bubble_fraction"] = r.bubble_fraction;
  j["peak_memory_bytes"] = r.peak_memory_bytes;
  j["fits"] = r.fits;
  return j;
}

Json plan_json(const search::LayoutRequest& r, const LayoutPlan& plan) {
  Json j;
  j["gpus"] = r.cluster.num_gpus();
  j["considered"] = plan.enumeration.considered;
  j["fitting"] = plan.enumeration.fitting.size();
  j["estimated"] = plan.estimates.size();
  Json rejections = Json::array();
  for (const auto& rej : plan.enumeration.rejections) rejections.push_back({{"reason", rej.reason}, {"count", rej.count}});
  j["rejections"] = std::move(rejections);
  Json layouts = Json::array();
  for (const PlannedLayout& p : plan.simulated) layouts.push_back(layout_json(p));
  j["layouts"] = std::move(layouts);  // every layout simulated in full, ranked
  return j;
}

Json request_json(const search::LayoutRequest& r, const std::string& version) {
  Json j;
  j["moesim_version"] = version;
  j["model"] = r.model.name;
  j["hardware"] = r.cluster.name;
  j["global_batch"] = r.global_batch;
  j["seq"] = r.seq > 0 ? r.seq : r.model.architecture.seq_len;
  j["attention"] = std::string(to_string(r.attention));
  j["network"] = std::string(to_string(resolve_network_model(r.cluster, r.network.model)));
  j["top"] = r.top;
  j["routing"] = r.routing.to_string();
  j["seed"] = r.seed;
  if (r.host_launch_ns) j["host_launch_s"] = static_cast<double>(*r.host_launch_ns) * 1e-9;
  if (r.dispatcher != TokenDispatcher::kAllToAll) j["dispatcher"] = std::string(to_string(r.dispatcher));
  j["zero_stages"] = search::zero_stages(r);
  Json schedules = Json::array(), strategies = Json::array();
  for (PipelineSchedule s : r.schedules) schedules.push_back(std::string(to_string(s)));
  for (MemoryStrategy s : r.moe_strategies) strategies.push_back(std::string(to_string(s)));
  j["schedules"] = schedules;            // empty: 1f1b, interleaved with vpp > 1
  j["moe_strategies"] = strategies;      // empty: none
  j["try_overlap_moe_expert_parallel_comm"] = r.try_moe_ep_overlap;
  j["try_tp_pp_dp_mapping"] = r.try_tp_pp_dp_mapping;
  return j;
}

search::PlanProgress progress_bar() {
  auto bars = std::make_shared<std::map<std::string, Progress>>();
  return [bars](const char* phase, std::size_t done, std::size_t total) {
    auto it = bars->find(phase);
    if (it == bars->end() || done == 0) it = bars->insert_or_assign(phase, Progress(total, phase, "layouts", false)).first;
    it->second.update(done);
  };
}

int run_token_rate(const search::LayoutRequest& r, double target, int max_nodes, const PlanArgs& a,
                   const std::string& version, std::ostream& out) {
  const search::TokenRateSearch s = search::plan_for_token_rate(r, target, max_nodes, progress_bar());
  const std::int64_t seq = r.seq > 0 ? r.seq : r.model.architecture.seq_len;
  out << "moesim: GPUs for " << r.model.name << " on " << r.cluster.node.gpu.name << " (" << r.cluster.name
      << "), global batch " << r.global_batch << " x " << seq << " tokens, " << to_string(r.attention) << " attention"
      << host_launch_text(r) << tried_text(r) << "\n";
  char buf[256];
  std::snprintf(buf, sizeof buf, "target: %.4g tokens a day; node counts 1 to %d of %d GPUs each (--max-nodes)\n",
                target, max_nodes, r.cluster.node.gpus_per_node);
  out << buf;
  Json steps = Json::array();
  for (const search::TokenRateStep& st : s.steps) {
    std::snprintf(buf, sizeof buf, "%5d node(s) %6d GPUs: ", st.nodes, st.gpus);
    out << buf;
    Json js{{"nodes", st.nodes}, {"gpus", st.gpus}};
    if (st.best) {
      std::snprintf(buf, sizeof buf, "%.4g tokens a day (%s) with ", st.tokens_per_day,
                    st.tokens_per_day >= target ? "reaches" : "below");
      out << buf << layout_words(*st.best, r.model.has_moe_layers()) << "\n";
      js["tokens_per_day"] = st.tokens_per_day;
      js["best"] = layout_json(*st.best);
    } else {
      out << st.note << "\n";
      js["note"] = st.note;
    }
    steps.push_back(std::move(js));
  }
  Json j = request_json(r, version);
  j["target_tokens_per_day"] = target;
  j["max_nodes"] = max_nodes;
  j["searched"] = std::move(steps);
  if (s.answer) {
    const search::TokenRateStep& st = s.steps[*s.answer];
    out << "answer: " << st.nodes << " node(s), " << st.gpus << " GPUs\n";
    j["answer"] = {{"nodes", st.nodes}, {"gpus", st.gpus}};
  } else {
    out << "answer: none up to " << max_nodes << " node(s); raise --max-nodes or the global batch\n";
    j["answer"] = nullptr;
  }
  if (!a.json_path.empty()) write_output("--json", a.json_path, j.dump(2) + "\n");
  return 0;
}

}  // namespace

const std::vector<std::string>& step_plan_only_flags() {
  static const std::vector<std::string> flags{"--seq",        "--top",  "--target-tokens-per-day", "--attention",
                                              "--host-launch-us", "--dispatcher", "--zero-stages", "--schedules", "--pp",
                                              "--vpp",        "--cp",   "--etp",  "--micro-batch", "--recompute",
                                              "--recompute-modules", "--overlap-moe-expert-parallel-comm",
                                              "--use-tp-pp-dp-mapping"};
  return flags;
}

const std::vector<std::string>& layer_plan_only_flags() {
  static const std::vector<std::string> flags{
      "--tokens", "--objective", "--method", "--order",
      "--no-dtd", "--grad-sync", "--zero", "--checkpoint", "--layers", "--slots", "--chunk-align",
      "--optimizer", "--no-routing-data", "--memory-limit", "--fit", "--max-step-ms"};
  return flags;
}

int run_step_plan(const PlanArgs& a, const StepPlanArgs& s, const std::function<bool(const std::string&)>& given,
                  const std::string& version) {
  for (const std::string& flag : layer_plan_only_flags())
    if (given(flag))
      throw InputError(flag + " belongs to the MoE-layer plan; the layout plan of the whole step (--global-batch) "
                              "does not read it");
  const bool target = given("--target-tokens-per-day");
  if (given("--max-nodes") && !target)
    throw InputError("--max-nodes with --global-batch bounds the search of --target-tokens-per-day; give that too");
  if (target && (given("--gpus") || given("--nodes")))
    throw InputError("--target-tokens-per-day searches the node count itself; drop --gpus and --nodes");
  if (target && !(s.target_tokens_per_day > 0))
    throw InputError("--target-tokens-per-day must be positive, got " + std::to_string(s.target_tokens_per_day));
  check_outputs({{"--json", a.json_path}});
  search::LayoutRequest r = layout_request(a, s);
  // A fixed value may exist only on some of the node counts the token-rate search tries.
  if (!target) search::check_fixed_axes(r);
  // --strategies (the MoE-layer plan's list; here the step's MoE memory reuse): tried only when given.
  if (given("--strategies")) r.moe_strategies = first_of_each(parse_strategy_list("--strategies", a.strategies));
  std::ostream& out = a.json_path == "-" ? std::cerr : std::cout;
  if (target) return run_token_rate(r, s.target_tokens_per_day, a.max_nodes, a, version, out);
  const LayoutPlan plan = search::plan_layouts(r, progress_bar());
  print_header(out, r, plan);
  print_table(out, plan, r.top, table_columns(r), r.selective_sets);
  if (!a.json_path.empty()) {
    Json j = request_json(r, version);
    j["plan"] = plan_json(r, plan);
    write_output("--json", a.json_path, j.dump(2) + "\n");
  }
  return 0;
}

}  // namespace moesim::cli
