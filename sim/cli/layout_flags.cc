#include "sim/cli/layout_flags.h"

#include "sim/core/error.h"

namespace moesim::cli {

void check_no_dtd_flag(bool no_dtd_given, int max_tp) {
  if (no_dtd_given && max_tp == 1)
    throw InputError("--no-dtd turns off duplicate token dropping, which only exists with --tp > 1");
}

}  // namespace moesim::cli
