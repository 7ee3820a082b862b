// The header every moesim YAML file starts with (schema_version, kind, name, source), and where a
// file of each kind goes.
//
// A file given where another kind belongs (a model file as --hardware) must be named as what it
// is, before its keys are checked: otherwise the first key the expected kind lacks, or the first
// one it does not know, is reported, which hides the mistake.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sim/spec/yaml_reader.h"

namespace moesim {

inline constexpr int kSchemaVersion = 1;
// Calibration files since batched GEMM tables and memory-bound kernel figures (docs/calibration.md).
inline constexpr int kCalibrationSchemaVersion = 2;

// model, gpu, node, cluster, run, sweep, calibration.
const std::vector<std::string>& file_kinds();

// Throws InputError at the file's kind: key when `root` is a map whose kind is one of
// file_kinds() but none of `accepted`: "this is a model file (kind: model), which goes to
// --model; --hardware takes a gpu, node or cluster file", where `taker` is "--hardware". A file
// without a kind, or with an unknown one, is left to the header check, which names the valid ones.
void check_file_kind(const YamlValue& root, const std::vector<std::string>& accepted, const std::string& taker);

// Checks schema_version and kind. A top-level file must say its schema_version; an inline map
// inside another file inherits it. Returns the kind found (or expected_kind when omitted).
// A kind whose schema grew accepts every version from 1 to `newest_version` (calibration files:
// 2, file_kind.cc); the reader asks schema_version() which one a file says.
std::string check_header(const YamlMap& m, std::string_view expected_kind, bool version_required,
                         bool kind_required, int newest_version = kSchemaVersion);

// The schema_version a checked file says (1 when it says none: an inline map's).
int schema_version(const YamlMap& m);

// source: is free text (a citation), but it must be a string, not a map or a list.
void check_source(const YamlMap& m);

// Where the map `m` starts (line and column at least 1), after checking its source:.
SourceLocation origin_of(const YamlMap& m);

}  // namespace moesim
