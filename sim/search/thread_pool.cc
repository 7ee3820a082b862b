#include "sim/search/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sim/core/error.h"

namespace moesim::search {

int default_jobs() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

void parallel_for(std::size_t count, int jobs, const std::function<void(std::size_t)>& body,
                  const std::function<void(std::size_t)>& progress) {
  if (jobs < 1) throw InputError("--jobs must be at least 1, got " + std::to_string(jobs));
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mutex;  // guards done, error and the progress callback
  std::size_t done = 0;
  std::size_t error_index = count;
  std::exception_ptr error;
  const auto worker = [&] {
    while (!failed.load()) {
      const std::size_t i = next.fetch_add(1);
      if (i >= count) return;
      try {
        body(i);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(mutex);
        if (i < error_index) {
          error_index = i;
          error = std::current_exception();
        }
        failed.store(true);
        return;
      }
      const std::lock_guard<std::mutex> lock(mutex);
      ++done;
      if (progress) progress(done);
    }
  };
  const auto threads = static_cast<std::size_t>(std::min<std::size_t>(static_cast<std::size_t>(jobs), std::max<std::size_t>(count, 1)));
  if (threads <= 1) {
    worker();
  } else {
    std::vector<std::thread> pool;
    pool.reserve(threads);
    for (std::size_t t = 0; t < threads; ++t) pool.emplace_back(worker);
    for (std::thread& t : pool) t.join();
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace moesim::search
