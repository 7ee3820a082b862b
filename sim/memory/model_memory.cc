#include "sim/memory/model_memory.h"

#include <limits>
#include <map>
#include <string>

#include "sim/core/error.h"

namespace moesim {
namespace {

constexpr TaskIndex kNoTask = std::numeric_limits<TaskIndex>::max();

struct PerRank {
  std::int64_t resident = 0;
  std::int64_t kept = 0;
};

std::int64_t checked_add(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) throw InternalError("model memory: a byte count leaves 64 bits");
  return out;
}

// Resident device bytes and the lowest simulated layer's kept bytes, per rank.
std::map<int, PerRank> per_rank_bytes(const TaskGraph& graph, int lowest_layer) {
  std::vector<TaskIndex> allocated_by(graph.num_buffers(), kNoTask);
  std::vector<TaskIndex> freed_by(graph.num_buffers(), kNoTask);
  for (TaskIndex i = 0; i < graph.num_tasks(); ++i) {
    for (BufferId b : graph.task(i).allocates) allocated_by[b] = i;
    for (BufferId b : graph.task(i).frees) freed_by[b] = i;
  }
  std::map<int, PerRank> out;
  for (BufferId b = 0; b < graph.num_buffers(); ++b) {
    const Buffer& buf = graph.buffer(b);
    if (buf.on_host()) continue;  // pinned host memory is not the GPU's
    PerRank& r = out[buf.rank];
    if (buf.resident) {
      r.resident = checked_add(r.resident, buf.bytes);
      continue;
    }
    if (allocated_by[b] == kNoTask || freed_by[b] == kNoTask) continue;
    const Task& alloc = graph.task(allocated_by[b]);
    const Task& release = graph.task(freed_by[b]);
    if (alloc.pass == Pass::kForward && release.pass == Pass::kBackward && release.layer == lowest_layer)
      r.kept = checked_add(r.kept, buf.bytes);
  }
  return out;
}

std::int64_t checked_mul(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) throw InternalError("model memory: a byte count leaves 64 bits");
  return out;
}

std::string too_many_layers(int simulated_layers, int model_layers) {
  return "the run simulates " + std::to_string(simulated_layers) + " MoE layers but the model has num_layers = " +
         std::to_string(model_layers) + "; simulate at most the model's layers";
}

}  // namespace

void check_simulated_layers(const ModelSpec& model, int simulated_layers) {
  if (simulated_layers > model.num_layers)
    throw InputError(model.origin, too_many_layers(simulated_layers, model.num_layers));
}

std::vector<ModelMemory> model_memory(const TaskGraph& graph, const std::vector<RankMemory>& memory,
                                      int model_layers, int simulated_layers) {
  if (simulated_layers < 1) throw InternalError("model memory: no simulated layer");
  if (simulated_layers > model_layers) throw InputError(too_many_layers(simulated_layers, model_layers));
  int lowest = std::numeric_limits<int>::max();
  for (TaskIndex i = 0; i < graph.num_tasks(); ++i) lowest = std::min(lowest, graph.task(i).layer);
  const std::map<int, PerRank> bytes = per_rank_bytes(graph, lowest);
  std::vector<ModelMemory> out;
  out.reserve(memory.size());
  for (const RankMemory& m : memory) {
    ModelMemory mm;
    mm.rank = m.rank;
    mm.model_layers = model_layers;
    mm.simulated_layers = simulated_layers;
    mm.simulated_peak_bytes = m.peak_device_bytes;
    const auto it = bytes.find(m.rank);
    if (it != bytes.end()) {
      if (it->second.resident % simulated_layers != 0)
        throw InternalError("model memory: rank " + std::to_string(m.rank) + "'s resident bytes " +
                            std::to_string(it->second.resident) + " are not the same for each of its " +
                            std::to_string(simulated_layers) + " layers");
      mm.layer_model_state_bytes = it->second.resident / simulated_layers;
      mm.layer_kept_activation_bytes = it->second.kept;
    }
    mm.peak_bytes = checked_add(m.peak_device_bytes, checked_mul(mm.layers_not_simulated(), mm.per_layer_bytes()));
    out.push_back(mm);
  }
  return out;
}

}  // namespace moesim
