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

}  // namespace

std::string_view to_string(Recompute r) { return name_of(kRecompute, r); }
std::optional<Recompute> parse_recompute(std::string_view s) { return parse_from(kRecompute, s); }
std::vector<std::string> recompute_names() { return names_of(kRecompute); }

std::string_view to_string(AttentionKernel a) { return name_of(kAttentionKernels, a); }
std::optional<AttentionKernel> parse_attention_kernel(std::string_view s) { return parse_from(kAttentionKernels, s); }
std::vector<std::string> attention_kernel_names() { return names_of(kAttentionKernels); }

std::string_view to_string(Fp8Recipe r) { return name_of(kFp8Recipes, r); }
std::optional<Fp8Recipe> parse_fp8_recipe(std::string_view s) { return parse_from(kFp8Recipes, s); }
std::vector<std::string> fp8_recipe_names() { return names_of(kFp8Recipes); }

std::string host_launch_phrase(std::int64_t launch_ns) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "host launches %g us each", static_cast<double>(launch_ns) * 1e-3);
  return buf;
}

}  // namespace moesim
