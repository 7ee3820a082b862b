// The columns of `moesim sweep`'s CSV, each declared once: its CSV name, what it means, how a row
// spells it and, for a column of the record itself, its key and value in the JSON records. The CSV
// header and rows, the JSON records and docs/planning.md's table of columns (a test holds it equal
// to sweep_columns_markdown()) all come from this list.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/report/sweep_report.h"

namespace moesim {

// What a row's columns read: the record, the sweep-wide options, and the marks derived from the
// whole table (the group's speed-up and the best flags).
struct SweepRow {
  const SweepTable& table;
  const SweepRecord& record;
  bool has_speedup = false;
  double speedup = 0.0;  // the group's (n = 1, none) step over this one
  bool best = false;
  bool best_layout = false;
};

struct SweepColumn {
  const char* name;     // the CSV header's
  const char* meaning;  // docs/planning.md
  std::string (*csv)(const SweepRow& row);
  // The JSON record's key and value; nullptr for a column derived from the table (best, speed-up)
  // or sweep-wide (the JSON gives those once, at its top level).
  const char* json_key;
  nlohmann::ordered_json (*json)(const SweepRecord& record);
};

// Every column, in the CSV's order (the first ones keep the order earlier readers rely on).
const std::vector<SweepColumn>& sweep_columns();
// The header line of the CSV (no newline).
std::string sweep_csv_header();
// One JSON record: the columns that have a key, in the columns' order.
nlohmann::ordered_json sweep_json_record(const SweepRecord& record);
// docs/planning.md's table of the CSV columns.
std::string sweep_columns_markdown();

}  // namespace moesim
