// The sections that hardware and calibration files share (links, link types, interference
// factors, a GPU's GEMM kernel keys), the ranges their values must lie in, and the calibration reader a node's
// `calibration:` key uses. Internal to sim/spec: loader.cc and calibration_loader.cc read them.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "sim/spec/loader.h"
#include "sim/spec/yaml_reader.h"

namespace moesim::detail {

// Ranges a value must lie in. They are wide (any GPU of the last decade and the next) but catch
// unit slips by 10^3 and bits/bytes confusion by 8.
inline constexpr PlausibleRange kHbmRange{50e9, 50e12};
inline constexpr PlausibleRange kIntraNodeRange{1e9, 5e12};
inline constexpr PlausibleRange kPcieRange{0.5e9, 256e9};
inline constexpr PlausibleRange kHostMemoryRange{5e9, 10e12};
inline constexpr std::int64_t kMaxCopyEngines = 64;
inline constexpr PlausibleRange kNetworkRange{0.1e9, 150e9};
inline constexpr PlausibleRange kFlopRange{0.1e12, 100e15};
inline constexpr TimeNs kMaxLatencyNs = 1'000'000'000;  // 1 s
inline constexpr TimeNs kMaxLaunchNs = 1'000'000;       // 1 ms


// The keys of a file's header (schema_version, kind, name, source) followed by `keys`.
std::vector<std::string> with_header(std::vector<std::string> keys);

// {bandwidth, efficiency, latency}, the bandwidth within `range`.
LinkSpec read_link(const YamlValue& v, PlausibleRange range);

// A map of link type name -> {bandwidth, efficiency, latency}, per lane and direction; `names`
// (if given) receives the names in the file's order, for messages.
std::map<std::string, LinkSpec> read_link_types(const YamlValue& types, std::vector<std::string>* names = nullptr);

// The factors an `interference:` map gives (rows communication / computation / memcpy, columns
// with_communication / with_computation / with_memcpy / with_all); a node applies them over the
// default table, a calibration over the node's. With `gemm_table` (node files) the map may also
// give `gemm_with_communication`, a list of [outputs_per_sm, factor] rows (outputs increasing,
// factors in (0, 1]), read into it; a calibration file may not (`moesim calibrate` does not measure it).
std::vector<InterferenceCell> read_interference_cells(const YamlValue& v,
                                                      std::vector<GemmInterferencePoint>* gemm_table = nullptr);

// A GPU's GEMM kernel keys (gemm_tile, gemm_efficiency, gemm_tile_overhead) into `gpu`, whose
// peak_flops are already read: a dtype without a peak is refused.
void read_gemm_kernel(const YamlMap& m, GpuSpec& gpu);

// A node's `nccl:` section (nccl_tuning.cc): NCCL's cost model constants over their defaults.
// Efficiencies must lie in (0, 1], latencies be non-negative, protocols and algorithms be known.
NcclTuning read_nccl_tuning(const YamlValue& v);
// A calibration file's `nccl:` section (nccl_tuning.h NcclFittedTerms): whole tables only.
NcclFittedTerms read_nccl_fitted_terms(const YamlValue& v);

// The keys of a calibration file, and its reader once the header is checked.
const std::vector<std::string>& calibration_keys();
CalibrationSpec read_calibration(const YamlMap& m);

}  // namespace moesim::detail
