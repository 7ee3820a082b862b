#include "validate/step_data.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>

#include "sim/core/error.h"
#include "sim/core/input_file.h"
#include "sim/spec/presets.h"
#include "sim/spec/run_spec.h"
#include "sim/spec/yaml_reader.h"
#include "validate/csv_cells.h"

namespace moesim::validate {

namespace {

// The tables are a few kilobytes; the cap keeps a wrong path from being read without end.
constexpr std::uintmax_t kMaxStepTableBytes = std::uintmax_t{1} << 20;
// Whole-step datasets describe clusters of up to some thousands of GPUs; the cap keeps a typo from
// asking for a simulation without end.
constexpr std::int64_t kMaxRowGpus = 1 << 16;

const std::vector<std::string> kStepKeys = {"schema_version", "kind",      "title",     "source",
                                            "file",           "measure",   "not_simulated", "hardware",
                                            "attention",      "overlap_grad_reduce", "models", "goals",
                                            "layer_times"};

StepMeasure parse_measure(const YamlValue& v) {
  const std::string s = v.as_string();
  if (s == "iteration-time") return StepMeasure::kIterationTime;
  if (s == "tflops-per-gpu") return StepMeasure::kTflopsPerGpu;
  if (s == "tokens-per-s-per-gpu") return StepMeasure::kTokensPerSPerGpu;
  v.fail("must be iteration-time, tflops-per-gpu or tokens-per-s-per-gpu");
}

std::vector<StepModelMapping> read_models(const YamlValue& v, bool default_overlap) {
  if (!v.is_map()) v.fail("must map the CSV's model names to presets");
  std::vector<StepModelMapping> out;
  for (const auto& entry : v.node()) {
    StepModelMapping m;
    m.name = entry.first.as<std::string>();
    m.overlap_grad_reduce = default_overlap;
    const YamlValue value(entry.second, v.file(), "models." + m.name, entry.second.Mark());
    if (value.is_map()) {
      const YamlMap map(value, {"preset", "overlap_grad_reduce", "expert_tensor_parallel"});
      m.preset = map.require("preset").as_name();
      if (auto o = map.get("overlap_grad_reduce")) m.overlap_grad_reduce = o->as_bool();
      if (auto e = map.get("expert_tensor_parallel")) m.etp = static_cast<int>(e->as_int(1, kMaxGroupSize));
    } else {
      m.preset = value.as_name();
    }
    out.push_back(m);
  }
  if (out.empty()) v.fail("must name at least one model");
  return out;
}

StepGoals read_goals(const YamlValue& v) {
  const YamlMap m = v.as_map({"row_error_pct", "speedup_points"});
  StepGoals g;
  if (auto e = m.get("row_error_pct")) g.row_error = e->as_double(0, 100, true) / 100;
  if (auto p = m.get("speedup_points")) g.speedup_points = p->as_double(0, 100, true);
  return g;
}

// The columns of the header, by name; InputError for a repeated one or a required one missing.
std::map<std::string, std::size_t> read_header(const std::string& line, const SourceLocation& at, const std::string& measure) {
  std::map<std::string, std::size_t> columns;
  const auto names = split_csv(line);
  for (std::size_t i = 0; i < names.size(); ++i)
    if (!columns.emplace(names[i], i).second) throw InputError(at, "column '" + names[i] + "' appears twice");
  for (const char* need : {"model", "gpus", "tensor_parallel", "pipeline_parallel", "global_batch_size", "seq_len"})
    if (!columns.count(need)) throw InputError(at, std::string("no column '") + need + "'");
  if (!columns.count(measure)) throw InputError(at, "no column '" + measure + "' (the measured one)");
  if (columns.count("virtual_stages") && columns.count("layers_per_virtual_stage"))
    throw InputError(at, "give virtual_stages or layers_per_virtual_stage, not both");
  return columns;
}

// One data line's cells by column name; an optional column that is absent or empty reads as "".
class RowCells {
 public:
  RowCells(const std::map<std::string, std::size_t>& columns, std::vector<std::string> cells, SourceLocation at)
      : columns_(columns), cells_(std::move(cells)), at_(std::move(at)) {}
  const SourceLocation& at() const { return at_; }
  bool has(const char* column) const { return !get(column).empty(); }
  bool has_column(const char* column) const { return columns_.count(column) > 0; }
  std::string get(const char* column) const {
    const auto it = columns_.find(column);
    return it == columns_.end() ? std::string() : cells_[it->second];
  }
  std::int64_t whole(const char* column, std::int64_t min) const { return whole_cell(get(column), at_, column, min); }
  double positive(const char* column) const { return positive_cell(get(column), at_, column); }

