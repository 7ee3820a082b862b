#include "sim/graph/task.h"

#include "sim/core/checked_math.h"
#include "sim/graph/name_table.h"

namespace moesim {
namespace {

constexpr NameTable<TaskKind, 5> kKinds{{{TaskKind::kGemm, "gemm"},
                                         {TaskKind::kElementwise, "elementwise"},
                                         {TaskKind::kCollective, "collective"},
                                         {TaskKind::kCopy, "copy"},
                                         {TaskKind::kHost, "host"}}};
constexpr NameTable<StreamClass, kNumStreamClasses> kStreams{{{StreamClass::kCompute, "compute"},
                                                              {StreamClass::kCommDispatch, "comm.dispatch"},
                                                              {StreamClass::kCommCombine, "comm.combine"},
                                                              {StreamClass::kCopyD2H, "copy.d2h"},
                                                              {StreamClass::kCopyH2D, "copy.h2d"},
                                                              {StreamClass::kCommGrad, "comm.grad"},
                                                              {StreamClass::kCommPipeline, "comm.pipeline"}}};
constexpr NameTable<Pass, 2> kPasses{{{Pass::kForward, "fwd"}, {Pass::kBackward, "bwd"}}};
constexpr NameTable<CollectiveOp, 4> kOps{{{CollectiveOp::kAllToAll, "all-to-all"},
                                           {CollectiveOp::kAllReduce, "all-reduce"},
                                           {CollectiveOp::kAllGather, "all-gather"},
                                           {CollectiveOp::kReduceScatter, "reduce-scatter"}}};
constexpr NameTable<CopyDirection, 3> kDirections{{{CopyDirection::kDeviceToHost, "d2h"},
                                                   {CopyDirection::kHostToDevice, "h2d"},
                                                   {CopyDirection::kDeviceToDevice, "d2d"}}};

}  // namespace

std::string_view to_string(TaskKind k) { return name_in(kKinds, k); }
std::string_view to_string(StreamClass s) { return name_in(kStreams, s); }
std::optional<StreamClass> parse_stream_class(std::string_view s) { return parse_in(kStreams, s); }
std::string_view to_string(Pass p) { return name_in(kPasses, p); }
std::optional<Pass> parse_pass(std::string_view s) { return parse_in(kPasses, s); }
std::string_view to_string(CollectiveOp op) { return name_in(kOps, op); }
std::optional<CollectiveOp> parse_collective_op(std::string_view s) { return parse_in(kOps, s); }
std::string_view to_string(CopyDirection d) { return name_in(kDirections, d); }
std::optional<CopyDirection> parse_copy_direction(std::string_view s) {
  return parse_in(kDirections, s);
}

std::int64_t GemmWork::flops() const { return checked_mul({2, batch, m, n, k}); }

std::int64_t GemmWork::bytes_moved() const {
  const std::int64_t c = checked_mul(m, n);
  const std::int64_t elems =
      checked_add(checked_add(checked_mul(m, k), checked_mul(k, n)), accumulate ? checked_mul(2, c) : c);
  return checked_mul({batch, elems, element_bytes});
}

std::int64_t GemmWork::c_bytes() const { return checked_mul({batch, m, n, element_bytes}); }

TaskKind Task::kind() const {
  struct Visitor {
    TaskKind operator()(const GemmWork&) const { return TaskKind::kGemm; }
    TaskKind operator()(const ElementwiseWork&) const { return TaskKind::kElementwise; }
    TaskKind operator()(const CollectiveWork&) const { return TaskKind::kCollective; }
    TaskKind operator()(const CopyWork&) const { return TaskKind::kCopy; }
    TaskKind operator()(const HostWork&) const { return TaskKind::kHost; }
  };
  return std::visit(Visitor{}, work);
}

}  // namespace moesim

namespace moesim {
namespace {
constexpr NameTable<MemoryCategory, kNumMemoryCategories> kCategories{
    {{MemoryCategory::kModelStates, "model_states"},
     {MemoryCategory::kActivations, "activations"},
     {MemoryCategory::kTemporary, "temporary"},
     {MemoryCategory::kHostPinned, "host_pinned"}}};
}  // namespace

std::string_view to_string(MemoryCategory c) { return name_in(kCategories, c); }
std::optional<MemoryCategory> parse_memory_category(std::string_view s) {
  return parse_in(kCategories, s);
}

std::int64_t TrafficMatrix::bytes(int s, int d) const {
  return (*rows)[static_cast<std::size_t>(s) * static_cast<std::size_t>(size) + static_cast<std::size_t>(d)] * row_bytes;
}

std::int64_t CollectiveWork::pair_bytes(int s, int d) const {
  if (!traffic) return bytes_per_peer;
  return transposed ? traffic->bytes(d, s) : traffic->bytes(s, d);
}

}  // namespace moesim
