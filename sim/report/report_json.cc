#include <nlohmann/json.hpp>

#include "sim/report/report.h"
#include "sim/report/spec_json.h"

namespace moesim {

std::string report_json(const ReportInputs& in) {
  using nlohmann::ordered_json;
  ordered_json j;
  j["schema_version"] = 1;
  j["tool"] = "moesim " + in.tool_version;
  j["config"] = config_json(in.model, in.cluster, in.run, in.dims);
  const StepMetrics& m = in.metrics;
  j["critical_rank"] = m.rank;
  j["step_time_us"] = ns_to_us(m.step_ns);
  j["forward_us"] = ns_to_us(m.forward_ns);
  j["backward_us"] = ns_to_us(m.backward_ns);
  j["totals"] = {{"compute_busy_us", ns_to_us(m.compute_busy_ns)},
                 {"comm_busy_us", ns_to_us(m.comm_busy_ns)},
                 {"copy_busy_us", ns_to_us(m.copy_busy_ns)},
                 {"overlap_us", ns_to_us(m.overlap_ns)},
                 {"overlap_fraction", m.overlap_fraction},
                 {"sum_task_us", ns_to_us(m.sum_task_ns)}};
  ordered_json stages = ordered_json::object();
  for (const std::string& key : m.stage_order) {
    const StageMetrics& s = m.stages.at(key);
    stages[key] = {{"busy_us", ns_to_us(s.busy_ns)},
                   {"exposed_us", ns_to_us(s.exposed_ns)},
                   {"tasks", s.num_tasks}};
  }
  j["stages"] = std::move(stages);

  ordered_json tasks = ordered_json::array();
  for (TaskIndex i = 0; i < in.graph.num_tasks(); ++i) {
    const Task& t = in.graph.task(i);
    const TaskRecord& r = in.trace.records[i];
    for (int rank : in.graph.ranks_of(i)) {
      tasks.push_back({{"id", t.id},
                       {"rank", rank},
                       {"stream", std::string(to_string(t.stream))},
                       {"kind", std::string(to_string(t.kind()))},
                       {"stage", t.stage},
                       {"pass", std::string(to_string(t.pass))},
                       {"chunk", t.chunk},
                       {"ready_us", ns_to_us(r.ready_ns)},
                       {"start_us", ns_to_us(r.start_ns)},
                       {"end_us", ns_to_us(r.end_ns)}});
    }
  }
  j["tasks"] = std::move(tasks);
  return j.dump(2) + "\n";
}

}  // namespace moesim
