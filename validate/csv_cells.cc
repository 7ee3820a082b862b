#include "validate/csv_cells.h"

#include <charconv>
#include <cmath>
#include <sstream>

namespace moesim::validate {

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, ',')) out.push_back(cell);
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}

std::int64_t whole_cell(const std::string& cell, const SourceLocation& at, const char* what, std::int64_t min) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), v);
  if (ec != std::errc() || end != cell.data() + cell.size() || cell.empty())
    throw InputError(at, std::string(what) + " '" + cell + "' is not a whole number");
  if (v < min) throw InputError(at, std::string(what) + " " + cell + " must be at least " + std::to_string(min));
  return v;
}

double positive_cell(const std::string& cell, const SourceLocation& at, const char* what) {
  double v = 0;
  const auto [end, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), v);
  if (ec != std::errc() || end != cell.data() + cell.size() || cell.empty() || !std::isfinite(v))
    throw InputError(at, std::string(what) + " '" + cell + "' is not a number");
  if (v <= 0) throw InputError(at, std::string(what) + " " + cell + " must be positive");
  return v;
}

}  // namespace moesim::validate
