#include "validate/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <sstream>
#include <utility>

#include "sim/core/error.h"

namespace moesim::validate {

using Json = nlohmann::json;

double TimePair::relative_error() const {
  if (reference_us == 0) return predicted_us == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return (predicted_us - reference_us) / reference_us;
}

double Comparison::stage_mean_abs_error() const {
  double sum = 0;
  int n = 0;
  for (const StageRow& s : stages)
    if (s.busy.reference_us > 0) {
      sum += std::abs(s.busy.relative_error());
      ++n;
    }
  return n == 0 ? 0.0 : sum / n;
}

double Comparison::task_median_abs_error() const {
  std::vector<double> e;
  for (const TaskRow& t : tasks)
    if (t.duration.reference_us > 0) e.push_back(std::abs(t.duration.relative_error()));
  if (e.empty()) return 0.0;
  std::sort(e.begin(), e.end());
  return e.size() % 2 == 1 ? e[e.size() / 2] : 0.5 * (e[e.size() / 2 - 1] + e[e.size() / 2]);
}

namespace {

// A value of the report at a '/'-separated path, or InputError naming the file and the path.
const Json& at(const Json& report, const std::string& file, const std::string& path) {
  const Json* v = &report;
  std::size_t from = 0;
  while (from <= path.size()) {
    const std::size_t slash = std::min(path.find('/', from), path.size());
    const std::string key = path.substr(from, slash - from);
    if (!v->is_object() || !v->contains(key))
      throw InputError(file + ": not a moesim step report (no '" + path + "'); give the JSON of `moesim run --json` "
                       "or `moesim simulate --json`");
    v = &(*v)[key];
    from = slash + 1;
  }
  return *v;
}

double number(const Json& report, const std::string& file, const std::string& path) {
  const Json& v = at(report, file, path);
  if (!v.is_number()) throw InputError(file + ": '" + path + "' must be a number, got " + v.dump());
  return v.get<double>();
}

// The keys that fix the layer's work; anything else (hardware, seed, optimizer) may differ.
const char* const kSameLayer[] = {
    "config/model/d_model",          "config/model/d_ffn",         "config/model/num_experts",
    "config/model/top_k",            "config/model/capacity_factor", "config/model/dtype",
    "config/model/gemm_precision",   "config/model/activation",    "config/run/tokens_per_gpu",
    "config/run/ep_size",            "config/run/tp_size",         "config/run/drop_duplicate_tokens",
    "config/run/num_chunks",         "config/run/order",           "config/run/checkpoint",
    "config/run/grad_sync",
    "config/run/num_moe_layers",     "config/run/strategy",        "config/run/slots",
    "config/run/routing",            "config/derived/capacity_per_expert", "config/derived/rows_per_chunk"};

std::string kind_of(const Json& report, const std::string& file) {
  const Json& n = at(report, file, "network");
  return n.is_string() ? n.get<std::string>() : n.dump();
}

TimePair pair(const Json& ref, const std::string& ref_file, const Json& pred, const std::string& pred_file,
              const std::string& path) {
  return TimePair{number(ref, ref_file, path), number(pred, pred_file, path)};
}

std::string percent(double relative) {
  if (std::isinf(relative)) return "inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", 100 * relative);
  return buf;
}

}  // namespace

