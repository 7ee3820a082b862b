#include "sim/spec/hardware_sections.h"

namespace moesim::detail {

std::vector<std::string> with_header(std::vector<std::string> keys) {
  keys.insert(keys.begin(), {"schema_version", "kind", "name", "source"});
  return keys;
}


LinkSpec read_link(const YamlValue& v, PlausibleRange range) {
  const YamlMap m = v.as_map({"bandwidth", "efficiency", "latency"});
  LinkSpec link;
  link.bandwidth = m.require("bandwidth").as_bandwidth(range);
  if (auto e = m.get("efficiency")) link.efficiency = e->as_double(0, 1, true);
  link.latency_ns = m.require("latency").as_time(kMaxLatencyNs);
  return link;
}

std::map<std::string, LinkSpec> read_link_types(const YamlValue& types, std::vector<std::string>* names) {
  if (!types.is_map()) types.fail("expected a map of link type name -> {bandwidth, efficiency, latency}");
  // The names are the map's own keys; a key that is no name (a list, a map, null) is left out here
  // so that reading the map rejects it as every map does, instead of yaml-cpp's bad conversion.
  std::vector<std::string> type_names;
  for (auto it = types.node().begin(); it != types.node().end(); ++it)
    if (it->first.IsScalar()) type_names.push_back(it->first.Scalar());
  const YamlMap type_map = types.as_map(type_names);
  std::map<std::string, LinkSpec> out;
  for (const std::string& name : type_names) out[name] = read_link(type_map.require(name), kIntraNodeRange);
  if (names != nullptr) *names = type_names;
  return out;
}

std::vector<InterferenceCell> read_interference_cells(const YamlValue& v) {
  static const std::vector<std::string> kOps = {"communication", "computation", "memcpy"};
  static const std::vector<std::string> kCols = {"with_communication", "with_computation",
                                                 "with_memcpy", "with_all"};
  std::vector<InterferenceCell> cells;
  const YamlMap m = v.as_map(kOps);
  for (std::size_t op = 0; op < kOps.size(); ++op) {
    auto row = m.get(kOps[op]);
    if (!row) continue;
    const YamlMap r = row->as_map(kCols);
    for (std::size_t col = 0; col < kCols.size(); ++col) {
      if (auto f = r.get(kCols[col]))
        cells.push_back(InterferenceCell{static_cast<InterferenceClass>(op), static_cast<int>(col), f->as_double(0, 1, true)});
    }
  }
  return cells;
}

}  // namespace moesim::detail
