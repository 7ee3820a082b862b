#include "sim/graph/operand_check.h"

#include <cstdint>
#include <map>
#include <optional>

#include "sim/core/error.h"
#include "sim/graph/graph_algorithms.h"

namespace moesim {
namespace {

// ancestors[t] has bit a set when a path leads from a to t.
class Reachability {
 public:
  explicit Reachability(const TaskGraph& g) : words_((g.num_tasks() + 63) / 64), bits_(g.num_tasks() * words_, 0) {
    for (TaskIndex t : topological_order(g)) {
      std::uint64_t* row = &bits_[t * words_];
      for (TaskIndex p : g.predecessors(t)) {
        const std::uint64_t* from = &bits_[p * words_];
        for (std::size_t w = 0; w < words_; ++w) row[w] |= from[w];
        row[p / 64] |= std::uint64_t{1} << (p % 64);
      }
    }
  }
  bool reaches(TaskIndex from, TaskIndex to) const {
    return (bits_[to * words_ + from / 64] >> (from % 64)) & 1U;
  }
  bool ordered(TaskIndex a, TaskIndex b) const { return reaches(a, b) || reaches(b, a); }

 private:
  std::size_t words_;
  std::vector<std::uint64_t> bits_;
};

struct Access {
  TaskIndex task;
  Operand operand;
  bool write;
};

std::string range(const Operand& o) {
  return "[" + std::to_string(o.offset) + ", +" + std::to_string(o.bytes) + ")";
}

}  // namespace

std::vector<std::string> operand_violations(const TaskGraph& g, std::size_t limit) {
  if (limit == 0) throw InternalError("operand_violations: a limit of 0 would report nothing");
  if (g.num_tasks() > kMaxOperandCheckTasks)
    throw InputError("the operand check holds num_tasks^2 bits: " + std::to_string(g.num_tasks()) +
                     " tasks is above its limit of " + std::to_string(kMaxOperandCheckTasks));
  const Reachability reach(g);
  std::vector<std::optional<TaskIndex>> allocator(g.num_buffers()), freer(g.num_buffers());
  std::map<BufferId, std::vector<Access>> by_buffer;
  for (TaskIndex t = 0; t < g.num_tasks(); ++t) {
    const Task& task = g.task(t);
    for (BufferId b : task.allocates) allocator[b] = t;
    for (BufferId b : task.frees) freer[b] = t;
    for (const Operand& o : task.reads) by_buffer[o.buffer].push_back({t, o, false});
    for (const Operand& o : task.writes) by_buffer[o.buffer].push_back({t, o, true});
  }
  std::vector<std::string> out;
  const auto report = [&](std::string line) {
    if (out.size() < limit) out.push_back(std::move(line));
  };
  for (const auto& [b, accesses] : by_buffer) {
    if (out.size() >= limit) break;
    const std::string name = "'" + g.buffer(b).name + "'";
    for (const Access& x : accesses) {
      const std::string who = task_label(g, x.task) + (x.write ? " writes " : " reads ") + name + " " +
                              range(x.operand);
      if (allocator[b] && *allocator[b] != x.task && !reach.reaches(*allocator[b], x.task))
        report(who + ", which no path orders after its allocation by " + task_label(g, *allocator[b]));
      if (freer[b] && *freer[b] != x.task && !reach.reaches(x.task, *freer[b]))
        report(who + ", which no path orders before its release by " + task_label(g, *freer[b]));
    }
    for (std::size_t i = 0; i < accesses.size(); ++i)
      for (std::size_t j = i + 1; j < accesses.size(); ++j) {
        const Access& x = accesses[i];
        const Access& y = accesses[j];
        const bool overlap = x.operand.offset < y.operand.offset + y.operand.bytes &&
                             y.operand.offset < x.operand.offset + x.operand.bytes;
        if (x.task == y.task || !(x.write || y.write) || !overlap || reach.ordered(x.task, y.task)) continue;
        report(task_label(g, x.task) + (x.write ? " writes " : " reads ") + name + " " + range(x.operand) +
               " and " + task_label(g, y.task) + (y.write ? " writes " : " reads ") + range(y.operand) +
               ", and no path orders them");
      }
  }
  return out;
}

}  // namespace moesim
