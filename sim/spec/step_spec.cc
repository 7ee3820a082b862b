#include "sim/spec/step_spec.h"

#include <cstdio>

#include "sim/core/enum_names.h"

namespace moesim {
namespace {

constexpr EnumNames<Recompute, 3> kRecompute{
    {{Recompute::kNone, "none"}, {Recompute::kSelective, "selective"}, {Recompute::kFull, "full"}}};
constexpr EnumNames<AttentionKernel, 2> kAttentionKernels{
    {{AttentionKernel::kFlash, "flash"}, {AttentionKernel::kUnfused, "unfused"}}};
constexpr EnumNames<Fp8Recipe, 2> kFp8Recipes{{{Fp8Recipe::kCurrent, "current"}, {Fp8Recipe::kDelayed, "delayed"}}};
constexpr EnumNames<TokenDispatcher, 2> kTokenDispatchers{
    {{TokenDispatcher::kAllToAll, "alltoall"}, {TokenDispatcher::kDeepEp, "deepep"}}};

}  // namespace

std::string_view to_string(Recompute r) { return name_of(kRecompute, r); }
std::optional<Recompute> parse_recompute(std::string_view s) { return parse_from(kRecompute, s); }
std::vector<std::string> recompute_names() { return names_of(kRecompute); }

namespace {
constexpr const char* kModuleNames[] = {"core_attn", "layernorm", "moe_act", "mla_up_proj", "mlp", "moe", "shared_experts"};
bool* module_flag(RecomputeModules& m, std::string_view name) {
  if (name == "core_attn") return &m.core_attn;
  if (name == "layernorm") return &m.layernorm;
  if (name == "moe_act") return &m.moe_act;
  if (name == "mla_up_proj") return &m.mla_up_proj;
  if (name == "mlp") return &m.mlp;
  if (name == "moe") return &m.moe;
  if (name == "shared_experts") return &m.shared_experts;
  return nullptr;
}
}  // namespace

std::optional<RecomputeModules> parse_recompute_modules(std::string_view list, std::string& error) {
  RecomputeModules out{};
  out.core_attn = false;
  if (list.empty()) {
    error = "an empty list";
    return std::nullopt;
  }
  for (std::size_t from = 0;;) {
    const std::size_t comma = list.find(',', from);
    const std::string_view name = list.substr(from, comma == std::string_view::npos ? std::string_view::npos : comma - from);
    bool* flag = module_flag(out, name);
    if (flag == nullptr) {
      error = name.empty() ? "an empty name" : "'" + std::string(name) + "' is not a module moesim recomputes";
      return std::nullopt;
    }
    if (*flag) {
      error = "'" + std::string(name) + "' named twice";
      return std::nullopt;
    }
    *flag = true;
    if (comma == std::string_view::npos) return out;
    from = comma + 1;
  }
}

std::string to_string(const RecomputeModules& m) {
  std::string out;
  RecomputeModules copy = m;
  for (const char* name : kModuleNames)
    if (*module_flag(copy, name)) out += (out.empty() ? "" : ",") + std::string(name);
  return out;
}

std::vector<std::string> recompute_module_names() { return {std::begin(kModuleNames), std::end(kModuleNames)}; }

std::string_view to_string(AttentionKernel a) { return name_of(kAttentionKernels, a); }
std::optional<AttentionKernel> parse_attention_kernel(std::string_view s) { return parse_from(kAttentionKernels, s); }
std::vector<std::string> attention_kernel_names() { return names_of(kAttentionKernels); }

std::string_view to_string(Fp8Recipe r) { return name_of(kFp8Recipes, r); }
std::optional<Fp8Recipe> parse_fp8_recipe(std::string_view s) { return parse_from(kFp8Recipes, s); }
std::vector<std::string> fp8_recipe_names() { return names_of(kFp8Recipes); }

std::string_view to_string(TokenDispatcher d) { return name_of(kTokenDispatchers, d); }
std::optional<TokenDispatcher> parse_token_dispatcher(std::string_view s) { return parse_from(kTokenDispatchers, s); }
std::vector<std::string> token_dispatcher_names() { return names_of(kTokenDispatchers); }

std::string host_launch_phrase(std::int64_t launch_ns) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "host launches %g us each", static_cast<double>(launch_ns) * 1e-3);
  return buf;
}

}  // namespace moesim