 private:
  const std::map<std::string, std::size_t>& columns_;
  std::vector<std::string> cells_;
  SourceLocation at_;
};

// "2 3 3 ... 2": the layers of each of the row's pp x vpp model parts, in forward order.
std::vector<int> read_part_layers(const RowCells& c, int parts) {
  std::istringstream in(c.get("part_layers"));
  std::vector<int> out;
  for (std::string item; in >> item;) out.push_back(static_cast<int>(whole_cell(item, c.at(), "part_layers", 0)));
  if (static_cast<int>(out.size()) != parts)
    throw InputError(c.at(), "part_layers lists " + std::to_string(out.size()) + " parts; pipeline_parallel x virtual stages = " +
                                 std::to_string(parts));
  return out;
}

// The precision column: bf16, or an FP8 recipe (fp8, fp8-cs, fp8-blockwise), case-insensitive.
bool read_fp8(const RowCells& c) {
  std::string p = c.get("precision");
  std::transform(p.begin(), p.end(), p.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (p == "bf16") return false;
  if (p == "fp8" || p == "fp8-cs" || p == "fp8-blockwise") return true;
  throw InputError(c.at(), "precision '" + c.get("precision") + "' is not bf16, fp8, fp8-cs or fp8-blockwise");
}

void read_layout(const RowCells& c, StepRow& r) {
  r.gpus = static_cast<int>(c.whole("gpus", 1));
  if (r.gpus > kMaxRowGpus) throw InputError(c.at(), "gpus " + c.get("gpus") + " is more than " + std::to_string(kMaxRowGpus));
  r.tp = static_cast<int>(c.whole("tensor_parallel", 1));
  r.pp = static_cast<int>(c.whole("pipeline_parallel", 1));
  if (c.has("context_parallel")) r.cp = static_cast<int>(c.whole("context_parallel", 1));
  if (c.has("expert_parallel")) r.ep = static_cast<int>(c.whole("expert_parallel", 1));
  if (c.has("expert_tensor_parallel")) r.etp = static_cast<int>(c.whole("expert_tensor_parallel", 1));
  if (c.has("fsdp")) {
    const std::string f = c.get("fsdp");
    if (f == "On" || f == "on") r.fsdp = true;
    else if (!f.empty() && f != "/") r.fsdp = c.whole("fsdp", 0) > 0;
  }
  const std::int64_t model_parallel = std::int64_t{r.tp} * r.cp * r.pp;
  const std::string named = r.cp > 1 ? "tensor_parallel x context_parallel x pipeline_parallel"
                                      : "tensor_parallel x pipeline_parallel";
  if (r.gpus % model_parallel != 0)
    throw InputError(c.at(), "gpus " + std::to_string(r.gpus) + " is not a multiple of " + named + " = " +
                                 std::to_string(model_parallel));
  if (c.has("data_parallel")) {
    r.dp = static_cast<int>(c.whole("data_parallel", 1));
    if (r.dp * model_parallel != r.gpus)
      throw InputError(c.at(), "data_parallel " + std::to_string(r.dp) + " x " + named + " is not gpus " + std::to_string(r.gpus));
  }
  if (c.has("virtual_stages")) r.vpp = static_cast<int>(c.whole("virtual_stages", 1));
  if (c.has("layers_per_virtual_stage")) {
    const std::int64_t per = c.whole("layers_per_virtual_stage", 1);
    if (r.layers == 0) throw InputError(c.at(), "layers_per_virtual_stage needs the row's layers");
    if (r.layers % (r.pp * per) != 0)
      throw InputError(c.at(), "layers " + std::to_string(r.layers) + " are not whole virtual stages of " +
                                   std::to_string(per) + " layer(s) on " + std::to_string(r.pp) + " pipeline stage(s)");
    r.vpp = static_cast<int>(r.layers / (r.pp * per));
  }
  if (c.has("part_layers")) r.part_layers = read_part_layers(c, r.pp * r.vpp);
}

// DeepEP and HybridEP send each token once per node and GPU (sim/step/dedup_dispatch.h).
TokenDispatcher read_dispatcher(const RowCells& c) {
  std::string d = c.get("dispatcher");
  std::transform(d.begin(), d.end(), d.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (d == "deepep" || d == "hybridep") return TokenDispatcher::kDeepEp;
  if (d == "all-to-all" || d == "alltoall" || d == "a2a") return TokenDispatcher::kAllToAll;
  throw InputError(c.at(), "dispatcher '" + c.get("dispatcher") + "' is not DeepEP, HybridEP or all-to-all (A2A)");
}

void read_method(const RowCells& c, StepRow& r) {
  // Without the column the run was 16-bit (the dense datasets); with it, an empty cell is unstated.
  r.precision_stated = c.has("precision");
  if (r.precision_stated)
    r.fp8 = read_fp8(c);
  else if (c.has_column("precision"))
    r.missing.push_back("no precision stated");
  if (c.has("micro_batch_size"))
    r.micro_batch = c.whole("micro_batch_size", 1);
  else
    r.missing.push_back("no micro-batch size stated");
  if (c.has("recompute")) {
    const auto rc = parse_recompute(c.get("recompute"));
    if (!rc) throw InputError(c.at(), "recompute '" + c.get("recompute") + "' is not none, selective or full");
    r.recompute = *rc;
  } else {
    r.missing.push_back("no recomputation stated");
  }
  if (c.has("selective_modules")) {
    if (r.recompute != Recompute::kSelective)
      throw InputError(c.at(), "selective_modules '" + c.get("selective_modules") + "' needs recompute selective");
    std::string list = c.get("selective_modules");
    std::replace(list.begin(), list.end(), ' ', ',');
    std::string error;
    const auto modules = parse_recompute_modules(list, error);
    if (!modules) throw InputError(c.at(), "selective_modules '" + c.get("selective_modules") + "': " + error);
    r.selective_modules = *modules;
  }
  if (c.has("dispatcher")) r.dispatcher = read_dispatcher(c);
  for (auto [column, field] : {std::pair{"sequence_parallel", &r.sequence_parallel}, std::pair{"ep_overlap", &r.ep_overlap}}) {
    if (!c.has(column)) continue;
    const std::string v = c.get(column);
    if (v != "yes" && v != "no") throw InputError(c.at(), std::string(column) + " '" + v + "' is not yes or no");
    *field = v == "yes";
  }
}

StepRow read_row(const RowCells& c, const std::string& measure) {
  StepRow r;
  r.line = c.at().line;
  r.model = c.get("model");
  if (r.model.empty()) throw InputError(c.at(), "model is empty");
  for (auto [column, field] : {std::pair{"attention_heads", &r.heads}, std::pair{"hidden_size", &r.hidden},
                               std::pair{"layers", &r.layers}, std::pair{"vocab_size", &r.vocab}})
    if (c.has(column)) *field = c.whole(column, 1);
  read_layout(c, r);
  r.global_batch = c.whole("global_batch_size", 1);
  r.seq = c.whole("seq_len", 1);
  read_method(c, r);
  if (c.has(measure.c_str())) {
    r.measured = c.positive(measure.c_str());
    r.measured_text = c.get(measure.c_str());
  }
  if (!r.measured) r.missing.push_back("no " + measure + " stated");
  if (c.has("throughput_increase_pct")) r.published_speedup_pct = c.positive("throughput_increase_pct");
  return r;
}

std::string resolve_in_folder(const StepDataset& d, const std::string& name, const std::string& what, bool model) {
  const auto ends_yaml = name.size() > 5 && name.compare(name.size() - 5, 5, ".yaml") == 0;
  const std::string arg = ends_yaml ? (d.dir / name).string() : name;
  const std::string flag = (d.dir / kStepSourceFile).string() + ": " + what;
  return model ? resolve_model_arg(arg, flag) : resolve_hardware_arg(arg, flag);
}

}  // namespace

const char* measure_column(StepMeasure m) {
  switch (m) {
    case StepMeasure::kIterationTime: return "iteration_time_s";
    case StepMeasure::kTflopsPerGpu: return "tflops_per_gpu";
    case StepMeasure::kTokensPerSPerGpu: return "tokens_per_s_per_gpu";
  }
  return "";
}

const StepModelMapping* StepDataset::model(const std::string& n) const {
  const auto it = std::find_if(models.begin(), models.end(), [&](const StepModelMapping& m) { return m.name == n; });
  return it == models.end() ? nullptr : &*it;
}

StepDataset read_step_dataset(const std::filesystem::path& dir) {
  const YamlValue root = parse_yaml_file((dir / kStepSourceFile).string());
  if (!root.is_map()) root.fail("a dataset's steps.yaml must be a map");
  const YamlMap m(root, kStepKeys);
  if (m.require("schema_version").as_int(1, 1) != 1) m.fail("schema_version must be 1");
  if (m.require("kind").as_string() != "training-steps") m.require("kind").fail("must be training-steps");
  StepDataset d;
  d.name = dir.filename().string();
  d.dir = dir;
  d.title = m.require("title").as_name();
  d.source = m.require("source").as_name();
  d.file = m.require("file").as_name();
  d.measure = parse_measure(m.require("measure"));
  if (auto v = m.get("not_simulated")) d.not_simulated = v->as_name();
  // With a reason not to simulate, what the simulation needs may be missing; given, it is read.
  const bool simulated = d.not_simulated.empty();
  const auto key = [&](const char* k) { return simulated ? std::optional<YamlValue>(m.require(k)) : m.get(k); };
  if (auto v = key("hardware")) d.hardware = v->as_name();
  if (auto v = key("attention")) d.attention = v->as_enum(parse_attention_kernel, attention_kernel_names());
  if (auto v = key("overlap_grad_reduce")) d.overlap_grad_reduce = v->as_bool();
  if (auto v = key("models")) d.models = read_models(*v, d.overlap_grad_reduce);
  if (auto v = m.get("goals")) d.goals = read_goals(*v);
  if (auto v = m.get("layer_times")) d.layer_times = v->as_name();
  return d;
}

std::vector<StepRow> read_step_rows(const StepDataset& d) {
  return read_step_table(d, d.file, measure_column(d.measure));
}

std::vector<StepRow> read_step_table(const StepDataset& d, const std::string& name, const std::string& measure) {
  const std::string file = (d.dir / name).string();
  std::istringstream in(read_input_file(file, kMaxStepTableBytes, "step table"));
  std::string line;
  std::map<std::string, std::size_t> columns;
  std::vector<StepRow> rows;
  for (int number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const SourceLocation at{file, number, 1};
    if (columns.empty()) {
      columns = read_header(line, at, measure);
      continue;
    }
    auto cells = split_csv(line);
    if (cells.size() != columns.size())
      throw InputError(at, std::to_string(cells.size()) + " cells; the header has " + std::to_string(columns.size()));
    rows.push_back(read_row(RowCells(columns, std::move(cells), at), measure));
  }
  if (rows.empty()) throw InputError(SourceLocation{file, 0, 0}, "no rows under a header");
  return rows;
}

std::string resolve_dataset_model(const StepDataset& d, const std::string& name, const std::string& what) {
  return resolve_in_folder(d, name, what, true);
}

std::string resolve_dataset_hardware(const StepDataset& d, const std::string& name, const std::string& what) {
  return resolve_in_folder(d, name, what, false);
}

StepSelection StepSelection::parse(const std::string& value) {
  StepSelection sel;
  std::istringstream in(value);
  std::string item;
  while (std::getline(in, item, ',')) {
    const auto colon = item.find(':');
    Item i{item.substr(0, colon), colon == std::string::npos ? std::string() : item.substr(colon + 1)};
    if (i.dataset.empty() || (colon != std::string::npos && i.row.empty()))
      throw InputError("--only '" + value + "': each item is DATASET, DATASET:LINE or DATASET:MODEL");
    sel.items.push_back(i);
  }
  if (!value.empty() && value.back() == ',') throw InputError("--only '" + value + "': an empty item");
  return sel;
}

bool StepSelection::selects_dataset(const std::string& dataset) const {
  return items.empty() ||
         std::any_of(items.begin(), items.end(), [&](const Item& i) { return i.dataset == dataset; });
}

bool StepSelection::selects(const std::string& dataset, const StepRow& row) const {
  if (items.empty()) return true;
  return std::any_of(items.begin(), items.end(), [&](const Item& i) {
    return i.dataset == dataset && (i.row.empty() || i.row == row.model || i.row == std::to_string(row.line));
  });
}

void StepSelection::check_matched(const std::vector<StepDataset>& datasets, const std::vector<std::vector<StepRow>>& rows) const {
  for (const Item& item : items) {
    const auto d = std::find_if(datasets.begin(), datasets.end(), [&](const StepDataset& s) { return s.name == item.dataset; });
    std::string names;
    for (const StepDataset& s : datasets) names += (names.empty() ? "" : ", ") + s.name;
    if (d == datasets.end()) throw InputError("--only: no dataset '" + item.dataset + "'; datasets: " + names);
    const auto& r = rows[static_cast<std::size_t>(d - datasets.begin())];
    const Item one[] = {item};
    const StepSelection just{std::vector<Item>(one, one + 1)};
    if (std::none_of(r.begin(), r.end(), [&](const StepRow& row) { return just.selects(item.dataset, row); }))
      throw InputError("--only: " + item.dataset + " has no row at line " + item.row + " nor of model '" + item.row + "'");
  }
}

double published_iteration_flops(const ModelSpec& model, std::int64_t global_batch, std::int64_t seq, Recompute r,
                                 const RecomputeModules& modules) {
  const double b = static_cast<double>(global_batch), s = static_cast<double>(seq);
  const double h = static_cast<double>(model.d_model), layers = model.num_layers;
  const double v = static_cast<double>(model.architecture.vocab_size);
  // The attention core's s/(6h) counts once more when selective recomputation re-runs it.
  const double core = r == Recompute::kSelective && modules.core_attn ? s / (3 * h) : s / (6 * h);
  const double layer_passes = r == Recompute::kFull ? 4 : 3;  // forward, backward (2x), recomputed forward
  const double layer_terms = 24 * layer_passes * b * layers * s * h * h * (1 + core);
  return layer_terms + 6 * b * s * h * v;
}

}  // namespace moesim::validate
