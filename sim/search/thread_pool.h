// Running independent evaluations (simulations of a sweep or a plan) on all cores.
//
// parallel_for(count, jobs, body) runs body(i) for every i in [0, count) on `jobs` threads, each
// taking the next unclaimed index; results must be written by index, so the outcome does not depend
// on the number of threads or on their timing (sweeps are byte-identical with --jobs 1 and 2).
// The failure of the lowest failing index that ran is rethrown on the caller's thread after all
// threads stopped; remaining indices are not started once one failed. `progress(done)` is called after every
// finished index, serialised, with done counting up to count.
#pragma once

#include <cstddef>
#include <functional>

namespace moesim::search {

// The number of hardware threads (at least 1); the default for --jobs.
int default_jobs();

void parallel_for(std::size_t count, int jobs, const std::function<void(std::size_t)>& body,
                  const std::function<void(std::size_t done)>& progress = {});

}  // namespace moesim::search
