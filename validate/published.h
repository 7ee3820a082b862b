// Published measurements that moesim is held against (`moesim validate published`,
// docs/validation.md): one folder per dataset under validate/data/, each with a source.yaml that
// says where the numbers come from (URL, date, GPU, nodes, NCCL and CUDA versions), which moesim
// preset simulates them, and the file that holds them, copied unchanged from the source:
//
//   kind: nccl-tests       an nccl-tests log (sim/spec/nccl_tests_log.h)
//   kind: xla-collectives  XLA's collective performance table as CSV: opcode, element_type,
//                          dimensions, num_replica_groups, num_devices_per_group,
//                          network_throughput_bytes_per_sec
//   kind: xla-matmul       XLA's matmul performance table as CSV: b, m, n, k, dtype, flops
//   kind: gemm-table       GEMM throughputs of another source, in that same CSV form
//
// Every rejection is an InputError naming the file, line and rule.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/graph/task.h"
#include "sim/spec/types.h"

namespace moesim::validate {

enum class DatasetKind { kNcclTests, kXlaCollectives, kXlaMatmul, kGemmTable };
// xla-matmul and gemm-table: a GEMM table in the same CSV form, replayed alike.
inline bool is_gemm_table(DatasetKind k) { return k == DatasetKind::kXlaMatmul || k == DatasetKind::kGemmTable; }
std::string_view to_string(DatasetKind kind);

struct DatasetSource {
  std::string name;  // the folder's name
  std::filesystem::path dir;
  DatasetKind kind = DatasetKind::kNcclTests;
  std::string title, url, date, gpu, nccl, cuda, notes;
  int nodes = 1;
  std::string hardware;  // a moesim preset name or a hardware file
  std::string file;      // the measurements, relative to dir
  std::optional<CollectiveOp> collective;             // nccl-tests: for a log that does not name it
  std::vector<std::pair<std::string, DType>> dtypes;  // xla-matmul: the table's dtype key -> math dtype
};

inline constexpr const char* kSourceFile = "source.yaml";

// Reads <dir>/source.yaml.
DatasetSource read_dataset_source(const std::filesystem::path& dir);

// The folders under `root` that hold a `marker` file (source.yaml, or steps.yaml for the whole-step
// datasets of validate/step_data.h), sorted by name; InputError when there are none.
std::vector<std::filesystem::path> dataset_dirs(const std::filesystem::path& root, const char* marker = kSourceFile);

// One entry of XLA's collective table: the collective of `ranks` GPUs on nccl-tests' size (the
// larger buffer) and its time, size / throughput.
struct MeasuredCollective {
  CollectiveOp op = CollectiveOp::kAllReduce;
  int ranks = 0;
  int groups = 1;  // groups that ran at once
  std::int64_t size_bytes = 0;
  double time_us = 0;
  int line = 0;
};
std::vector<MeasuredCollective> parse_xla_collectives(const std::string& text, const std::string& file);

// One entry of XLA's matmul table, in one dtype.
struct MeasuredGemm {
  std::int64_t b = 1, m = 0, n = 0, k = 0;
  std::string dtype_key;  // as the table writes it
  DType dtype = DType::kBf16;
  double flop_per_s = 0;
  int line = 0;
};
std::vector<MeasuredGemm> parse_xla_matmul(const std::string& text, const std::string& file,
                                           const std::vector<std::pair<std::string, DType>>& dtypes);

// The median of `values` (the mean of the middle two for an even count); 0 for none.
double median(std::vector<double> values);

}  // namespace moesim::validate
