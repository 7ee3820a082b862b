#include "sim/spec/file_kind.h"

#include <algorithm>
#include <limits>

namespace moesim {
namespace {

// Where a file of each kind is given: the flag, and the key of another file that takes it too
// where that is the less obvious place.
std::string goes_to(const std::string& kind) {
  if (kind == "model") return "--model";
  if (kind == "run") return "--run";
  if (kind == "sweep") return "--grid";
  if (kind == "calibration") return "--calibration (or a node's calibration: key)";
  return "--hardware";  // gpu, node, cluster
}

// "a gpu, node or cluster file".
std::string a_file_of(const std::vector<std::string>& kinds) {
  std::string s = "a ";
  for (std::size_t i = 0; i < kinds.size(); ++i) s += (i == 0 ? "" : i + 1 == kinds.size() ? " or " : ", ") + kinds[i];
  return s + " file";
}

}  // namespace

const std::vector<std::string>& file_kinds() {
  static const std::vector<std::string> kinds = {"model", "gpu", "node", "cluster", "run", "sweep", "calibration"};
  return kinds;
}

void check_file_kind(const YamlValue& root, const std::vector<std::string>& accepted, const std::string& taker) {
  if (!root.is_map()) return;
  const YAML::Node& map = root.node();
  const YAML::Node node = map["kind"];
  if (!node || !node.IsScalar()) return;
  const std::string kind = node.Scalar();
  const auto& known = file_kinds();
  if (std::find(known.begin(), known.end(), kind) == known.end()) return;
  if (std::find(accepted.begin(), accepted.end(), kind) != accepted.end()) return;
  YamlValue(node, root.file(), "kind", node.Mark())
      .fail("this is " + a_file_of({kind}) + " (kind: " + kind + "), which goes to " + goes_to(kind) + "; " + taker +
            " takes " + a_file_of(accepted));
}

int schema_version(const YamlMap& m) {
  const auto v = m.get("schema_version");
  return v ? static_cast<int>(v->as_int(1, kCalibrationSchemaVersion)) : 1;
}

std::string check_header(const YamlMap& m, std::string_view expected_kind, bool version_required,
                         bool kind_required, int newest_version) {
  const std::string supported =
      newest_version == 1 ? "supported schema_version: 1"
                          : "supported schema_version: 1 to " + std::to_string(newest_version);
  if (auto v = m.get("schema_version")) {
    const std::int64_t found = v->as_int(std::numeric_limits<std::int64_t>::min(),
                                         std::numeric_limits<std::int64_t>::max());
    if (found < 1 || found > newest_version) {
      v->fail("unsupported schema_version " + std::to_string(found) + "; " + supported);
    }
  } else if (version_required) {
    m.fail("missing required key 'schema_version' (found none; " + supported + ")");
  }
  auto k = m.get("kind");
  if (!k) {
    if (kind_required) {
      m.fail("missing required key 'kind'; valid kinds: " + YamlValue::join_names(file_kinds()));
    }
    return std::string(expected_kind);
  }
  const std::string kind = k->as_string();
  if (std::find(file_kinds().begin(), file_kinds().end(), kind) == file_kinds().end()) {
    k->fail("unknown kind '" + kind + "'; valid kinds: " + YamlValue::join_names(file_kinds()));
  }
  if (!expected_kind.empty() && kind != expected_kind) {
    k->fail("expected kind '" + std::string(expected_kind) + "', found '" + kind + "'");
  }
  return kind;
}

void check_source(const YamlMap& m) {
  if (auto src = m.get("source")) src->as_string();
}

SourceLocation origin_of(const YamlMap& m) {
  check_source(m);
  SourceLocation loc = m.value().location();
  loc.line = std::max(loc.line, 1);
  loc.column = std::max(loc.column, 1);
  return loc;
}

}  // namespace moesim
