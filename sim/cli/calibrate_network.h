// Pieces shared by `moesim calibrate`'s ways of writing a calibration file (calibrate_command.cc:
// a GPU, --alltoall-log, --collectives; calibrate_allreduce.cc: --allreduce-log).
#pragma once

#include <string>
#include <vector>

#include "sim/cli/calibrate_command.h"
#include "sim/spec/hardware_spec.h"
#include "sim/spec/nccl_tests_log.h"

namespace moesim::cli {

std::string utc_now();

// Writes `text` as `out_path` only once it loads back and applies to `node`; otherwise keeps it as
// FILE.rejected and throws: an InternalError for what this process measured (a disturbed GPU),
// an InputError naming `input` for values fitted to a user's input (a log off the plausible ranges).
void write_checked_calibration(const std::string& out_path, const std::string& text, NodeSpec node,
                               const std::string& input = "");

// The GPUs the log's ranks name must be the preset's (gpu_identity.h), unless --force: then a note.
void check_logged_gpu(const NcclTestsLog& log, const std::string& preset_gpu, bool force,
                      std::vector<std::string>& notes);

// A file's whole text, ending in a newline (--base, which the fitted sections are appended to).
std::string whole_text(const std::string& path);

// The header of a network calibration written without --base: `name` is the node's or the
// cluster's, `source` where the measurement came from.
std::string network_calibration_header(const std::string& name, const std::string& gpu, const std::string& source,
                                       const std::string& version, const std::string& command_line);

// --allreduce-log (calibrate_allreduce.cc).
int run_allreduce_calibration(const CalibrateArgs& a, const std::string& version);

}  // namespace moesim::cli
