// Buffers: the memory a task graph allocates and frees (design.md section 3).
//
// A task lists the buffers it allocates (at its start) and frees (at its end). Resident buffers
// (parameters, gradients, optimizer states) exist for the whole step and are listed by no task.
// Sizes come from closed-form functions of the specs (sim/memory), so the peak a simulation
// measures can be checked against the MPipeMoE formulas to the byte.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moesim {

using BufferId = std::uint32_t;

enum class MemoryCategory { kModelStates = 0, kActivations = 1, kTemporary = 2, kHostPinned = 3 };
inline constexpr int kNumMemoryCategories = 4;
std::string_view to_string(MemoryCategory c);
std::optional<MemoryCategory> parse_memory_category(std::string_view s);

struct Buffer {
  std::string name;     // stable, e.g. "L0.T_DI.slot1"; unique per rank
  int rank = 0;         // the rank whose memory holds it
  std::int64_t bytes = 0;
  MemoryCategory category = MemoryCategory::kActivations;
  bool resident = false;  // allocated before the step, never freed within it

  bool on_host() const { return category == MemoryCategory::kHostPinned; }
};

}  // namespace moesim