Comparison compare_reports(const Json& ref, const std::string& ref_file, const Json& pred,
                           const std::string& pred_file) {
  for (const char* key : kSameLayer) {
    const Json& a = at(ref, ref_file, key);
    const Json& b = at(pred, pred_file, key);
    if (a != b)
      throw InputError("the reports describe different layers: " + std::string(key) + " is " + a.dump() + " in " +
                       ref_file + " and " + b.dump() + " in " + pred_file);
  }
  Comparison c;
  c.reference_name = ref_file;
  c.predicted_name = pred_file;
  c.reference_kind = kind_of(ref, ref_file);
  c.predicted_kind = kind_of(pred, pred_file);
  const Json& ha = at(ref, ref_file, "config/hardware/name");
  const Json& hb = at(pred, pred_file, "config/hardware/name");
  if (ha != hb) c.notes.push_back("hardware differs: " + ha.dump() + " in " + ref_file + ", " + hb.dump() + " in " + pred_file);
  c.step = pair(ref, ref_file, pred, pred_file, "step_time_us");
  c.forward = pair(ref, ref_file, pred, pred_file, "forward_us");
  c.backward = pair(ref, ref_file, pred, pred_file, "backward_us");

  const Json& sa = at(ref, ref_file, "stages");
  const Json& sb = at(pred, pred_file, "stages");
  for (auto it = sa.begin(); it != sa.end(); ++it) {
    StageRow row;
    row.stage = it.key();
    row.busy.reference_us = number(ref, ref_file, "stages/" + it.key() + "/busy_us");
    row.exposed.reference_us = number(ref, ref_file, "stages/" + it.key() + "/exposed_us");
    if (sb.contains(it.key())) {
      row.busy.predicted_us = number(pred, pred_file, "stages/" + it.key() + "/busy_us");
      row.exposed.predicted_us = number(pred, pred_file, "stages/" + it.key() + "/exposed_us");
    }
    c.stages.push_back(row);
  }

  // Tasks by (id, rank); the prediction may hold one representative rank only.
  std::map<std::pair<std::string, int>, const Json*> predicted;
  std::map<int, int> predicted_ranks;
  for (const Json& t : at(pred, pred_file, "tasks")) {
    predicted[{t.at("id").get<std::string>(), t.at("rank").get<int>()}] = &t;
    ++predicted_ranks[t.at("rank").get<int>()];
  }
  std::map<int, int> reference_ranks;
  for (const Json& t : at(ref, ref_file, "tasks")) ++reference_ranks[t.at("rank").get<int>()];
  std::map<int, int> skipped_ranks;
  for (const Json& t : at(ref, ref_file, "tasks")) {
    const std::string id = t.at("id").get<std::string>();
    const int rank = t.at("rank").get<int>();
    const auto found = predicted.find({id, rank});
    if (found == predicted.end()) {
      if (predicted_ranks.count(rank) == 0) {
        ++skipped_ranks[rank];
        continue;
      }
      throw InputError("the reports' task graphs differ: task " + id + " of rank " + std::to_string(rank) + " is in " +
                       ref_file + " but not in " + pred_file);
    }
    const Json& p = *found->second;
    TaskRow row;
    row.id = id;
    row.rank = rank;
    row.stage = t.value("stage", "");
    row.start = TimePair{t.at("start_us").get<double>(), p.at("start_us").get<double>()};
    row.duration = TimePair{t.at("end_us").get<double>() - t.at("start_us").get<double>(),
                            p.at("end_us").get<double>() - p.at("start_us").get<double>()};
    c.tasks.push_back(row);
    predicted.erase(found);
  }
  std::map<int, int> unmatched_ranks;
  for (const auto& [key, task] : predicted) {
    if (reference_ranks.count(key.second) == 0) {
      ++unmatched_ranks[key.second];
      continue;
    }
    throw InputError("the reports' task graphs differ: task " + key.first + " of rank " + std::to_string(key.second) +
                     " is in " + pred_file + " but not in " + ref_file);
  }
  const auto note_ranks = [&](const std::map<int, int>& ranks, const std::string& in, const std::string& not_in) {
    if (ranks.empty()) return;
    c.notes.push_back(std::to_string(ranks.size()) + " rank(s) of " + in + " are not in " + not_in +
                      " (one report simulated a representative rank; `moesim simulate --all-ranks` gives every rank): "
                      "tasks compared on the common rank(s) only");
  };
  note_ranks(skipped_ranks, ref_file, pred_file);
  note_ranks(unmatched_ranks, pred_file, ref_file);
  if (c.tasks.empty()) throw InputError(ref_file + " and " + pred_file + " have no task of the same rank");
  return c;
}

