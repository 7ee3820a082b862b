#include "sim/graph/trace.h"

#include <algorithm>

namespace moesim {

TimeNs Trace::makespan_ns() const {
  TimeNs end = 0;
  for (const TaskRecord& r : records) end = std::max(end, r.end_ns);
  return end;
}

}  // namespace moesim
