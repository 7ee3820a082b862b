#include "sim/spec/step_options.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "sim/core/error.h"
#include "sim/spec/option_rules.h"
#include "sim/spec/run_spec.h"
#include "sim/spec/yaml_reader.h"

namespace moesim {
namespace {

// How an option reaches its StepSpec field: `put` receives text that passed the option's rule
// (a kList option parses, and throws its own rule, itself).
struct Access {
  void (*put)(StepSpec&, const std::string&);
  std::vector<std::string> (*names)();  // kChoice only
};

struct Entry {
  StepOption option;
  Access access;
};

StepOption option(const char* flag, StepOptionType type, const char* default_text, const char* rule,
                  const char* help) {
  StepOption o;
  o.flag = flag;
  o.type = type;
  o.default_text = default_text;
  o.rule = rule;
  o.help = help;
  return o;
}

StepOption integer(const char* flag, double max, const char* default_text, const char* rule, const char* help) {
  StepOption o = option(flag, StepOptionType::kInteger, default_text, rule, help);
  o.min = 1;
  o.max = max;
  return o;
}

std::int64_t to_int(const std::string& t) { return whole_number(t).value_or(0); }

// "4,8,8": the layers of each model part.
std::vector<int> parse_part_layers(const std::string& text) {
  std::vector<int> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    if (!integer_rule_broken(item, 0, kMaxMoeLayers).empty())
      throw InputError("'" + item + "' in '" + text + "' is not a layer count in [0, " + std::to_string(kMaxMoeLayers) +
                       "]; give a comma-separated list such as 4,8,8,...");
    out.push_back(static_cast<int>(to_int(item)));
    start = comma + 1;
  }
  return out;
}

std::vector<std::string> precision_names() { return {"bf16", "fp8"}; }

#define MOESIM_STEP_INT(expr) \
  Access { [](StepSpec& s, const std::string& t) { expr = static_cast<decltype(expr)>(to_int(t)); }, nullptr }
#define MOESIM_STEP_CHOICE(expr, parse, names_fn) \
  Access { [](StepSpec& s, const std::string& t) { expr = *parse(t); }, names_fn }
#define MOESIM_STEP_BOOL(expr) \
  Access { [](StepSpec& s, const std::string& t) { expr = t == "true"; }, nullptr }

// The batch and the parallel layout the step adds to --tp and --ep.
void add_layout_options(std::vector<Entry>& e) {
  e.push_back({integer("--global-batch", static_cast<double>(kMaxTokensPerGpu), "none: the MoE-layer simulation",
                       "sequences per step over all data-parallel replicas; selects the whole-step simulation",
                       "sequences per step: simulate the whole training step of a model with an architecture section "
                       "(pipeline stages, every layer, gradient reductions, optimizer; docs/training-step.md)"),
               MOESIM_STEP_INT(s.global_batch)});
  e.push_back({integer("--micro-batch", static_cast<double>(kMaxTokensPerGpu), "1", "sequences per microbatch",
                       "sequences per microbatch (whole step)"),
               MOESIM_STEP_INT(s.micro_batch)});
  e.push_back({integer("--seq", static_cast<double>(kMaxTokensPerGpu), "the model's `seq_len`",
                       "tokens per sequence", "tokens per sequence (whole step; default: the model's seq_len)"),
               MOESIM_STEP_INT(s.seq)});
  e.push_back({integer("--pp", kMaxGroupSize, "1", "pipeline-parallel stages; the data-parallel size is GPUs / (tp x cp x pp)",
                       "pipeline-parallel stages (whole step)"),
               MOESIM_STEP_INT(s.layout.pp)});
  e.push_back({integer("--vpp", kMaxGroupSize, "1", "virtual pipeline stages (model chunks) per stage",
                       "virtual pipeline stages per stage (whole step; interleaved 1F1B)"),
               MOESIM_STEP_INT(s.layout.vpp)});
  e.push_back({integer("--cp", kMaxGroupSize, "1", "context-parallel degree (ring attention)",
                       "context-parallel degree (whole step)"),
               MOESIM_STEP_INT(s.layout.cp)});
  e.push_back({integer("--etp", kMaxGroupSize, "`--tp`",
                       "the experts' tensor-parallel size (Megatron-Core's `--expert-tensor-parallel-size`): the MoE "
                       "layers' own layout etp x ep x edp over a stage's tp x cp x dp ranks "
                       "([parallel folding](#moe-parallel-folding---etp))",
                       "the experts' tensor-parallel size (whole step; Megatron-Core's --expert-tensor-parallel-size, "
                       "default --tp): the MoE layers' own layout etp x ep x expert data-parallel over a stage's ranks"),
               MOESIM_STEP_INT(s.layout.etp)});
  e.push_back({option("--schedule", StepOptionType::kChoice, "`1f1b`, `interleaved` with `--vpp` > 1",
                      "pipeline schedule; [DualPipe](#dualpipe) needs an even `--pp` and an even number of "
                      "microbatches, at least 2 x pp; [DualPipeV](#dualpipev) at least 2 x pp microbatches",
                      "pipeline schedule (whole step): gpipe|1f1b|interleaved|zb-h1|dualpipe|dualpipev"),
               MOESIM_STEP_CHOICE(s.schedule, parse_pipeline_schedule, pipeline_schedule_names)});
  e.push_back({option("--part-layers", StepOptionType::kList, "an even split",
                      "layers of each model part (pp x vpp counts in forward order; dualpipev 2 x pp) for an uneven "
                      "split, e.g. DeepSeek-V3's 61 layers",
                      "layers of each model part (whole step; --pp x --vpp comma-separated counts in forward order, "
                      "dualpipev 2 x --pp) for an uneven split, e.g. 7,8,8,8,8,8,8,6"),
               Access{[](StepSpec& s, const std::string& t) { s.part_layers = parse_part_layers(t); }, nullptr}});
}

// Recomputation, precision and the kernels.
void add_work_options(std::vector<Entry>& e) {
  e.push_back({option("--recompute", StepOptionType::kChoice, "`none`", "activation recomputation (Korthikanti et al.)",
                      "activation recomputation (whole step): none|selective|full"),
               MOESIM_STEP_CHOICE(s.recompute, parse_recompute, recompute_names)});
  e.push_back({option("--recompute-modules", StepOptionType::kList, "`core_attn`",
                      "with `--recompute selective`: the modules it drops and re-runs, Megatron-Core's "
                      "`--recompute-modules` names: `core_attn`, `layernorm`, `moe_act`, `mla_up_proj`, `mlp`, `moe`, "
                      "`shared_experts` ([below](#recomputation))",
                      "with --recompute selective: the modules re-run, a list of core_attn, layernorm, moe_act, "
                      "mla_up_proj, mlp, moe, shared_experts (Megatron-Core's names; default core_attn)"),
               Access{[](StepSpec& s, const std::string& t) {
                        std::string error;
                        const auto modules = parse_recompute_modules(t, error);
                        if (!modules)
                          throw InputError(error + "; valid: " + YamlValue::join_names(recompute_module_names()));
                        s.recompute_modules = *modules;
                      },
                      nullptr}});
  StepOption sp = option("--sequence-parallel", StepOptionType::kBool, "off",
                         "Megatron's sequence parallelism (needs `--tp` > 1)",
                         "Megatron's sequence parallelism (whole step, --tp > 1)");
  e.push_back({sp, MOESIM_STEP_BOOL(s.sequence_parallel)});
  e.push_back({option("--attention", StepOptionType::kChoice, "`flash`",
                      "the attention kernel: FlashAttention, or Megatron-LM 2021-22's unfused core (s x s scores, "
                      "softmax, dropout)",
                      "attention kernel (whole step): flash | unfused (Megatron-LM 2021-22: s x s scores, softmax, "
                      "dropout)"),
               MOESIM_STEP_CHOICE(s.attention, parse_attention_kernel, attention_kernel_names)});
  e.push_back({option("--precision", StepOptionType::kChoice, "`bf16`",
                      "the GEMMs' math: the model's own (bf16 or fp16), or fp8 on GPUs with an fp8 peak",
                      "GEMM precision (whole step): bf16 (the model's own math) | fp8"),
               Access{[](StepSpec& s, const std::string& t) { s.gemm_precision = t == "fp8" ? DType::kFp8 : DType::kBf16; },
                      precision_names}});
  e.push_back({option("--fp8-recipe", StepOptionType::kChoice, "`current`",
                      "with `--precision fp8`, Transformer Engine's scaling recipe: per-tensor current scaling "
                      "(Megatron-Bridge's FP8-CS) or delayed scaling ([FP8](#fp8-scaling))",
                      "FP8 scaling recipe (whole step, --precision fp8): current (default; per-tensor current "
                      "scaling, FP8-CS) | delayed (amax history)"),
               MOESIM_STEP_CHOICE(s.fp8_recipe, parse_fp8_recipe, fp8_recipe_names)});
}

// The gradient reductions, the host and the MoE layers' communication.
void add_overlap_options(std::vector<Entry>& e) {
  StepOption no_overlap = option("--no-overlap-grad-reduce", StepOptionType::kBool, "per layer during the backward",
                                 "one gradient reduction per stage after the backward, instead of one per layer "
                                 "during it",
                                 "reduce the gradients once after the backward instead of per layer during it "
                                 "(whole step)");
  no_overlap.flag_sets = false;
  e.push_back({no_overlap, MOESIM_STEP_BOOL(s.overlap_grad_reduce)});
  StepOption host = option("--host-launch-us", StepOptionType::kReal, "the host is not modelled",
                           "each rank's host launches its kernels, copies and collectives one after the other, X "
                           "microseconds each, and waits for the values it reads "
                           "([host launches](#host-launches---host-launch-us))",
                           "host time per launched kernel, copy or collective in microseconds (whole step): each "
                           "rank's host issues its tasks in program order and waits for the values it reads (the MoE "
                           "dispatcher's split sizes, the gradient norm); default: the host is not modelled "
                           "(docs/training-step.md#host-launches---host-launch-us)");
  host.max = 1000;
  e.push_back({host, Access{[](StepSpec& s, const std::string& t) {
                              s.host_launch_ns = std::llround(std::strtod(t.c_str(), nullptr) * 1e3);
                            },
                            nullptr}});
  e.push_back({option("--dispatcher", StepOptionType::kChoice, "`alltoall`",
                      "the MoE layers' token dispatcher: Megatron-Core's all-to-all, or DeepEP's normal kernels "
                      "(each token once per node over RDMA, then once per GPU over NVLink; "
                      "[token dispatchers](#token-dispatchers---dispatcher))",
                      "MoE token dispatcher (whole step): alltoall (Megatron-Core's all-to-all dispatcher, one row "
                      "per token and expert; default) | deepep (DeepEP's normal kernels through Megatron-Core's flex "
                      "dispatcher, HybridEP's bytes too: each token once per node over RDMA, then once per GPU over "
                      "NVLink; dropless models, uniform routing; docs/training-step.md#token-dispatchers---dispatcher)"),
               MOESIM_STEP_CHOICE(s.dispatcher, parse_token_dispatcher, token_dispatcher_names)});
  e.push_back({option("--overlap-moe-expert-parallel-comm", StepOptionType::kBool, "off",
                      "Megatron-Core's combined 1F1B: one more warmup forward, each steady-state forward interleaved "
                      "with an earlier microbatch's backward (MoE models; `--pp 1` or `--vpp > 1`; `--ep > 1`; no full "
                      "recomputation; [below](#all-to-all-overlap-in-1f1b---overlap-moe-expert-parallel-comm))",
                      "Megatron-Core's overlap_moe_expert_parallel_comm (whole step, MoE models, --pp 1 or --vpp > 1, "
                      "--ep > 1, no full recomputation, --zero 0-2): its combined 1F1B, one more warmup forward and "
                      "each steady-state forward overlapped with an earlier microbatch's backward, one's all-to-alls "
                      "beside the other's kernels "
                      "(docs/training-step.md#all-to-all-overlap-in-1f1b---overlap-moe-expert-parallel-comm)"),
               MOESIM_STEP_BOOL(s.overlap_moe_ep_comm)});
  e.push_back({option("--use-tp-pp-dp-mapping", StepOptionType::kBool, "off",
                      "Megatron-LM's rank order tp-cp-pp-dp (the experts' tp-ep-pp-dp): a pipeline's stages on "
                      "neighbouring ranks, the data-parallel replicas outermost; with MoE layers and `--pp` > 1 "
                      "`--etp` x `--ep` = `--tp` x `--cp` ([ranks](#what-is-simulated))",
                      "Megatron-LM's --use-tp-pp-dp-mapping (whole step): ranks in the order tp-cp-pp-dp (the "
                      "experts' tp-ep-pp-dp) instead of tp-cp-ep-dp-pp, so the pipeline's neighbours, not the "
                      "data-parallel replicas, share a node; MoE layers with --pp > 1 need --etp x --ep = --tp x --cp"),
               MOESIM_STEP_BOOL(s.tp_pp_dp_mapping)});
}

#undef MOESIM_STEP_INT
#undef MOESIM_STEP_CHOICE
#undef MOESIM_STEP_BOOL

const std::vector<Entry>& entries() {
  static const std::vector<Entry> table = [] {
    std::vector<Entry> e;
    add_layout_options(e);
    add_work_options(e);
    add_overlap_options(e);
    return e;
  }();
  return table;
}

const Access& access_of(const StepOption& option) {
  for (const Entry& e : entries())
    if (std::string(e.option.flag) == option.flag) return e.access;
  MOESIM_CHECK(false, std::string("no step option '") + option.flag + "'");
  return entries().front().access;
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

}  // namespace

std::vector<std::string> StepOption::choices() const {
  const Access& a = access_of(*this);
  return a.names ? a.names() : std::vector<std::string>{};
}

void StepOption::set_from_flag(StepSpec& spec, const std::string& value) const {
  std::string rule;
  switch (type) {
    case StepOptionType::kInteger:
      rule = integer_rule_broken(value, static_cast<std::int64_t>(min), static_cast<std::int64_t>(max));
      break;
    case StepOptionType::kReal:
      rule = real_rule_broken(value, min, max);
      break;
    case StepOptionType::kBool:
      rule = bool_rule_broken(value);
      break;
    case StepOptionType::kChoice:
      rule = choice_rule_broken(value, choices());
      break;
    case StepOptionType::kList:
      break;
  }
  if (rule.empty()) {
    try {
      access_of(*this).put(spec, value);
      return;
    } catch (const InputError& e) {
      rule = e.rule();  // a list's own rule
    }
  }
  throw InputError(std::string(flag) + ": " + rule);
}

const char* StepOption::type_name() const {
  switch (type) {
    case StepOptionType::kInteger:
      return "integer";
    case StepOptionType::kReal:
      return "number";
    case StepOptionType::kBool:
      return "flag";
    case StepOptionType::kChoice:
      return "string";
    case StepOptionType::kList:
      return "list";
  }
  return "string";
}

std::string StepOption::values_text() const {
  switch (type) {
    case StepOptionType::kInteger:
    case StepOptionType::kReal:
      return "[" + number(min) + ", " + number(max) + "]";
    case StepOptionType::kBool:
      return "none (a flag)";
    case StepOptionType::kChoice: {
      std::string s;
      for (const std::string& c : choices()) s += (s.empty() ? "`" : ", `") + c + "`";
      return s;
    }
    case StepOptionType::kList:
      return "comma-separated";
  }
  return "";
}

const std::vector<StepOption>& step_options() {
  static const std::vector<StepOption> options = [] {
    std::vector<StepOption> out;
    for (const Entry& e : entries()) out.push_back(e.option);
    return out;
  }();
  return options;
}

const StepOption& step_option(const std::string& flag) {
  for (const StepOption& o : step_options())
    if (o.flag == flag) return o;
  MOESIM_CHECK(false, "no step option '" + flag + "'");
  return step_options().front();
}

std::string step_options_markdown() {
  std::string s = "| flag | type | default | values | rule |\n|---|---|---|---|---|\n";
  for (const StepOption& o : step_options())
    s += std::string("| `") + o.flag + "` | " + o.type_name() + " | " + o.default_text + " | " + o.values_text() +
         " | " + o.rule + " |\n";
  return s;
}

}  // namespace moesim
