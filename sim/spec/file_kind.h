// The kinds of moesim's YAML files (the `kind:` key) and where each goes.
//
// A file given where another kind belongs (a model file as --hardware) must be named as what it
// is, before its keys are checked: otherwise the first key the expected kind lacks, or the first
// one it does not know, is reported, which hides the mistake.
#pragma once

#include <string>
#include <vector>

#include "sim/spec/yaml_reader.h"

namespace moesim {

// model, gpu, node, cluster, run, sweep, calibration.
const std::vector<std::string>& file_kinds();

// Throws InputError at the file's kind: key when `root` is a map whose kind is one of
// file_kinds() but none of `accepted`: "this is a model file (kind: model), which goes to
// --model; --hardware takes a gpu, node or cluster file", where `taker` is "--hardware". A file
// without a kind, or with an unknown one, is left to the header check, which names the valid ones.
void check_file_kind(const YamlValue& root, const std::vector<std::string>& accepted, const std::string& taker);

}  // namespace moesim
