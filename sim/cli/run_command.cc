#include "sim/cli/run_command.h"

#include <iostream>

#include "sim/cli/output_file.h"
#include "sim/core/error.h"
#include "sim/graph/moe_layer_builder.h"
#include "sim/spec/loader.h"
#include "sim/spec/yaml_reader.h"

#if MOESIM_HAVE_CUDA
#include "runtime/exec/cuda_device.h"
#include "runtime/exec/measure.h"
#endif

namespace moesim::cli {

namespace {

// --dtype sets the storage type and the GEMMs' math: tf32 is fp32 storage with TF32 GEMMs.
void apply_dtype(ModelSpec& model, const std::string& name) {
  if (name.empty()) return;
  const auto d = parse_dtype(name);
  if (!d) throw InputError("--dtype '" + name + "' is not a dtype; valid: " + YamlValue::join_names(dtype_names()));
  model.dtype = *d == DType::kTf32 ? DType::kFp32 : *d;
  model.gemm_dtype = *d;
}

}  // namespace

int run_measure(const RunArgs& a, const std::string& version) {
  if (a.model_path.empty()) throw InputError("--model is required");
  if (a.hardware_path.empty()) throw InputError("--hardware is required");
  if (a.tokens <= 0) throw InputError("--tokens is required and must be positive");
  if (a.chunks < 1) throw InputError("--chunks must be at least 1, got " + std::to_string(a.chunks));
  if (a.slots != 1 && a.slots != 2) throw InputError("--slots must be 1 or 2, got " + std::to_string(a.slots));
  ModelSpec model = load_model_spec(a.model_path);
  apply_dtype(model, a.dtype);
  const ClusterSpec cluster = load_hardware_spec(a.hardware_path);
  RunSpec run;
  run.tokens_per_gpu = a.tokens;
  run.num_chunks = a.chunks;
  run.slots = a.slots;
  run.seed = a.seed;
  run.ep_size = a.ranks;
  const auto strategy = parse_memory_strategy(a.strategy);
  if (!strategy)
    throw InputError("--strategy '" + a.strategy + "' is not a memory strategy; valid: " +
                     YamlValue::join_names(memory_strategy_names()));
  run.strategy = *strategy;
  const auto order = parse_order_policy(a.order);
  if (!order)
    throw InputError("--order '" + a.order + "' is not an ordering policy; valid: " +
                     YamlValue::join_names(order_policy_names()));
  run.order = *order;
  derive_layer_dims(model, cluster, run);  // every size checked before any device is touched
#if MOESIM_HAVE_CUDA
  runtime::MeasureRequest req{model, cluster, run, a.ranks, a.loopback, a.iters, a.warmup, a.check, version};
  const auto provider = runtime::make_cuda_provider();
  const runtime::MeasureResult result = runtime::measure(req, *provider);
  std::cout << result.summary;
  if (!a.json_path.empty()) write_output(a.json_path, result.json);
  if (!a.trace_path.empty()) write_output(a.trace_path, result.trace);
  return result.check_passed ? 0 : 3;
#else
  (void)version;
  throw InputError(
      "this build of moesim has no GPU runtime (it was configured without CUDA: MOESIM_WITH_CUDA=OFF or no nvcc "
      "found), so `moesim run` cannot measure; `moesim simulate` predicts the same step");
#endif
}

}  // namespace moesim::cli
