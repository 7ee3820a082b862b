#include "sim/spec/run_options.h"

#include "sim/spec/option_rules.h"
#include "sim/spec/yaml_reader.h"

namespace moesim {
namespace {

// How an option reaches its RunSpec field. `put` receives text that already passed the option's
// rule (a whole number in range, a listed choice, "true"/"false"), except routing, which parses its
// own text.
struct Access {
  std::string (*get)(const RunSpec&);
  void (*put)(RunSpec&, const std::string&, const SourceLocation&, const std::string& base_dir);
  std::vector<std::string> (*names)();  // kChoice only
};

std::int64_t to_int(const std::string& text) { return whole_number(text).value_or(0); }

std::string yes_no(bool b) { return b ? "true" : "false"; }

#define MOESIM_INT_FIELD(field)                                                                                    \
  Access {                                                                                                         \
    [](const RunSpec& r) { return std::to_string(r.field); },                                                      \
        [](RunSpec& r, const std::string& t, const SourceLocation&, const std::string&) {                          \
          r.field = static_cast<decltype(r.field)>(to_int(t));                                                     \
        },                                                                                                         \
        nullptr                                                                                                    \
  }
#define MOESIM_BOOL_FIELD(field)                                                                                   \
  Access {                                                                                                         \
    [](const RunSpec& r) { return yes_no(r.field); },                                                              \
        [](RunSpec& r, const std::string& t, const SourceLocation&, const std::string&) { r.field = t == "true"; }, \
        nullptr                                                                                                    \
  }
#define MOESIM_CHOICE_FIELD(field, parse, names_fn)                                                                \
  Access {                                                                                                         \
    [](const RunSpec& r) { return std::string(to_string(r.field)); },                                              \
        [](RunSpec& r, const std::string& t, const SourceLocation&, const std::string&) { r.field = *parse(t); },  \
        names_fn                                                                                                   \
  }

struct Entry {
  RunOption option;
  Access access;
};

RunOption option(const char* key, const char* flag, RunOptionType type, const char* rule, const char* help) {
  RunOption o;
  o.key = key;
  o.flag = flag;
  o.type = type;
  o.rule = rule;
  o.help = help;
  return o;
}

RunOption integer(const char* key, const char* flag, std::int64_t min, std::int64_t max, const char* rule,
                  const char* help) {
  RunOption o = option(key, flag, RunOptionType::kInteger, rule, help);
  o.min = min;
  o.max = max;
  return o;
}

RunOption boolean(const char* key, const char* flag, bool flag_sets, const char* rule, const char* help) {
  RunOption o = option(key, flag, RunOptionType::kBool, rule, help);
  o.flag_sets = flag_sets;
  return o;
}

RunOption choice(const char* key, const char* flag, const char* rule, const char* help) {
  return option(key, flag, RunOptionType::kChoice, rule, help);
}

// The batch and DeepSpeed-TED's layout.
void add_layout_options(std::vector<Entry>& e) {
  RunOption tokens = integer("tokens_per_gpu", "--tokens", 1, kMaxTokensPerGpu, "tokens per GPU per layer pass (B)",
                             "tokens per GPU per layer pass (B)");
  tokens.required = true;
  e.push_back({tokens, MOESIM_INT_FIELD(tokens_per_gpu)});
  e.push_back({integer("ep_size", "--ep", 0, kMaxGroupSize,
                       "expert-parallel group size, 0 = every GPU / `tp_size`; `tp_size x ep_size` divides the "
                       "cluster's GPUs, `ep_size` divides the experts",
                       "expert-parallel group size (0 = every GPU of the cluster / --tp)"),
               MOESIM_INT_FIELD(ep_size)});
  e.push_back({integer("tp_size", "--tp", 1, kMaxGroupSize,
                       "tensor-parallel degree of the experts and non-expert blocks (DeepSpeed-TED, "
                       "docs/concepts.md); divides the GPUs, `d_ffn` and the shared experts' width",
                       "tensor-parallel degree of the experts and non-expert blocks (DeepSpeed-TED); the GPUs are "
                       "tp x ep x data-parallel replicas"),
               MOESIM_INT_FIELD(tp_size)});
  e.push_back({boolean("drop_duplicate_tokens", "--no-dtd", false,
                       "with `tp_size` > 1: TED's duplicate token dropping (no effect with `tp_size` 1)",
                       "with --tp > 1: send every token through the all-to-alls on every tensor-parallel rank "
                       "instead of TED's duplicate token dropping (1/tp each, then an all-gather)"),
               MOESIM_BOOL_FIELD(drop_duplicate_tokens)});
  e.push_back({boolean("grad_sync", "--grad-sync", true,
                       "simulate the data-parallel gradient all-reduces (stream `comm.grad`)",
                       "simulate the data-parallel gradient all-reduces (experts over their data-parallel replicas, "
                       "the gate and shared experts over the non-expert group) on stream comm.grad"),
               MOESIM_BOOL_FIELD(grad_sync)});
  e.push_back({integer("zero_stage", "--zero", 0, 1,
                       "ZeRO stage of the optimizer states: 1 shards them over the data-parallel group",
                       "ZeRO stage of the optimizer states: 0 (whole on every rank; the default) or 1 (sharded over "
                       "the data-parallel group); with --global-batch 0-3 (1 is Megatron's distributed optimizer)"),
               MOESIM_INT_FIELD(zero_stage)});
  e.push_back({choice("checkpoint", "--checkpoint",
                      "activation checkpointing of each MoE layer (`cac`: TED's communication-aware variant); needs "
                      "`strategy: none`",
                      "activation checkpointing of each MoE layer: none | full (re-run its forward before its "
                      "backward) | cac (TED's communication-aware checkpointing: the re-run reuses the all-to-alls' "
                      "stashed outputs); needs strategy none"),
               MOESIM_CHOICE_FIELD(checkpoint, parse_activation_checkpointing, activation_checkpointing_names)});
}

// The chunks, their order and memory reuse, and what the memory accounting counts.
void add_chunk_options(std::vector<Entry>& e) {
  RunOption chunks = integer("num_chunks", "--chunks", 1, kMaxChunks,
                             "pipeline chunks per layer (n), at most the capacity C per expert; an n that does not "
                             "divide C splits it into chunks that differ by one slot",
                             "pipeline chunks per layer (n)");
  chunks.alias = "-n";
  e.push_back({chunks, MOESIM_INT_FIELD(num_chunks)});
  e.push_back({integer("chunk_alignment", "--chunk-align", 1, kMaxChunkAlignment,
                       "chunk sizes (capacity slots per expert and source) are multiples of it but for the last "
                       "chunk, which also takes the C mod a slots left; C must hold n blocks "
                       "([concepts.md](concepts.md#one-moe-layer))",
                       "chunk sizes are multiples of this many capacity slots, the last chunk taking what is left "
                       "(1: chunks differ by at most one slot)"),
               MOESIM_INT_FIELD(chunk_alignment)});
  e.push_back({choice("order", "--order", "ordering policy of the chunks' stages",
                      "ordering policy: sequential|mpipemoe|fastermoe|tutel"),
               MOESIM_CHOICE_FIELD(order, parse_order_policy, order_policy_names)});
  e.push_back({integer("num_moe_layers", "--layers", 1, kMaxMoeLayers, "MoE layers simulated back to back",
                       "MoE layers simulated back to back"),
               MOESIM_INT_FIELD(num_moe_layers)});
  e.push_back({integer("seed", "--seed", 0, static_cast<std::int64_t>(kMaxSeed),
                       "random seed: places zipf routing's hot experts; recorded in reports",
                       "random seed: places zipf routing's hot experts (recorded in the report)"),
               MOESIM_INT_FIELD(seed)});
  e.push_back({choice("strategy", "--strategy", "MPipeMoE's memory reuse", "memory-reuse strategy: none|s1|s2|s3|s4 (MPipeMoE)"),
               MOESIM_CHOICE_FIELD(strategy, parse_memory_strategy, memory_strategy_names)});
  e.push_back({integer("slots", "--slots", 1, 2, "buffer slots per reused tensor with `s1`-`s4`",
                       "buffer slots per reused tensor with s1-s4: 1 or 2"),
               MOESIM_INT_FIELD(slots)});
  e.push_back({choice("optimizer", "--optimizer", "the optimizer of the model-state memory",
                      "optimizer for model-state memory: adam|momentum|sgd"),
               MOESIM_CHOICE_FIELD(optimizer, parse_optimizer, optimizer_names)});
  e.push_back({boolean("routing_data", "--no-routing-data", false,
                       "count the gate scores and indices kept for backward (false: the papers' accounting)",
                       "do not count gate scores and indices kept for backward (the papers' accounting)"),
               MOESIM_BOOL_FIELD(count_routing_data)});
}

// The cost models and the routing.
void add_model_options(std::vector<Entry>& e) {
  e.push_back({choice("network", "--network", "the collective model (docs/network.md, `moesim cost-models`)",
                      "collective model: auto|alpha-beta|flow (auto: flow when the hardware has a topology, else "
                      "alpha-beta; `moesim cost-models`, docs/network.md)"),
               MOESIM_CHOICE_FIELD(network, parse_network_model, network_model_names)});
  e.push_back({choice("compute", "--compute", "the model of the other tasks (docs/concepts.md, `moesim cost-models`)",
                      "compute model: auto|roofline|pipemoe-alpha-beta (auto: pipemoe-alpha-beta when the "
                      "hardware's alpha_beta says simulate: true, else roofline; `moesim cost-models`)"),
               MOESIM_CHOICE_FIELD(compute, parse_compute_model, compute_model_names)});
  e.push_back({choice("all_to_all", "--a2a", "all-to-all algorithm of dispatch and combine (flow model only)",
                      "all-to-all algorithm of dispatch/combine (flow model): pairwise|2dh"),
               MOESIM_CHOICE_FIELD(all_to_all, parse_all_to_all_algorithm, all_to_all_algorithm_names)});
  const RunOption routing = option(
      "routing", "--routing", RunOptionType::kRouting,
      "how the gate routes tokens to experts (docs/network.md); a matrix's path is relative to the run file",
      "token routing: uniform (balanced, padded to capacity) | zipf:<s> | matrix:<csv file>; other than uniform, "
      "every rank is simulated with its own rows (--global-batch: the MoE layers compute the most loaded "
      "expert-parallel rank's rows, all-to-allv between)");
  e.push_back({routing, Access{[](const RunSpec& r) { return r.routing.to_string(); },
                               [](RunSpec& r, const std::string& t, const SourceLocation& where,
                                  const std::string& base) { r.routing = parse_routing_spec(t, where, base); },
                               nullptr}});
}

std::vector<Entry> make_entries() {
  std::vector<Entry> e;
  add_layout_options(e);
  add_chunk_options(e);
  add_model_options(e);
  return e;
}

#undef MOESIM_INT_FIELD
#undef MOESIM_BOOL_FIELD
#undef MOESIM_CHOICE_FIELD

const std::vector<Entry>& entries() {
  static const std::vector<Entry> table = make_entries();
  return table;
}

const Access& access_of(const RunOption& option) {
  for (const Entry& e : entries())
    if (e.option.key == std::string(option.key)) return e.access;
  MOESIM_CHECK(false, std::string("no run option '") + option.key + "'");
  return entries().front().access;
}

std::string join(const std::vector<std::string>& names, const char* quote) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + std::string(quote) + n + quote;
  return s;
}

}  // namespace

