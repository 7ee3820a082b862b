#include "sim/step/fp8_scaling.h"

namespace moesim {

void fp8_delayed_scaling_update(StepEmitter& e, Chain& chain, const TaskName& name, std::int64_t gemms) {
  if (!e.fp8() || e.shape().fp8_recipe != Fp8Recipe::kDelayed || gemms <= 0) return;
  constexpr std::int64_t kFp32 = 4;
  const std::int64_t per_gemm = name.pass == Pass::kForward ? kFp8ForwardTensorsPerGemm : kFp8BackwardTensorsPerGemm;
  const std::int64_t tensors = gemms * per_gemm;
  TaskName step = name;
  step.name = name.name + ".amax.concat";
  ElementwiseWork concat;
  concat.bytes_read = tensors * kFp32;
  concat.bytes_written = tensors * kFp32;
  e.kernel(chain, step, concat);
  step.name = name.name + ".amax.allreduce";
  e.amax_all_reduce(chain, step, e.shape().stage_group(chain.stage), tensors * kFp32);
  step.name = name.name + ".amax.update";
  ElementwiseWork update;
  update.bytes_read = tensors * (kFp8AmaxHistoryLength + 2) * kFp32;  // reduced amax, history, old scale
  update.bytes_written = tensors * (kFp8AmaxHistoryLength + 1) * kFp32;  // history, scale
  update.flops = tensors * kFp8AmaxHistoryLength;  // the history's maximum
  e.kernel(chain, step, update);
}

}  // namespace moesim
