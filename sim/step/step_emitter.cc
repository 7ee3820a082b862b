#include "sim/step/step_emitter.h"

#include <memory>
#include <utility>

#include "sim/core/error.h"

namespace moesim {

std::string StepEmitter::id_of(const Chain& chain, const TaskName& name) const {
  std::string id = chain.microbatch >= 0 ? "mb" + std::to_string(chain.microbatch) + "." : std::string();
  id += name.where;
  id += '.';
  id += to_string(name.pass);
  id += '.';
  id += name.name;
  return id;
}

TaskIndex StepEmitter::append(Chain& chain, Task task, bool side) {
  const TaskIndex index = g_.add_task(std::move(task));
  if (chain.last) g_.add_dependency(*chain.last, index);
  if (!side) chain.last = index;
  return index;
}

TaskIndex StepEmitter::kernel(Chain& chain, const TaskName& name, const Work& work, bool side) {
  Task t;
  t.id = id_of(chain, name);
  t.rank = shape_.stage_rank(chain.stage);
  t.stream = StreamClass::kCompute;
  t.work = work;
  t.op = op_for(work, name.kernel);
  t.layer = name.layer;
  t.pass = name.pass;
  t.stage = name.stage;
  t.chunk = chain.microbatch;
  t.allocates = name.allocates;
  t.frees = name.frees;
  return append(chain, std::move(t), side);
}

TaskIndex StepEmitter::copy(Chain& chain, const TaskName& name, const CopyWork& work) {
  Task t;
  t.id = id_of(chain, name);
  t.rank = shape_.stage_rank(chain.stage);
  t.stream = work.direction == CopyDirection::kHostToDevice ? StreamClass::kCopyH2D : StreamClass::kCopyD2H;
  t.work = work;
  t.layer = name.layer;
  t.pass = name.pass;
  t.stage = name.stage;
  t.chunk = chain.microbatch;
  return append(chain, std::move(t), false);
}

std::optional<TaskIndex> StepEmitter::collective(Chain& chain, const TaskName& name, StreamClass stream,
                                                 CollectiveOp op, const std::vector<int>& group,
                                                 std::int64_t bytes_per_peer, bool side) {
  if (group.size() <= 1) return chain.last;
  Task t;
  t.id = id_of(chain, name);
  t.rank = -1;
  t.stream = stream;
  t.work = CollectiveWork(op, g_.add_group(group), bytes_per_peer);
  t.op = op_for(t.work);
  t.layer = name.layer;
  t.pass = name.pass;
  t.stage = name.stage;
  t.chunk = chain.microbatch;
  t.allocates = name.allocates;
  t.frees = name.frees;
  return append(chain, std::move(t), side);
}

std::optional<TaskIndex> StepEmitter::group_collective(Chain& chain, const TaskName& name, StreamClass stream,
                                                       CollectiveOp op, const std::vector<int>& group,
                                                       std::int64_t whole_bytes, bool side) {
  if (group.size() <= 1) return chain.last;
  return collective(chain, name, stream, op, group, whole_bytes / static_cast<std::int64_t>(group.size()), side);
}

TaskIndex StepEmitter::sends(Chain& chain, const TaskName& name, StreamClass stream, const std::vector<int>& group,
                             const std::vector<std::pair<int, int>>& pairs, std::int64_t bytes) {
  const auto size = static_cast<int>(group.size());
  auto rows = std::make_shared<std::vector<std::int64_t>>(static_cast<std::size_t>(size * size), 0);
  for (const auto& [from, to] : pairs) (*rows)[static_cast<std::size_t>(from * size + to)] = 1;
  auto traffic = std::make_shared<TrafficMatrix>();
  traffic->size = size;
  traffic->row_bytes = bytes;
  traffic->rows = std::move(rows);
  return all_to_allv_task(chain, name, stream, group, std::move(traffic), false, Op::kSendRecv);
}

std::optional<TaskIndex> StepEmitter::all_to_allv(Chain& chain, const TaskName& name, StreamClass stream,
                                                  const std::vector<int>& group,
                                                  std::shared_ptr<const TrafficMatrix> traffic, bool transposed) {
  if (group.size() <= 1) return chain.last;
  MOESIM_CHECK(traffic && traffic->size == static_cast<int>(group.size()), "all-to-allv traffic of another group");
  return all_to_allv_task(chain, name, stream, group, std::move(traffic), transposed, Op::kAllToAllV);
}

TaskIndex StepEmitter::all_to_allv_task(Chain& chain, const TaskName& name, StreamClass stream,
                                        const std::vector<int>& group, std::shared_ptr<const TrafficMatrix> traffic,
                                        bool transposed, Op op) {
  Task t;
  t.id = id_of(chain, name);
  t.rank = -1;
  t.stream = stream;
  CollectiveWork w(CollectiveOp::kAllToAll, g_.add_group(group), 0);
  w.traffic = std::move(traffic);
  w.transposed = transposed;
  t.work = std::move(w);
  t.op = op;
  t.layer = name.layer;
  t.pass = name.pass;
  t.stage = name.stage;
  t.chunk = chain.microbatch;
  return append(chain, std::move(t), false);
}

BufferId StepEmitter::buffer(int stage, const std::string& name, std::int64_t bytes, MemoryCategory category,
                             bool resident) {
  Buffer b;
  b.name = name;
  b.rank = shape_.stage_rank(stage);
  b.bytes = bytes;
  b.category = category;
  b.resident = resident;
  return g_.add_buffer(std::move(b));
}

GemmWork StepEmitter::gemm(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
                           GemmLayout layout) const {
  GemmWork w;
  w.layout = layout;
  w.batch = batch;
  w.m = m;
  w.n = n;
  w.k = k;
  w.dtype = shape_.gemm_dtype;
  w.element_bytes = shape_.element_bytes;
  return w;
}

GemmWork StepEmitter::storage_gemm(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k) const {
  GemmWork w = gemm(batch, m, n, k);
  if (fp8()) w.dtype = shape_.storage_dtype;  // bf16 or fp16: --precision fp8 requires one
  return w;
}

ElementwiseWork StepEmitter::fp8_cast(std::int64_t elems) const {
  ElementwiseWork w;
  w.bytes_read = elems * shape_.element_bytes;
  w.bytes_written = 2 * elems;  // one byte per value, row-wise and column-wise
  w.flops = elems;
  return w;
}

std::optional<TaskIndex> StepEmitter::amax_all_reduce(Chain& chain, const TaskName& name, const std::vector<int>& group,
                                                      std::int64_t whole_bytes) {
  const auto n = static_cast<std::int64_t>(group.size());
  return collective(chain, name, StreamClass::kCommDispatch, CollectiveOp::kAllReduce, group, (whole_bytes + n - 1) / n);
}

TaskIndex StepEmitter::fp8_quantize(Chain& chain, const TaskName& name, std::int64_t elems, const Fp8Amax& amax) {
  if (shape_.fp8_recipe == Fp8Recipe::kCurrent) {
    constexpr std::int64_t kFp32 = 4;  // the amax and the scale: one fp32 each
    TaskName step{name.where, name.layer, name.pass, name.name + ".amax", name.stage};
    if (!amax.fused) {
      ElementwiseWork pass;
      pass.bytes_read = elems * shape_.element_bytes;
      pass.bytes_written = kFp32;
      pass.flops = elems;
      kernel(chain, step, pass);
    }
    if (!amax.reduce_over.empty()) {
      step.name = name.name + ".amax.allreduce";
      amax_all_reduce(chain, step, amax.reduce_over, kFp32);
    }
    step.name = name.name + ".scale";
    ElementwiseWork scale;
    scale.bytes_read = kFp32;
    scale.bytes_written = kFp32;
    scale.flops = 1;
    kernel(chain, step, scale);
  }
  return kernel(chain, name, fp8_cast(elems));
}

std::optional<TaskIndex> StepEmitter::fp8_weight_cast(Chain& chain, TaskName name, std::int64_t elems) {
  if (!fp8_weights_cached_.emplace(chain.stage, name.where + "." + name.name).second) return std::nullopt;
  name.allocates = {buffer(chain.stage, name.where + "." + name.name + ".fp8_weights", 2 * elems,
                           MemoryCategory::kTemporary)};
  name.name += ".fp8.weight";
  return fp8_quantize(chain, name, elems);
}

ElementwiseWork StepEmitter::elementwise(std::int64_t read_elems, std::int64_t written_elems,
                                         std::int64_t mask_elems) const {
  ElementwiseWork w;
  w.bytes_read = read_elems * shape_.element_bytes;
  w.bytes_written = written_elems * shape_.element_bytes + mask_elems;
  w.flops = read_elems;
  return w;
}

}  // namespace moesim
