#include "sim/spec/hardware_sections.h"

#include <stdexcept>

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

namespace {

// Rows [outputs_per_sm, factor]: output elements per SM in (0, 1e12], strictly increasing; the
// factor in (0, 1].
std::vector<GemmInterferencePoint> read_gemm_interference(const YamlValue& v) {
  if (!v.is_sequence() || v.node().size() == 0)
    v.fail("expected a non-empty list of [outputs_per_sm, factor] rows");
  std::vector<GemmInterferencePoint> points;
  for (const YamlValue& row : v.as_sequence()) {
    if (!row.is_sequence() || row.node().size() != 2) row.fail("expected a row [outputs_per_sm, factor]");
    const std::vector<YamlValue> cells = row.as_sequence();
    GemmInterferencePoint p{cells[0].as_double(0, 1e12, true), cells[1].as_double(0, 1, true)};
    if (!points.empty() && p.outputs_per_sm <= points.back().outputs_per_sm)
      cells[0].fail("outputs_per_sm must increase from row to row");
    points.push_back(p);
  }
  return points;
}

}  // namespace

std::vector<InterferenceCell> read_interference_cells(const YamlValue& v,
                                                      std::vector<GemmInterferencePoint>* gemm_table) {
  static const std::vector<std::string> kOps = {"communication", "computation", "memcpy"};
  static const std::vector<std::string> kCols = {"with_communication", "with_computation",
                                                 "with_memcpy", "with_all"};
  std::vector<InterferenceCell> cells;
  std::vector<std::string> keys = kOps;
  if (gemm_table != nullptr) keys.push_back("gemm_with_communication");
  const YamlMap m = v.as_map(keys);
  if (gemm_table != nullptr)
    if (auto g = m.get("gemm_with_communication")) *gemm_table = read_gemm_interference(*g);
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

namespace {

// "<m>x<n>": a CTA tile of m rows and n columns of the output, each in [1, 4096].
GemmTile read_gemm_tile(const YamlValue& v) {
  const std::string s = v.as_string();
  const auto x = s.find('x');
  GemmTile tile;
  try {
    std::size_t used_m = 0, used_n = 0;
    if (x == std::string::npos) throw std::invalid_argument("no x");
    tile.m = std::stoll(s.substr(0, x), &used_m);
    tile.n = std::stoll(s.substr(x + 1), &used_n);
    if (used_m != x || used_n != s.size() - x - 1) throw std::invalid_argument("trailing text");
  } catch (const std::logic_error&) {
    v.fail("expected a tile '<m>x<n>' such as 128x128, got '" + s + "'");
  }
  if (tile.m < 1 || tile.m > 4096 || tile.n < 1 || tile.n > 4096) {
    v.fail("tile sides must be in [1, 4096], got '" + s + "'");
  }
  return tile;
}

}  // namespace

// The GEMM kernel keys: per-dtype tiles and efficiencies (each for a dtype the GPU has a peak
// for), and the per-tile overhead.
void read_gemm_kernel(const YamlMap& m, GpuSpec& gpu) {
  const std::vector<std::string> dtypes = dtype_names();
  auto for_each_dtype = [&](const char* key, auto read) {
    auto section = m.get(key);
    if (!section) return;
    const YamlMap per_dtype = section->as_map(dtypes);
    for (DType d : {DType::kFp32, DType::kTf32, DType::kBf16, DType::kFp16, DType::kFp8}) {
      auto v = per_dtype.get(to_string(d));
      if (!v) continue;
      if (!gpu.peak_flops.count(d)) {
        v->fail("GPU " + gpu.name + " has no " + std::string(to_string(d)) +
                " peak (peak_flops), so it runs no " + std::string(to_string(d)) + " GEMM");
      }
      read(d, *v);
    }
  };
  for_each_dtype("gemm_tile", [&](DType d, const YamlValue& v) { gpu.gemm_tile[d] = read_gemm_tile(v); });
  for_each_dtype("gemm_efficiency",
                 [&](DType d, const YamlValue& v) { gpu.gemm_efficiency[d] = v.as_double(0, 1, true); });
  if (auto o = m.get("gemm_tile_overhead")) gpu.gemm_tile_overhead_ns = o->as_time(kMaxLaunchNs);
  for_each_dtype("gemm_half_tile_efficiency",
                 [&](DType d, const YamlValue& v) { gpu.gemm_half_tile_efficiency[d] = v.as_double(0, 1, true); });
}

}  // namespace moesim::detail
