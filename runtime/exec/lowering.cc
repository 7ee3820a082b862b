#include "runtime/exec/lowering.h"

namespace moesim::runtime {

Lowering::Lowering(const LayerExecutor::Shared& sh)
    : d_(sh.d), type_(sh.type), math_(sh.math), act_(sh.act), normalize_(sh.options.normalize_scores), eb_(sh.eb),
      rows_(sh.rows), rows_all_(sh.rows_all), dispatch_rows_(sh.dispatch_rows), shared_h_(sh.shared_h),
      shared_f_(sh.shared_f), source_(sh.source), expert_(sh.expert) {}

void Lowering::local(const RankLayer& s, const Task& t, const std::string& op, int stream) const {
  const bool bwd = t.pass == Pass::kBackward;
  const HandlerTable& table = bwd ? backward_ops() : forward_ops();
  const auto it = table.find(op);
  if (it == table.end()) unsupported(t);
  const ParamPtrs p = param_ptrs(s.buffer("params"), d_, shared_f_);
  const ParamPtrs g = bwd ? param_ptrs(s.buffer("grads"), d_, shared_f_) : ParamPtrs{};
  (this->*(it->second))(Op{s, t, t.chunk, stream, p, g});
}

namespace {

char* bound(const RankLayer& s, const Task& t, const std::vector<Operand>& list, std::size_t i, const char* verb) {
  std::size_t own = 0;
  for (const Operand& o : list) {
    if (!s.st.memory.holds(o.buffer)) continue;  // another member's
    if (own++ == i) return s.st.at(o);
  }
  throw InternalError("task '" + t.id + "' " + verb + " " + std::to_string(own) + " operand(s) on rank " +
                      std::to_string(s.st.rank) + "; the GPU executor needs #" + std::to_string(i));
}

}  // namespace

char* Lowering::read(const RankLayer& s, const Task& t, std::size_t i) { return bound(s, t, t.reads, i, "reads"); }

char* Lowering::written(const RankLayer& s, const Task& t, std::size_t i) {
  return bound(s, t, t.writes, i, "writes");
}

char* Lowering::shared_d_a(const RankLayer& s) const {
  if (s.has("shared.dA")) return s.buffer("shared.dA");
  MOESIM_CHECK(act_ != ActivationKind::kSwiglu, "a swiglu graph with shared experts has their shared.dA buffer");
  return s.buffer("shared.dM");
}

GemmArgs Lowering::expert_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const void* a,
                               std::int64_t lda, std::int64_t sa, const void* b, std::int64_t ldb, std::int64_t sb,
                               void* c, std::int64_t ldc, std::int64_t sc, bool accumulate) const {
  GemmArgs g;
  g.trans_a = ta;
  g.trans_b = tb;
  g.m = m;
  g.n = n;
  g.k = k;
  g.batch = d_.local_experts;
  g.a = a;
  g.lda = lda;
  g.stride_a = sa;
  g.b = b;
  g.ldb = ldb;
  g.stride_b = sb;
  g.c = c;
  g.ldc = ldc;
  g.stride_c = sc;
  g.ab_type = type_;
  g.c_type = type_;
  g.math = math_;
  g.accumulate = accumulate;
  return g;
}

GemmArgs Lowering::dense_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const void* a,
                              std::int64_t lda, const void* b, std::int64_t ldb, void* c, std::int64_t ldc,
                              bool accumulate) const {
  GemmArgs g = expert_gemm(ta, tb, m, n, k, a, lda, 0, b, ldb, 0, c, ldc, 0, accumulate);
  g.batch = 1;
  return g;
}

void Lowering::run_fc1(const Op& o) const {
  const std::int64_t M = d_.d_model, F = d_.fc1_out;
  o.s.dev->gemm(expert_gemm(false, false, rows_, F, M, read(o.s, o.t, 0), M, rows_ * M, read(o.s, o.t, 1), F, M * F,
                            written(o.s, o.t, 0), F, rows_ * F, false),
                o.stream);
}

void Lowering::encode_rows(const RankLayer& s, std::int64_t begin, std::int64_t end, int stream) const {
  s.dev->encode(EncodeArgs{s.buffer("T_I"), s.r.row_token, d_.d_model, begin, end, s.st.send, type_}, stream);
}

// What one member sends and receives in an all-to-all: dispatch sends the source side's chunk to
// the experts, combine the experts' output back; in backward their gradients go the other way.
AllToAllMember Lowering::all_to_all_member(const RankLayer& s, const Task& t, const std::string& op,
                                           int stream) const {
  const bool bwd = t.pass == Pass::kBackward;
  const int c = t.chunk;
  AllToAllMember m;
  m.rank = s.st.rank;
  m.device = s.dev;
  m.stream = stream;
  const bool to_experts = (!bwd && op == "dispatch") || (bwd && (op == "combine" || op == "redispatch"));
  m.send_layout = to_experts ? source_ : expert_;
  m.recv_layout = to_experts ? expert_ : source_;
  if (!bwd && op == "dispatch") {
    m.send = source_chunk(s.st.send, c);
    m.recv = written(s, t, 0);
  } else if (!bwd && op == "combine") {
    m.send = read(s, t, 0);
    m.recv = source_chunk(s.buffer("T_O"), c);
  } else if (bwd && op == "combine") {
    m.send = source_chunk(s.buffer("dT_O"), c);
    m.recv = written(s, t, 0);
  } else if (bwd && op == "redispatch") {
    // Re-encode the chunk from T_I (the routing is kept), then send it again.
    encode_rows(s, c * rows_all_, (c + 1) * rows_all_, stream);
    m.send = source_chunk(s.st.send, c);
    m.recv = written(s, t, 0);
  } else if (bwd && op == "dispatch") {
    m.send = read(s, t, 0);
    m.recv = source_chunk(s.st.send, c);  // the source-side gradient dD, over the spent dispatch tensor
  } else {
    unsupported(t);
  }
  return m;
}

void Lowering::collective(const std::vector<RankLayer>& members, const Task& t, const std::string& op,
                          const std::vector<int>& streams, Transport& transport) const {
  std::vector<AllToAllMember> parts;
  for (std::size_t i = 0; i < members.size(); ++i) parts.push_back(all_to_all_member(members[i], t, op, streams[i]));
  transport.all_to_all(parts, t.stream == StreamClass::kCommCombine ? 1 : 0);
}

void Lowering::unsupported(const Task& t) {
  throw InputError("the GPU executor has no lowering for task '" + t.id + "'");
}

}  // namespace moesim::runtime
