// The `nccl:` section of a node file (docs/config-reference.md): NCCL's cost model constants, each
// key optional over the defaults of nccl_tuning.h.
#include "sim/spec/nccl_tuning.h"

#include <optional>
#include <string>
#include <vector>

#include "sim/spec/hardware_sections.h"

namespace moesim {

const char* to_string(NcclAlgorithm a) { return a == NcclAlgorithm::kRing ? "ring" : "tree"; }

const char* to_string(NcclHop h) {
  switch (h) {
    case NcclHop::kNvlink: return "nvlink";
    case NcclHop::kPcie: return "pcie";
    case NcclHop::kNet: return "net";
  }
  return "?";
}

const char* to_string(NcclProtocol p) {
  switch (p) {
    case NcclProtocol::kLL: return "ll";
    case NcclProtocol::kLL128: return "ll128";
    case NcclProtocol::kSimple: return "simple";
  }
  return "?";
}

namespace detail {
namespace {

const std::vector<std::string> kProtocolNames = {"ll", "ll128", "simple"};
const std::vector<std::string> kAlgorithmNames = {"ring", "tree"};
const std::vector<std::string> kHopNames = {"nvlink", "pcie", "net"};

std::optional<int> index_of(const std::vector<std::string>& names, const std::string& s) {
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == s) return static_cast<int>(i);
  return std::nullopt;
}

// A map {ring: {ll: .., ll128: .., simple: ..}, tree: {...}} read into `out` with `read`; the
// entries not given keep their values.
template <typename T, typename Read>
void read_per_algorithm(const YamlValue& v, PerNcclAlgorithm<T>& out, Read read) {
  const YamlMap algos = v.as_map(kAlgorithmNames);
  for (std::size_t a = 0; a < kAlgorithmNames.size(); ++a) {
    auto row = algos.get(kAlgorithmNames[a]);
    if (!row) continue;
    const YamlMap protos = row->as_map(kProtocolNames);
    for (std::size_t p = 0; p < kProtocolNames.size(); ++p)
      if (auto x = protos.get(kProtocolNames[p])) out[a][p] = read(*x);
  }
}

// A list of names from `names` into flags; an empty list or a repeated name is refused.
template <std::size_t N>
std::array<bool, N> read_name_set(const YamlValue& v, const std::vector<std::string>& names, const char* what) {
  std::array<bool, N> set{};
  const std::vector<YamlValue> items = v.as_sequence();
  if (items.empty()) v.fail(std::string("lists no ") + what + "; NCCL needs at least one");
  for (const YamlValue& item : items) {
    const auto i = index_of(names, item.as_string());
    if (!i) item.fail("unknown " + std::string(what).substr(0, std::string(what).size() - 1) + " '" +
                      item.as_string() + "'; valid values: " + YamlValue::join_names(names));
    if (set[static_cast<std::size_t>(*i)]) item.fail("'" + item.as_string() + "' is listed twice");
    set[static_cast<std::size_t>(*i)] = true;
  }
  return set;
}

// A whole table {ring: {ll, ll128, simple}, tree: {...}}: every entry required, since a fitted
// table replaces the node's as one.
template <typename T, typename Read>
PerNcclAlgorithm<T> read_whole_table(const YamlValue& v, Read read) {
  PerNcclAlgorithm<T> out{};
  const YamlMap algos = v.as_map(kAlgorithmNames);
  for (std::size_t a = 0; a < kAlgorithmNames.size(); ++a) {
    const YamlMap protos = algos.require(kAlgorithmNames[a]).as_map(kProtocolNames);
    for (std::size_t p = 0; p < kProtocolNames.size(); ++p) out[a][p] = read(protos.require(kProtocolNames[p]));
  }
  return out;
}

}  // namespace

NcclFittedTerms read_nccl_fitted_terms(const YamlValue& v) {
  const YamlMap m = v.as_map({"hop_latency", "efficiency"});
  NcclFittedTerms f;
  if (auto x = m.get("hop_latency")) {
    const YamlMap hops = x->as_map(kHopNames);
    for (std::size_t h = 0; h < kHopNames.size(); ++h)
      if (auto row = hops.get(kHopNames[h]))
        f.hop_latency[h] = read_whole_table<TimeNs>(*row, [](const YamlValue& t) { return t.as_time(kMaxLaunchNs); });
  }
  if (auto x = m.get("efficiency"))
    f.efficiency = read_whole_table<double>(*x, [](const YamlValue& e) { return e.as_double(0, 1, true); });
  return f;
}

NcclTuning read_nccl_tuning(const YamlValue& v) {
  const YamlMap m =
      v.as_map({"intra", "protocols", "algorithms", "channels", "base_latency", "hop_latency", "efficiency"});
  NcclTuning t;
  const auto time = [](const YamlValue& x) { return x.as_time(kMaxLaunchNs); };
  if (auto x = m.get("intra")) {
    const std::string s = x->as_string();
    if (s == "nvlink") t.intra_hop = NcclHop::kNvlink;
    else if (s == "pcie") t.intra_hop = NcclHop::kPcie;
    else x->fail("unknown value '" + s + "'; valid values: nvlink, pcie");
  }
  if (auto x = m.get("protocols")) t.protocols = read_name_set<kNumNcclProtocols>(*x, kProtocolNames, "protocols");
  if (auto x = m.get("algorithms")) t.algorithms = read_name_set<kNumNcclAlgorithms>(*x, kAlgorithmNames, "algorithms");
  if (auto x = m.get("channels")) t.channels = static_cast<int>(x->as_int(1, 64));
  if (auto x = m.get("base_latency")) read_per_algorithm(*x, t.base_latency, time);
  if (auto x = m.get("hop_latency")) {
    const YamlMap hops = x->as_map(kHopNames);
    for (std::size_t h = 0; h < kHopNames.size(); ++h)
      if (auto row = hops.get(kHopNames[h])) read_per_algorithm(*row, t.hop_latency[h], time);
  }
  if (auto x = m.get("efficiency"))
    read_per_algorithm(*x, t.efficiency, [](const YamlValue& e) { return e.as_double(0, 1, true); });
  return t;
}

}  // namespace detail
}  // namespace moesim
