// Published whole-training-step measurements (issue 23) that `moesim validate steps` replays: one
// folder per dataset under validate/data/, with the measurements as a CSV copied from the source
// and a steps.yaml that says how to simulate its rows -- which moesim preset each row's model is,
// the cluster, and what the source states about the runs that the CSV has no column for:
//
//   schema_version: 1
//   kind: training-steps
//   title, source              what and where from (the folder's README.md has the details)
//   file                       the CSV, relative to the folder
//   measure                    iteration-time (column iteration_time_s, seconds per step),
//                              tflops-per-gpu (column tflops_per_gpu, 10^12 FLOP/s per GPU, dense
//                              models only: counted as Korthikanti et al. count them) or
//                              tokens-per-s-per-gpu (column tokens_per_s_per_gpu: global batch x
//                              sequence / (step time x GPUs))
//   not_simulated              a reason no row can be simulated (then the keys below are optional)
//   hardware                   a cluster preset or a .yaml file of the folder, scaled to each row's GPUs
//   attention                  flash or unfused (StepSpec::attention)
//   overlap_grad_reduce        true or false (StepSpec::overlap_grad_reduce)
//   models                     the CSV's model names -> a preset or a .yaml file of the folder, or a
//                              map {preset, overlap_grad_reduce, expert_tensor_parallel} where one
//                              model ran otherwise (expert_tensor_parallel: the experts'
//                              tensor-parallel size of its runs where the CSV has no column for it)
//   layer_times                optional: a CSV of one layer's forward and backward times
//                              (validate/layer_replay.h), relative to the folder
//   goals                      optional: row_error_pct (every row's |error| at most this) and
//                              speedup_points (full -> selective recomputation speed-up within
//                              this many points of the measured one)
//
// The CSV's columns are found by name (their order is free, others are ignored): model, gpus,
// tensor_parallel, pipeline_parallel, global_batch_size, seq_len and the measure's column are
// required; data_parallel (checked against gpus / (tp x cp x pp)), micro_batch_size, virtual_stages or
// layers_per_virtual_stage, expert_parallel, expert_tensor_parallel (Megatron-Core's
// --expert-tensor-parallel-size; without it the mapping's, else tp), context_parallel, precision (bf16, or fp8, fp8-cs,
// fp8-blockwise: every FP8 recipe is moesim's fp8 GEMMs with current scaling; case-insensitive; an empty cell is a
// row that cannot be simulated, no column a 16-bit run), part_layers (the layers
// of each of the pp x vpp model parts, space-separated, for an uneven split), sequence_parallel
// (yes/no), recompute (none/selective/full), selective_modules (with recompute selective: the
// modules re-run, Megatron-Core's --recompute-modules names space-separated; default core_attn),
// dispatcher (DeepEP or HybridEP: --dispatcher deepep; all-to-all, alltoall or A2A; case-insensitive;
// empty or absent: the all-to-all dispatcher), ep_overlap (yes/no: Megatron-Core's
// overlap_moe_expert_parallel_comm, --overlap-moe-expert-parallel-comm; absent: no),
// attention_heads, hidden_size, layers, vocab_size (checked against the preset) and
// throughput_increase_pct (the published speed-up) are read where present. A row the source
// leaves incomplete (no measurement, micro-batch or recomputation stated) is kept with the reason
// it cannot be simulated. Everything else wrong is an InputError naming the file and line.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "sim/spec/model_spec.h"
#include "sim/spec/step_spec.h"

