#include "sim/cli/run_command.h"

#include <iostream>
#include <optional>

#include "runtime/comm/process_group.h"
#include "runtime/exec/gpu_compat.h"
#include "sim/cli/output_file.h"
#include "sim/core/error.h"
#include "sim/build/moe_graph.h"
#include "sim/spec/loader.h"
#include "sim/spec/yaml_reader.h"

#if MOESIM_HAVE_CUDA
#include "runtime/exec/cuda_device.h"
#include "runtime/exec/measure.h"
#include "validate/measured_run.h"
#endif

namespace moesim::cli {

namespace {

// --dtype sets the storage type and the GEMMs' math: tf32 is fp32 storage with TF32 GEMMs.
void apply_dtype(ModelSpec& model, const std::string& name) {
  if (name.empty()) return;
  const auto d = parse_dtype(name);
  if (!d) throw InputError("--dtype '" + name + "' is not a dtype; valid: " + YamlValue::join_names(dtype_names()));
  if (*d == DType::kFp8)
    throw InputError("--dtype fp8: the GPU runtime has no FP8 GEMMs (moesim simulate predicts a model with "
                     "gemm_precision: fp8; moesim run measures fp32, tf32, bf16 and fp16)");
  model.dtype = *d == DType::kTf32 ? DType::kFp32 : *d;
  model.gemm_dtype = *d;
}

// What `moesim run` takes from the command line and the spec files, checked.
struct RunInputs {
  ModelSpec model;
  ClusterSpec cluster;
  RunSpec run;
};

RunInputs read_inputs(const RunArgs& a) {
  if (a.model_path.empty()) throw InputError("--model is required");
  if (a.hardware_path.empty()) throw InputError("--hardware is required");
  RunInputs in{load_model_spec(a.model_path), load_hardware_spec(a.hardware_path, a.calibration_path), RunSpec{}};
  apply_dtype(in.model, a.dtype);
  if (!a.options.given_key("tokens_per_gpu")) throw InputError("--tokens is required");
  a.options.apply(in.run);
  in.run.ep_size = a.ranks;
  // Every size checked before any device is touched, on the hardware the ranks will run on.
  runtime::check_equal_chunks(derive_layer_dims(in.model, run_hardware(in.cluster, a.ranks, a.loopback), in.run));
  return in;
}

}  // namespace

int run_measure(const RunArgs& a, const std::string& version) {
  // Under mpirun every process is one rank; an error is then reported once (agree_on_input). The
  // rank count comes from the launcher there, so the sizes are checked for the group's size.
  const auto group = runtime::launched_process_group();
  std::optional<RunInputs> in;
  std::string error;
  try {
    RunArgs args = a;
    if (group != nullptr && args.ranks == 1) args.ranks = group->size();
    in = read_inputs(args);  // bad input is named as such first, on builds without CUDA too
    // Only the reporting process (rank 0) writes the files, so only its paths must be writable.
    if (group == nullptr || group->rank() == 0) check_outputs({{"--json", a.json_path}, {"--trace", a.trace_path}});
#if !MOESIM_HAVE_CUDA
    throw InputError(
        "this build of moesim has no GPU runtime (it was configured without CUDA: MOESIM_WITH_CUDA=OFF or no nvcc "
        "found), so `moesim run` cannot measure; `moesim simulate` predicts the same step");
#endif
  } catch (const InputError& e) {
    if (group == nullptr) throw;
    error = e.what();
  }
  // Quiet processes exit 0 (see runtime::agree_on_input): the reporting one exits 2, and so does the job.
  if (!runtime::agree_on_input(group.get(), error)) return 0;
#if MOESIM_HAVE_CUDA
  runtime::MeasureRequest req{in->model, in->cluster, in->run, a.ranks, a.loopback, a.iters, a.warmup, a.check, version};
  req.processes = group.get();
  const auto provider = runtime::make_cuda_provider();
  const runtime::MeasuredRun measured = runtime::measure(req, *provider, validate::SimulatorRunGraphs{});
  if (measured.reports) {
    const validate::MeasuredReport report = validate::report_measured_run(req, measured);
    std::cout << report.summary;
    if (!a.json_path.empty()) write_output("--json", a.json_path, report.json);
    if (!a.trace_path.empty()) write_output("--trace", a.trace_path, report.trace);
  }
  return measured.exit_code;
#else
  (void)version;
  return 2;  // not reached: without the GPU runtime agree_on_input has thrown or said no
#endif
}

}  // namespace moesim::cli
