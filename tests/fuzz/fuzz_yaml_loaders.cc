// libFuzzer target over the YAML loaders (sim/spec/loader.h, sweep_spec.h): each input goes to the
// loader its `kind:` key names (a file without one to the model loader, the one kind that may
// leave it out). An InputError is the loaders' answer to bad input; anything else that escapes, a
// crash, a sanitizer report, a hang or an unbounded allocation is a finding (docs/fuzzing.md).
#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/core/error.h"
#include "sim/spec/loader.h"
#include "sim/spec/sweep_spec.h"
#include "sim/spec/yaml_reader.h"

namespace {

using namespace moesim;

const std::string kSourceDir = MOESIM_SOURCE_DIR;
// The input is read as if it were a file in hardware/clusters/, so that the references of the
// seeds (a cluster's node: ../nodes/dgx-a100.yaml, a node's gpu: ../gpus/...) find the bundled
// presets and the fuzzer gets past them into the rest of the file.
const std::string kInputFile = kSourceDir + "/hardware/clusters/fuzz-input.yaml";

std::string kind_of(const std::string& text) {
  const YamlValue root = parse_yaml_text(text, kInputFile);
  if (!root.is_map()) return "";
  const YAML::Node kind = root.node()["kind"];
  return kind && kind.IsScalar() ? kind.Scalar() : "";
}

// A calibration that loads is also applied to a node that has every calibratable part (intra-node
// link, topology link types and NICs), so apply_calibration's checks see fuzzed values too.
void apply_to_a_node(const CalibrationSpec& calibration) {
  static const ClusterSpec kDgxA100 = load_hardware_spec(kSourceDir + "/hardware/nodes/dgx-a100.yaml");
  ClusterSpec cluster = kDgxA100;
  apply_calibration(cluster, calibration);
}

void load(const std::string& text) {
  const std::string kind = kind_of(text);
  if (kind == "gpu" || kind == "node" || kind == "cluster") {
    parse_hardware_spec(text, kInputFile);
  } else if (kind == "calibration") {
    apply_to_a_node(parse_calibration(text, kInputFile));
  } else if (kind == "run") {
    parse_run_spec(text, kInputFile);
  } else if (kind == "sweep") {
    parse_sweep_spec(text, kInputFile);
  } else {
    parse_model_spec(text, kInputFile);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    load(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const InputError&) {
    // Rejected with a message: what bad input must get.
  }
  return 0;
}