namespace moesim::validate {

inline constexpr const char* kStepSourceFile = "steps.yaml";

enum class StepMeasure { kIterationTime, kTflopsPerGpu, kTokensPerSPerGpu };
const char* measure_column(StepMeasure m);

struct StepModelMapping {
  std::string name;    // as the CSV's model column writes it
  std::string preset;  // a preset name, or a file path resolved against the folder
  bool overlap_grad_reduce = false;
  int etp = 0;  // expert_tensor_parallel: the experts' tensor-parallel size the runs used; 0: not stated
};

struct StepGoals {
  std::optional<double> row_error;       // fraction: every row's |error| <= this
  std::optional<double> speedup_points;  // percentage points
};

struct StepDataset {
  std::string name;  // the folder's name
  std::filesystem::path dir;
  std::string title, source, file;
  StepMeasure measure = StepMeasure::kIterationTime;
  std::string not_simulated;  // "" = the rows are simulated
  std::string hardware;       // a preset name, or a file path resolved against the folder
  AttentionKernel attention = AttentionKernel::kFlash;
  bool overlap_grad_reduce = false;
  std::vector<StepModelMapping> models;
  StepGoals goals;
  std::string layer_times;  // "" = none
  const StepModelMapping* model(const std::string& name) const;
};

// One row of the CSV, as the source gives it.
struct StepRow {
  int line = 0;
  std::string model;
  int gpus = 0, tp = 1, pp = 1;
  int dp = 0;  // the data_parallel column; 0 where the CSV has none
  int vpp = 1;
  int ep = 1, cp = 1;
  int etp = 0;                   // the expert_tensor_parallel column; 0: not in the CSV
  // The fsdp column: "On" or a sharding size > 0 (fully sharded data parallelism, simulated as
  // ZeRO 3); empty, "/" or 0 for none.
  bool fsdp = false;
  bool fp8 = false;              // the precision column names an FP8 recipe
  bool precision_stated = false;  // the row has a precision cell
  std::vector<int> part_layers;  // empty: an even split
  std::int64_t global_batch = 0;
  std::int64_t micro_batch = 0;  // 0: not stated
  std::int64_t seq = 0;
  std::optional<Recompute> recompute;  // unset: not stated
  RecomputeModules selective_modules;  // with Recompute::kSelective
  TokenDispatcher dispatcher = TokenDispatcher::kAllToAll;  // the dispatcher column's
  bool sequence_parallel = false;
  // The architecture the row states, checked against the preset (0: not in the CSV).
  std::int64_t heads = 0, hidden = 0, layers = 0, vocab = 0;
  std::optional<double> measured;             // in the measure's unit; unset: the cell is empty
  std::string measured_text;                  // the cell as the CSV writes it
  std::optional<double> published_speedup_pct;
  std::vector<std::string> missing;  // what the source does not state, why it cannot be simulated
  bool ep_overlap = false;           // the ep_overlap column's
};

// Reads <dir>/steps.yaml.
StepDataset read_step_dataset(const std::filesystem::path& dir);

// Reads and checks every row of the dataset's CSV (at least one).
std::vector<StepRow> read_step_rows(const StepDataset& dataset);
// The same for another CSV of the folder with the same columns, `measure` naming the column that
// StepRow::measured reads (rows without it are listed as missing it).
std::vector<StepRow> read_step_table(const StepDataset& dataset, const std::string& file, const std::string& measure);

// The folders that hold a steps.yaml: dataset_dirs(root, kStepSourceFile) (validate/published.h).

// A model file named by a dataset: a name ending in .yaml is a file of the dataset's folder,
// anything else a bundled preset. `what` names the key in errors.
std::string resolve_dataset_model(const StepDataset& dataset, const std::string& name, const std::string& what);
std::string resolve_dataset_hardware(const StepDataset& dataset, const std::string& name, const std::string& what);

// --only: a list of DATASET, DATASET:LINE (a CSV line number) or DATASET:MODEL (every row of that
// model), comma-separated; empty selects everything.
struct StepSelection {
  struct Item {
    std::string dataset;
    std::string row;  // "" = the whole dataset
  };
  std::vector<Item> items;
  static StepSelection parse(const std::string& flag_value);
  bool selects_dataset(const std::string& dataset) const;
  bool selects(const std::string& dataset, const StepRow& row) const;
  // InputError naming --only for an item that matches no dataset or row.
  void check_matched(const std::vector<StepDataset>& datasets, const std::vector<std::vector<StepRow>>& rows) const;
};

// FLOPs of one iteration as Korthikanti et al. 2022, Appendix A count them: model FLOPs
// 72 B L s h^2 (1 + s/(6h) + V/(12 h L)) with no recomputation; with selective recomputation the
// attention core's forward once more (s/(3h) for s/(6h)); with full recomputation every layer's
// forward once more (96 for 72 on the layers' terms; the logits are not recomputed). B the global
// batch in sequences, L layers, s the sequence, h the hidden size, V the vocabulary.
double published_iteration_flops(const ModelSpec& model, std::int64_t global_batch, std::int64_t seq, Recompute r,
                                 const RecomputeModules& modules = {});

}  // namespace moesim::validate
