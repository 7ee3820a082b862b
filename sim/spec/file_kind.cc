#include "sim/spec/file_kind.h"

#include <algorithm>

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

}  // namespace moesim