std::vector<std::string> RunOption::choices() const {
  const Access& a = access_of(*this);
  return a.names ? a.names() : std::vector<std::string>{};
}

std::string RunOption::text(const RunSpec& run) const { return access_of(*this).get(run); }

namespace {

// The rule `value` breaks, or "" when it is a valid spelling (a routing value is checked when parsed).
std::string broken_rule(const RunOption& o, const std::string& value) {
  switch (o.type) {
    case RunOptionType::kInteger:
      return integer_rule_broken(value, o.min, o.max);
    case RunOptionType::kBool:
      return bool_rule_broken(value);
    case RunOptionType::kChoice:
      return choice_rule_broken(value, o.choices());
    case RunOptionType::kRouting:
      return "";
  }
  return "";
}

}  // namespace

void RunOption::set_from_flag(RunSpec& run, const std::string& value) const { set_from_text(run, value, flag); }

void RunOption::set_from_text(RunSpec& run, const std::string& value, const std::string& name) const {
  // The same rule as from a file (read below), named by the flag instead of located.
  std::string rule = broken_rule(*this, value);
  if (rule.empty()) {
    try {
      access_of(*this).put(run, value, SourceLocation{}, "");
      return;
    } catch (const InputError& e) {
      rule = e.rule();  // routing's own rule
    }
  }
  throw InputError(name + ": " + rule);
}

