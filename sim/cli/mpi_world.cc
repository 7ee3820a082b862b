#include "sim/cli/mpi_world.h"

#include <cstring>
#include <utility>

#include "sim/core/error.h"
#include "sim/search/thread_pool.h"

namespace moesim::cli {

World::World() : group_(runtime::launched_process_group()) {}
World::~World() = default;

int World::rank() const { return group_ ? group_->rank() : 0; }
int World::size() const { return group_ ? group_->size() : 1; }

bool World::agree(const std::string& error) const { return runtime::agree_on_input(group_.get(), error); }

std::vector<std::size_t> World::my_share(std::size_t total) const {
  std::vector<std::size_t> mine;
  for (std::size_t i = static_cast<std::size_t>(rank()); i < total; i += static_cast<std::size_t>(size())) {
    mine.push_back(i);
  }
  return mine;
}

std::vector<std::int64_t> World::join(const std::vector<std::int64_t>& mine, std::size_t total, std::size_t fields,
                                      bool everywhere) const {
  if (size() == 1) return mine;
  std::vector<std::byte> bytes(mine.size() * sizeof(std::int64_t));
  if (!bytes.empty()) std::memcpy(bytes.data(), mine.data(), bytes.size());
  const std::vector<std::vector<std::byte>> parts = group_->gather(bytes, 0);
  std::vector<std::int64_t> all(total * fields);
  const auto ranks = static_cast<std::size_t>(size());
  for (std::size_t r = 0; r < parts.size(); ++r) {
    std::vector<std::int64_t> f(parts[r].size() / sizeof(std::int64_t));
    if (!f.empty()) std::memcpy(f.data(), parts[r].data(), parts[r].size());
    for (std::size_t k = 0; (k + 1) * fields <= f.size(); ++k) {
      std::memcpy(&all[(r + k * ranks) * fields], &f[k * fields], fields * sizeof(std::int64_t));
    }
  }
  if (!everywhere) return rank() == 0 ? all : std::vector<std::int64_t>{};
  // Every rank knows the size, so rank 0's assembled fields go out as one fixed-size broadcast.
  if (!all.empty()) group_->broadcast(all.data(), static_cast<std::int64_t>(all.size() * sizeof(std::int64_t)), 0);
  return all;
}

std::vector<std::int64_t> evaluate_everywhere(const World& world, std::size_t count, std::size_t fields, int jobs,
                                              const std::function<void(std::size_t, std::int64_t*)>& evaluate) {
  const std::vector<std::size_t> share = world.my_share(count);
  std::vector<std::int64_t> mine(share.size() * fields);
  std::string error;
  try {
    search::parallel_for(share.size(), jobs, [&](std::size_t i) { evaluate(share[i], &mine[i * fields]); });
  } catch (const InputError& e) {
    error = e.what();
  }
  if (!world.agree(error)) throw QuietExit{};
  return world.join(mine, count, fields, true);
}

}  // namespace moesim::cli
