// `moesim validate published`, `steps`, `layers` and `calibration`.
//
// `moesim validate published`: every published measurement under validate/data/ (validate/published.h)
// replayed on moesim's models, per point and per dataset, with the accuracy goals and whether each
// dataset meets them (docs/validation.md). Goals not met are results, not errors: the exit code is 0.
#pragma once

#include "sim/cli/run_option_flags.h"

#include <string>
#include <vector>

namespace moesim::cli {

struct ValidatePublishedArgs {
  std::string data_dir;  // "" = validate/data here, else the one beside the presets
  std::string csv_path;  // one row per point ("-" for stdout)
  std::string network = "auto";
};

int run_validate_published(const ValidatePublishedArgs& args);

// `moesim validate steps`: the published whole training steps (validate/step_data.h) simulated row
// by row, each measured next to simulated, and issue 23's goals per dataset (docs/validation.md).
// Progress, one line per row with its wall-clock time, goes to stderr: the 1T rows take ~30 s each.
struct ValidateStepsArgs {
  std::string data_dir;  // "" = validate/data here, else the one beside the presets
  std::string csv_path;  // one row per dataset row ("-" for stdout)
  // alpha-beta by default: on these steps the flow model moved the step time by under 1% (GPT-175B
  // on 64 GPUs, GPT-39B on 512: docs/validation.md) for 1.6 times the simulation time.
  std::string network = "alpha-beta";
  std::string only;      // DATASET[:LINE|:MODEL],...
  StepOptionFlags step;  // --host-launch-us for every row (sim/spec/step_options.h); not given: no host
};

int run_validate_steps(const ValidateStepsArgs& args);

// `moesim validate layers`: the published per-layer times (a step dataset's layer_times,
// validate/layer_replay.h), each row's whole step simulated and one layer's passes measured in it.
struct ValidateLayersArgs {
  std::string data_dir;  // "" = validate/data here, else the one beside the presets
  std::string network = "alpha-beta";
};

int run_validate_layers(const ValidateLayersArgs& args);

// `moesim validate calibration`: a calibration file's measured GEMM times against the datasheet
// shape model of a node with the same GPU (validate/calibration_replay.h).
struct ValidateCalibrationArgs {
  std::string calibration_path;
  std::string hardware_path;  // a node (or cluster, or GPU) without a calibration of its own
  std::string csv_path;       // one row per point ("-" for stdout)
};

int run_validate_calibration(const ValidateCalibrationArgs& args);

// `moesim validate interference`: GEMMs measured beside a communication kernel
// (moesim_sm_share_probe's output files) against a node's interference model.
struct ValidateInterferenceArgs {
  std::string hardware_path;             // a node (or cluster) with a GEMM-size table
  std::vector<std::string> probe_paths;  // moesim_sm_share_probe --shapes / --waves / --batched output
  std::string csv_path;                  // one row per shape ("-" for stdout)
};

int run_validate_interference(const ValidateInterferenceArgs& args);

}  // namespace moesim::cli
