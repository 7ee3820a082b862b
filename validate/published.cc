#include "validate/published.h"

#include <algorithm>
#include <sstream>

#include "sim/core/error.h"
#include "sim/spec/yaml_reader.h"
#include "validate/csv_cells.h"

namespace moesim::validate {

namespace {

const std::vector<std::string> kCommonKeys = {"schema_version", "kind", "title", "url",  "date",     "gpu",
                                              "nodes",          "nccl", "cuda",  "notes", "hardware", "file"};

std::optional<DatasetKind> parse_kind(const std::string& s) {
  if (s == "nccl-tests") return DatasetKind::kNcclTests;
  if (s == "xla-collectives") return DatasetKind::kXlaCollectives;
  if (s == "xla-matmul") return DatasetKind::kXlaMatmul;
  if (s == "gemm-table") return DatasetKind::kGemmTable;
  return std::nullopt;
}

std::vector<std::string> allowed_keys(DatasetKind kind) {
  std::vector<std::string> keys = kCommonKeys;
  if (kind == DatasetKind::kNcclTests) keys.push_back("collective");
  if (is_gemm_table(kind)) keys.push_back("dtypes");
  return keys;
}

// Calls row(cells, location) for every data line of a CSV table whose first line is `header`
// ('#' lines and blank lines aside); InputError for a wrong header, cell count, or no rows.
template <typename Row>
void for_each_csv_row(const std::string& text, const std::string& file, const std::string& header, Row row) {
  std::istringstream in(text);
  std::string line;
  int number = 0, rows = 0;
  bool header_seen = false;
  const std::size_t cells = split_csv(header).size();
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const SourceLocation at{file, number, 1};
    if (!header_seen) {
      if (line != header) throw InputError(at, "the header must be '" + header + "'");
      header_seen = true;
      continue;
    }
    const auto parts = split_csv(line);
    if (parts.size() != cells)
      throw InputError(at, std::to_string(parts.size()) + " cells; a row has " + std::to_string(cells) + " (" + header + ")");
    row(parts, at);
    ++rows;
  }
  if (rows == 0) throw InputError(SourceLocation{file, 0, 0}, "no rows under the header '" + header + "'");
}

}  // namespace

std::string_view to_string(DatasetKind kind) {
  switch (kind) {
    case DatasetKind::kNcclTests: return "nccl-tests";
    case DatasetKind::kXlaCollectives: return "xla-collectives";
    case DatasetKind::kXlaMatmul: return "xla-matmul";
    case DatasetKind::kGemmTable: return "gemm-table";
  }
  return "?";
}

DatasetSource read_dataset_source(const std::filesystem::path& dir) {
  const std::string path = (dir / kSourceFile).string();
  const YamlValue root = parse_yaml_file(path);
  if (!root.is_map()) root.fail("a dataset's source.yaml must be a map");
  // The kind decides the allowed keys: it is read before the map is checked against them.
  std::optional<DatasetKind> kind;
  if (const auto k = root.node()["kind"]; k && k.IsScalar()) kind = parse_kind(k.as<std::string>());
  if (!kind) {
    std::vector<std::string> any = allowed_keys(DatasetKind::kNcclTests);
    any.push_back("dtypes");
    YamlMap(root, any).require("kind").fail("must be nccl-tests, xla-collectives, xla-matmul or gemm-table");
  }
  const YamlMap m(root, allowed_keys(*kind));
  if (m.require("schema_version").as_int(1, 1) != 1) m.fail("schema_version must be 1");
  DatasetSource s;
  s.name = dir.filename().string();
  s.dir = dir;
  s.kind = *kind;
  s.title = m.require("title").as_name();
  s.url = m.require("url").as_name();
  s.date = m.require("date").as_name();
  s.gpu = m.require("gpu").as_name();
  s.nodes = static_cast<int>(m.require("nodes").as_int(1, 1 << 16));
  s.nccl = m.require("nccl").as_name();
  s.cuda = m.require("cuda").as_name();
  s.hardware = m.require("hardware").as_name();
  s.file = m.require("file").as_name();
  if (auto v = m.get("notes")) s.notes = v->as_string();
  if (auto v = s.kind == DatasetKind::kNcclTests ? m.get("collective") : std::nullopt)
    s.collective = v->as_enum(parse_collective_op, {"all-to-all", "all-reduce", "all-gather", "reduce-scatter"});
  if (is_gemm_table(s.kind)) {
    const YamlValue d = m.require("dtypes");
    if (!d.is_map()) d.fail("must map the table's dtype keys to fp32, tf32, bf16 or fp16");
    for (const auto& entry : d.node()) {
      const std::string key = entry.first.as<std::string>();
      const YamlValue v(entry.second, path, "dtypes." + key, entry.second.Mark());
      s.dtypes.emplace_back(key, v.as_enum(parse_dtype, {"fp32", "tf32", "bf16", "fp16"}));
    }
    if (s.dtypes.empty()) d.fail("must name at least one dtype");
  }
  return s;
}

