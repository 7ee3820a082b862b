#include <nlohmann/json.hpp>

#include "sim/report/report.h"

namespace moesim {

std::string perfetto_trace_json(const TaskGraph& graph, const Trace& trace,
                                const std::vector<RankMemory>& memory) {
  using nlohmann::ordered_json;
  ordered_json events = ordered_json::array();
  for (int rank : graph.simulated_ranks()) {
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", rank}, {"tid", 0},
                      {"args", {{"name", "rank " + std::to_string(rank)}}}});
    events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", rank}, {"tid", 0},
                      {"args", {{"sort_index", rank}}}});
    for (int s = 0; s < kNumStreamClasses; ++s) {
      events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", rank}, {"tid", s},
                        {"args", {{"name", std::string(to_string(static_cast<StreamClass>(s)))}}}});
      events.push_back({{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", rank}, {"tid", s},
                        {"args", {{"sort_index", s}}}});
    }
  }
  for (TaskIndex i = 0; i < graph.num_tasks(); ++i) {
    const Task& t = graph.task(i);
    const TaskRecord& r = trace.records[i];
    ordered_json args = {{"kind", std::string(to_string(t.kind()))},
                         {"stage", t.stage},
                         {"chunk", t.chunk},
                         {"ready_us", ns_to_us(r.ready_ns)}};
    if (const auto* g = std::get_if<GemmWork>(&t.work)) {
      args["gemm"] = {{"batch", g->batch}, {"m", g->m}, {"n", g->n}, {"k", g->k},
                      {"dtype", std::string(to_string(g->dtype))}};
      args["flops"] = g->flops();
    } else if (const auto* c = std::get_if<CollectiveWork>(&t.work)) {
      args["op"] = std::string(to_string(c->op));
      if (c->is_all_to_allv()) {
        args["all_to_allv"] = c->transposed ? "traffic matrix, transposed" : "traffic matrix";
      } else {
        args["bytes_per_peer"] = c->bytes_per_peer;
      }
      args["group_size"] = graph.group(c->group).size();
    } else if (const auto* e = std::get_if<ElementwiseWork>(&t.work)) {
      args["bytes"] = e->bytes_read + e->bytes_written;
    } else if (const auto* cp = std::get_if<CopyWork>(&t.work)) {
      args["bytes"] = cp->bytes;
      args["direction"] = std::string(to_string(cp->direction));
    }
    for (int rank : graph.ranks_of(i)) {
      events.push_back({{"ph", "X"},
                        {"name", t.id},
                        {"cat", t.stage},
                        {"pid", rank},
                        {"tid", static_cast<int>(t.stream)},
                        {"ts", ns_to_us(r.start_ns)},
                        {"dur", ns_to_us(r.end_ns - r.start_ns)},
                        {"args", args}});
    }
  }
  constexpr double kMiB = 1024.0 * 1024.0;
  for (const RankMemory& m : memory) {
    for (const MemorySample& sample : m.timeline) {
      events.push_back({{"ph", "C"}, {"name", "device memory (MiB)"}, {"pid", m.rank},
                        {"ts", ns_to_us(sample.time_ns)},
                        {"args", {{"MiB", static_cast<double>(sample.device_bytes) / kMiB}}}});
      events.push_back({{"ph", "C"}, {"name", "host pinned memory (MiB)"}, {"pid", m.rank},
                        {"ts", ns_to_us(sample.time_ns)},
                        {"args", {{"MiB", static_cast<double>(sample.host_pinned_bytes) / kMiB}}}});
    }
  }
  ordered_json j;
  j["displayTimeUnit"] = "ns";
  j["traceEvents"] = std::move(events);
  return j.dump() + "\n";
}

}  // namespace moesim