std::string comparison_text(const Comparison& c, int worst_tasks) {
  std::ostringstream o;
  char buf[256];
  o << "# moesim compare: reference " << c.reference_name << " (" << c.reference_kind << ")\n";
  o << "#                 predicted " << c.predicted_name << " (" << c.predicted_kind << ")\n";
  for (const std::string& n : c.notes) o << "# note: " << n << "\n";
  std::snprintf(buf, sizeof buf, "%-16s %14s %14s %9s\n", "", "reference_us", "predicted_us", "error");
  o << buf;
  for (const auto& [name, p] : {std::pair{"step time", c.step}, {"forward", c.forward}, {"backward", c.backward}}) {
    std::snprintf(buf, sizeof buf, "%-16s %14.3f %14.3f %9s\n", name, p.reference_us, p.predicted_us,
                  percent(p.relative_error()).c_str());
    o << buf;
  }
  std::snprintf(buf, sizeof buf, "\n%-16s %14s %14s %9s %14s %14s\n", "stage", "ref_busy_us", "pred_busy_us", "error",
                "ref_exposed_us", "pred_exposed_us");
  o << buf;
  for (const StageRow& s : c.stages) {
    std::snprintf(buf, sizeof buf, "%-16s %14.3f %14.3f %9s %14.3f %14.3f\n", s.stage.c_str(), s.busy.reference_us,
                  s.busy.predicted_us, percent(s.busy.relative_error()).c_str(), s.exposed.reference_us,
                  s.exposed.predicted_us);
    o << buf;
  }
  std::snprintf(buf, sizeof buf, "\nstages: mean |error| of busy time %.1f%%; tasks: %zu compared, median |error| of duration %.1f%%\n",
                100 * c.stage_mean_abs_error(), c.tasks.size(), 100 * c.task_median_abs_error());
  o << buf;
  std::vector<const TaskRow*> worst;
  for (const TaskRow& t : c.tasks) worst.push_back(&t);
  const auto gap = [](const TaskRow* t) { return std::abs(t->duration.predicted_us - t->duration.reference_us); };
  std::stable_sort(worst.begin(), worst.end(), [&](const TaskRow* a, const TaskRow* b) { return gap(a) > gap(b); });
  if (worst_tasks > 0 && !worst.empty()) {
    std::snprintf(buf, sizeof buf, "\n%-28s %5s %14s %14s %9s\n", "largest task differences", "rank", "ref_us", "pred_us",
                  "error");
    o << buf;
    for (std::size_t i = 0; i < worst.size() && i < static_cast<std::size_t>(worst_tasks); ++i) {
      const TaskRow& t = *worst[i];
      std::snprintf(buf, sizeof buf, "%-28s %5d %14.3f %14.3f %9s\n", t.id.c_str(), t.rank, t.duration.reference_us,
                    t.duration.predicted_us, percent(t.duration.relative_error()).c_str());
      o << buf;
    }
  }
  return o.str();
}

std::string comparison_csv(const Comparison& c) {
  std::ostringstream o;
  o << "id,rank,stage,reference_start_us,predicted_start_us,reference_us,predicted_us,relative_error\n";
  char buf[128];
  for (const TaskRow& t : c.tasks) {
    std::snprintf(buf, sizeof buf, ",%d,", t.rank);
    o << t.id << buf << t.stage;
    std::snprintf(buf, sizeof buf, ",%.3f,%.3f,%.3f,%.3f,", t.start.reference_us, t.start.predicted_us,
                  t.duration.reference_us, t.duration.predicted_us);
    o << buf;
    const double e = t.duration.relative_error();
    if (std::isinf(e)) {
      o << "inf\n";
    } else {
      std::snprintf(buf, sizeof buf, "%.6f\n", e);
      o << buf;
    }
  }
  return o.str();
}

std::string comparison_json(const Comparison& c) {
  const auto pair_json = [](const TimePair& p) {
    Json j = {{"reference_us", p.reference_us}, {"predicted_us", p.predicted_us}};
    const double e = p.relative_error();
    j["relative_error"] = std::isinf(e) ? Json(nullptr) : Json(e);
    return j;
  };
  nlohmann::ordered_json j;
  j["schema_version"] = 1;
  j["reference"] = {{"file", c.reference_name}, {"kind", c.reference_kind}};
  j["predicted"] = {{"file", c.predicted_name}, {"kind", c.predicted_kind}};
  j["notes"] = c.notes;
  j["step"] = pair_json(c.step);
  j["forward"] = pair_json(c.forward);
  j["backward"] = pair_json(c.backward);
  j["stage_mean_abs_error"] = c.stage_mean_abs_error();
  j["task_median_abs_error"] = c.task_median_abs_error();
  nlohmann::ordered_json stages = nlohmann::ordered_json::object();
  for (const StageRow& s : c.stages) stages[s.stage] = {{"busy", pair_json(s.busy)}, {"exposed", pair_json(s.exposed)}};
  j["stages"] = stages;
  nlohmann::ordered_json tasks = nlohmann::ordered_json::array();
  for (const TaskRow& t : c.tasks)
    tasks.push_back({{"id", t.id}, {"rank", t.rank}, {"stage", t.stage}, {"start", pair_json(t.start)},
                     {"duration", pair_json(t.duration)}});
  j["tasks"] = tasks;
  return j.dump(2) + "\n";
}

}  // namespace moesim::validate
