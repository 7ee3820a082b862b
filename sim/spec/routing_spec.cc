#include "sim/spec/routing_spec.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>

namespace moesim {
namespace {

const char* const kForms = "valid: uniform, zipf:<s> (s >= 0, e.g. zipf:1.2), matrix:<csv file>";

std::string shortest(double v) {
  std::ostringstream out;
  out.precision(15);
  out << v;
  return out.str();
}

}  // namespace

std::string RoutingSpec::to_string() const {
  switch (kind) {
    case RoutingKind::kUniform: return "uniform";
    case RoutingKind::kZipf: return "zipf:" + shortest(zipf_exponent);
    case RoutingKind::kMatrix: return "matrix:" + matrix_path;
  }
  return "uniform";
}

RoutingSpec parse_routing_spec(std::string_view text, const SourceLocation& where, const std::string& base_dir) {
  RoutingSpec spec;
  const std::string t(text);
  if (t == "uniform") return spec;
  const auto colon = t.find(':');
  const std::string head = t.substr(0, colon);
  const std::string arg = colon == std::string::npos ? "" : t.substr(colon + 1);
  if (head == "zipf") {
    if (arg.empty()) throw InputError(where, "routing 'zipf' needs an exponent, e.g. zipf:1.2; " + std::string(kForms));
    char* end = nullptr;
    const double s = std::strtod(arg.c_str(), &end);
    if (end != arg.c_str() + arg.size() || !std::isfinite(s))
      throw InputError(where, "routing '" + t + "': the Zipf exponent '" + arg + "' is not a number; " + kForms);
    if (s < 0 || s > 100)
      throw InputError(where, "routing '" + t + "': the Zipf exponent must be in [0, 100], got " + arg);
    spec.kind = RoutingKind::kZipf;
    spec.zipf_exponent = s;
    return spec;
  }
  if (head == "matrix") {
    if (arg.empty()) throw InputError(where, "routing 'matrix' needs a file, e.g. matrix:counts.csv; " + std::string(kForms));
    namespace fs = std::filesystem;
    const fs::path p = fs::path(arg).is_absolute() || base_dir.empty() ? fs::path(arg) : fs::path(base_dir) / arg;
    spec.kind = RoutingKind::kMatrix;
    spec.matrix_path = p.lexically_normal().string();
    return spec;
  }
  throw InputError(where, "unknown routing '" + t + "'; " + kForms);
}

}  // namespace moesim