void RunOption::read(RunSpec& run, const YamlValue& value, const std::string& base_dir) const {
  std::string text;
  switch (type) {
    case RunOptionType::kInteger:
      text = std::to_string(value.as_int(min, max));
      break;
    case RunOptionType::kBool:
      text = yes_no(value.as_bool());
      break;
    case RunOptionType::kChoice:
    case RunOptionType::kRouting:
      text = value.as_string();
      break;
  }
  const std::string rule = broken_rule(*this, text);
  if (!rule.empty()) value.fail(rule);  // located, and named by its key as every file error is
  try {
    access_of(*this).put(run, text, value.location(), base_dir);
  } catch (const InputError& e) {
    value.fail(e.rule());
  }
}

const char* RunOption::type_name() const {
  switch (type) {
    case RunOptionType::kInteger:
      return "integer";
    case RunOptionType::kBool:
      return "bool";
    case RunOptionType::kChoice:
    case RunOptionType::kRouting:
      return "string";
  }
  return "string";
}

std::string RunOption::values_text() const {
  switch (type) {
    case RunOptionType::kInteger:
      return "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
    case RunOptionType::kBool:
      return "`true`, `false`";
    case RunOptionType::kChoice:
      return join(choices(), "`");
    case RunOptionType::kRouting:
      return "`uniform`, `zipf:<s>`, `matrix:<csv file>`";
  }
  return "";
}

const std::vector<RunOption>& run_options() {
  static const std::vector<RunOption> options = [] {
    std::vector<RunOption> out;
    for (const Entry& e : entries()) out.push_back(e.option);
    return out;
  }();
  return options;
}

const RunOption& run_option(const std::string& key) {
  for (const RunOption& o : run_options())
    if (o.key == key) return o;
  MOESIM_CHECK(false, "no run option '" + key + "'");
  return run_options().front();
}

std::string run_options_markdown() {
  const RunSpec defaults;
  std::string s = "| key | flag | type | default | values | rule |\n|---|---|---|---|---|---|\n";
  for (const RunOption& o : run_options()) {
    std::string flag = std::string("`") + o.flag + "`";
    if (o.type == RunOptionType::kBool) flag += std::string(" sets ") + (o.flag_sets ? "true" : "false");
    const std::string def = o.required ? "required" : "`" + o.text(defaults) + "`";
    s += std::string("| `") + o.key + "` | " + flag + " | " + o.type_name() + " | " + def + " | " + o.values_text() +
         " | " + o.rule + " |\n";
  }
  return s;
}

}  // namespace moesim
