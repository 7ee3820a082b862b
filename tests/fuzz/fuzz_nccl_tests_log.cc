// libFuzzer target over the nccl-tests log parser (sim/spec/nccl_tests_log.h). An InputError is its
// answer to bad input; anything else that escapes, a crash, a sanitizer report, a hang, an
// unbounded allocation, or a parsed log that breaks the header's promises is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/core/error.h"
#include "sim/spec/nccl_tests_log.h"
#include "fuzz_check.h"

namespace {

using namespace moesim;

// What nccl_tests_log.h promises of a log it returns.
void check_log(const NcclTestsLog& log) {
  FUZZ_CHECK(log.ranks == static_cast<int>(log.placement.size()));
  for (std::size_t i = 1; i < log.placement.size(); ++i)
    FUZZ_CHECK(log.placement[i - 1].rank < log.placement[i].rank);  // one per rank, ordered
  for (const NcclTestsRow& row : log.rows) {
    FUZZ_CHECK(row.size_bytes > 0);
    FUZZ_CHECK(row.time_us >= 0.01 && row.time_us <= 1e9);
    FUZZ_CHECK(row.line >= 1);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  NcclTestsLog log;
  try {
    log = parse_nccl_tests_text(std::string(reinterpret_cast<const char*>(data), size), "fuzz-input.log");
  } catch (const InputError&) {
    return 0;  // rejected with a message: what bad input must get
  }
  check_log(log);
  return 0;
}
