#include "sim/core/error.h"

namespace moesim {

std::string SourceLocation::to_string() const {
  if (file.empty()) return {};
  std::string s = file;
  if (line > 0) {
    s += ":" + std::to_string(line);
    if (column > 0) s += ":" + std::to_string(column);
  }
  return s;
}

static std::string compose(const SourceLocation& where, const std::string& rule) {
  const std::string at = where.to_string();
  return at.empty() ? rule : at + ": " + rule;
}

InputError::InputError(SourceLocation where, std::string rule)
    : std::runtime_error(compose(where, rule)), where_(std::move(where)), rule_(std::move(rule)) {}

void raise_internal_error(const char* file, int line, const std::string& message) {
  throw InternalError(std::string("internal error at ") + file + ":" + std::to_string(line) +
                      ": " + message);
}

}  // namespace moesim
