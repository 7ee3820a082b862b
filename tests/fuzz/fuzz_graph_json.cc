// libFuzzer target over the task-graph JSON reader (sim/graph/graph_json.h). An InputError is its
// answer to bad input. A graph it accepts must survive the round trip the header promises:
// exporting it, importing the export and exporting again gives the same text, and the export is
// itself accepted. Anything else that escapes, a crash, a sanitizer report, a hang or an unbounded
// allocation is a finding.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "sim/core/error.h"
#include "sim/graph/graph_json.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace moesim;
  std::optional<TaskGraph> graph;
  try {
    graph.emplace(import_graph_json(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz-input.json"));
  } catch (const InputError&) {
    return 0;  // rejected with a message: what bad input must get
  }
  // Outside the try: the export of an accepted graph being rejected is a finding, not bad input.
  const std::string exported = export_graph_json(*graph);
  const std::string again = export_graph_json(import_graph_json(exported, "fuzz-input.exported.json"));
  FUZZ_CHECK(again == exported);
  return 0;
}
