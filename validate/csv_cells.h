// Cells of the published CSV tables (validate/published.h, validate/step_data.h), read strictly:
// every rejection is an InputError at the cell's file and line, naming the column.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/error.h"

namespace moesim::validate {

// The cells of one line, split at commas (the tables quote nothing); a trailing comma is an empty
// last cell.
std::vector<std::string> split_csv(const std::string& line);

// A whole number >= min.
std::int64_t whole_cell(const std::string& cell, const SourceLocation& at, const char* what, std::int64_t min);

// A finite number > 0.
double positive_cell(const std::string& cell, const SourceLocation& at, const char* what);

}  // namespace moesim::validate