std::vector<std::filesystem::path> dataset_dirs(const std::filesystem::path& root, const char* marker) {
  std::error_code ec;
  if (!std::filesystem::is_directory(root, ec))
    throw InputError("--data " + root.string() + ": no such folder");
  std::vector<std::filesystem::path> dirs;
  for (const auto& entry : std::filesystem::directory_iterator(root, ec))
    if (entry.is_directory() && std::filesystem::exists(entry.path() / marker)) dirs.push_back(entry.path());
  if (ec) throw InputError("--data " + root.string() + ": cannot list the folder: " + ec.message());
  if (dirs.empty()) throw InputError("--data " + root.string() + ": no dataset (a folder with a " + marker + ") under it");
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

std::vector<MeasuredCollective> parse_xla_collectives(const std::string& text, const std::string& file) {
  std::vector<MeasuredCollective> out;
  const std::string header =
      "opcode,element_type,dimensions,num_replica_groups,num_devices_per_group,network_throughput_bytes_per_sec";
  for_each_csv_row(text, file, header, [&](const std::vector<std::string>& c, const SourceLocation& at) {
    MeasuredCollective p;
    const auto op = parse_collective_op(c[0]);
    if (!op) throw InputError(at, "opcode '" + c[0] + "' is not all-reduce, all-gather, reduce-scatter or all-to-all");
    // The generator builds every collective of F32: 4 bytes an element.
    if (c[1] != "F32") throw InputError(at, "element_type '" + c[1] + "' is not F32");
    const std::int64_t dims = whole_cell(c[2], at, "dimensions", 1);
    p.op = *op;
    p.groups = static_cast<int>(whole_cell(c[3], at, "num_replica_groups", 1));
    p.ranks = static_cast<int>(whole_cell(c[4], at, "num_devices_per_group", 2));
    // The shape is the instruction's output: a reduce-scatter's input, nccl-tests' size, is n times it.
    p.size_bytes = 4 * dims * (p.op == CollectiveOp::kReduceScatter ? p.ranks : 1);
    const double throughput = positive_cell(c[5], at, "network_throughput_bytes_per_sec");
    p.time_us = static_cast<double>(p.size_bytes) / throughput * 1e6;
    p.line = at.line;
    out.push_back(p);
  });
  return out;
}

std::vector<MeasuredGemm> parse_xla_matmul(const std::string& text, const std::string& file,
                                           const std::vector<std::pair<std::string, DType>>& dtypes) {
  std::vector<MeasuredGemm> out;
  for_each_csv_row(text, file, "b,m,n,k,dtype,flops", [&](const std::vector<std::string>& c, const SourceLocation& at) {
    MeasuredGemm g;
    g.b = whole_cell(c[0], at, "b", 1);
    g.m = whole_cell(c[1], at, "m", 1);
    g.n = whole_cell(c[2], at, "n", 1);
    g.k = whole_cell(c[3], at, "k", 1);
    g.dtype_key = c[4];
    const auto it = std::find_if(dtypes.begin(), dtypes.end(), [&](const auto& d) { return d.first == c[4]; });
    if (it == dtypes.end()) throw InputError(at, "dtype '" + c[4] + "' is not one of source.yaml's dtypes");
    g.dtype = it->second;
    g.flop_per_s = positive_cell(c[5], at, "flops");
    g.line = at.line;
    out.push_back(g);
  });
  return out;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  const std::size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  const double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  const double lower = *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

}  // namespace moesim::validate
