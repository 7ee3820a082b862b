#include "sim/graph/op.h"

#include "sim/core/error.h"
#include "sim/graph/name_table.h"
#include "sim/graph/op_disagreement.h"
#include "sim/graph/task.h"

namespace moesim {
namespace {

constexpr NameTable<Op, 17> kOpNames{{{Op::kGemm, "gemm"},
                                      {Op::kBatchedGemm, "batched_gemm"},
                                      {Op::kTopK, "top_k"},
                                      {Op::kEncode, "encode"},
                                      {Op::kDecode, "decode"},
                                      {Op::kActivation, "activation"},
                                      {Op::kElementwise, "elementwise"},
                                      {Op::kAllToAll, "all_to_all"},
                                      {Op::kAllToAllV, "all_to_allv"},
                                      {Op::kSendRecv, "send_recv"},
                                      {Op::kAllReduce, "all_reduce"},
                                      {Op::kAllGather, "all_gather"},
                                      {Op::kReduceScatter, "reduce_scatter"},
                                      {Op::kCopyD2H, "copy_d2h"},
                                      {Op::kCopyH2D, "copy_h2d"},
                                      {Op::kCopyD2D, "copy_d2d"},
                                      {Op::kHost, "host"}}};

Op collective_op(const CollectiveWork& w) {
  if (w.is_all_to_allv()) return Op::kAllToAllV;
  switch (w.op) {
    case CollectiveOp::kAllToAll: return Op::kAllToAll;
    case CollectiveOp::kAllReduce: return Op::kAllReduce;
    case CollectiveOp::kAllGather: return Op::kAllGather;
    case CollectiveOp::kReduceScatter: return Op::kReduceScatter;
  }
  return Op::kAllToAll;
}

Op copy_op(CopyDirection d) {
  switch (d) {
    case CopyDirection::kDeviceToHost: return Op::kCopyD2H;
    case CopyDirection::kHostToDevice: return Op::kCopyH2D;
    case CopyDirection::kDeviceToDevice: return Op::kCopyD2D;
  }
  return Op::kCopyD2D;
}

}  // namespace

std::string_view to_string(Op op) { return name_in(kOpNames, op); }
std::optional<Op> parse_op(std::string_view s) { return parse_in(kOpNames, s); }

std::vector<std::string> op_names() {
  std::vector<std::string> out;
  for (const auto& [op, name] : kOpNames) out.emplace_back(name);
  return out;
}

TaskKind kind_of(Op op) {
  switch (op) {
    case Op::kGemm:
    case Op::kBatchedGemm: return TaskKind::kGemm;
    case Op::kTopK:
    case Op::kEncode:
    case Op::kDecode:
    case Op::kActivation:
    case Op::kElementwise: return TaskKind::kElementwise;
    case Op::kAllToAll:
    case Op::kAllToAllV:
    case Op::kSendRecv:
    case Op::kAllReduce:
    case Op::kAllGather:
    case Op::kReduceScatter: return TaskKind::kCollective;
    case Op::kCopyD2H:
    case Op::kCopyH2D:
    case Op::kCopyD2D: return TaskKind::kCopy;
    case Op::kHost: return TaskKind::kHost;
  }
  return TaskKind::kHost;
}

Op op_for(const Work& work, Op kernel) {
  if (kind_of(kernel) != TaskKind::kElementwise)
    throw InputError("op '" + std::string(to_string(kernel)) + "' is not a memory-bound kernel's");
  struct Visitor {
    Op kernel;
    Op operator()(const GemmWork& w) const { return w.batch > 1 ? Op::kBatchedGemm : Op::kGemm; }
    Op operator()(const ElementwiseWork&) const { return kernel; }
    Op operator()(const CollectiveWork& w) const { return collective_op(w); }
    Op operator()(const CopyWork& w) const { return copy_op(w.direction); }
    Op operator()(const HostWork&) const { return Op::kHost; }
  };
  return std::visit(Visitor{kernel}, work);
}

bool op_agrees(Op op, const Work& work) {
  if (kind_of(op) == TaskKind::kElementwise) return std::holds_alternative<ElementwiseWork>(work);
  // Point-to-point sends are priced as the all-to-allv of their pairs.
  if (op == Op::kSendRecv) return op_for(work) == Op::kAllToAllV;
  return op_for(work) == op;
}

std::string op_disagreement(Op op, const Work& work) {
  const Op own = op_for(work);
  const bool kernel = kind_of(own) == TaskKind::kElementwise;
  return "op '" + std::string(to_string(op)) + "' disagrees with its " + std::string(to_string(kind_of(own))) +
         " work (its op would be '" + std::string(to_string(own)) + "'" +
         (kernel ? " or another memory-bound kernel" : "") + ")";
}

}  // namespace moesim
