// The processes of one `moesim sweep` or `moesim plan` started by mpirun/srun (one process alone
// otherwise), and the few collectives those commands need to share independent simulations.
//
// The work is split round-robin: rank r evaluates items r, r + size, ... on its own threads.
// Results travel as 64-bit fields (doubles as their bit patterns), so what every rank gathers is
// exactly what one process computes, and the outputs are byte-identical at any rank count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/comm/process_group.h"

namespace moesim::cli {

// Thrown on a process that must stop without a word because another process reported the
// failure (see World::agree); main() turns it into exit 0 (the reporter exits 2, and so does the job).
struct QuietExit {};

class World {
 public:
  World();
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int rank() const;
  int size() const;

  // After every process checked the same input (`error` empty when this one passed): true when all
  // passed; otherwise rank 0 throws InputError with its reason (or a failing rank with its rank
  // named), and the quiet processes return false.
  bool agree(const std::string& error) const;

  // The indices this process evaluates out of `total`: rank, rank + size, ...
  std::vector<std::size_t> my_share(std::size_t total) const;

  // Joins every rank's fields (kFields per item, items in my_share order) into grid order:
  // `total` items of `fields` each. With `everywhere` every rank gets the result, otherwise only
  // rank 0 (the others get an empty vector).
  std::vector<std::int64_t> join(const std::vector<std::int64_t>& mine, std::size_t total, std::size_t fields,
                                 bool everywhere) const;

 private:
  std::unique_ptr<runtime::ProcessGroup> group_;
};

// Evaluates `count` items on this process's share, `jobs` threads, and joins the fields on every
// rank. An InputError on any rank is reported once (agree); quiet ranks throw QuietExit.
// to_fields writes one item's `fields` integers; the result is count x fields in index order.
std::vector<std::int64_t> evaluate_everywhere(const World& world, std::size_t count, std::size_t fields, int jobs,
                                              const std::function<void(std::size_t, std::int64_t*)>& evaluate);

}  // namespace moesim::cli
