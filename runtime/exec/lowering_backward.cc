// The backward pass's local ops (lowering.h), in the order the builder issues them per chunk:
// combine's gradient arrives, fc2 dgrad, the activation's backward, the weight gradients, fc1
// dgrad; then encode's and the router's backward and the gate's gradients.
#include "runtime/exec/lowering.h"

namespace moesim::runtime {

const Lowering::HandlerTable& Lowering::backward_ops() {
  static const HandlerTable table = {
      {"decode", &Lowering::decode_backward},
      {"prefetch.T_M", &Lowering::prefetch_t_m},
      {"prefetch.T_DI", &Lowering::prefetch_t_di},
      {"recompute.fc1", &Lowering::recompute_fc1},
      {"recompute.act", &Lowering::recompute_act},
      {"fc2.dgrad", &Lowering::fc2_dgrad},
      {"act", &Lowering::act_backward},
      {"fc2.wgrad", &Lowering::fc2_wgrad},
      {"fc1.wgrad", &Lowering::fc1_wgrad},
      {"fc1.dgrad", &Lowering::fc1_dgrad},
      {"encode", &Lowering::encode_backward},
      {"route", &Lowering::route_backward},
      {"gate.dgrad", &Lowering::gate_dgrad},
      {"gate.wgrad", &Lowering::gate_wgrad},
      {"shared.fc2.dgrad", &Lowering::shared_fc2_dgrad},
      {"shared.act", &Lowering::shared_act_backward},
      {"shared.fc2.wgrad", &Lowering::shared_fc2_wgrad},
      {"shared.fc1.wgrad", &Lowering::shared_fc1_wgrad},
      {"shared.fc1.dgrad", &Lowering::shared_fc1_dgrad},
  };
  return table;
}

void Lowering::decode_backward(const Op& o) const {
  const RankLayer& s = o.s;
  s.dev->decode_backward(DecodeBackwardArgs{s.upstream_grad(), s.buffer("T_O"), s.r.topk_row, s.r.topk_score,
                                            s.r.row_token, s.r.row_choice, d_.tokens, d_.top_k, dispatch_rows_,
                                            d_.d_model, s.buffer("dT_O"), s.r.dscores, type_},
                         o.stream);
}

void Lowering::prefetch_t_m(const Op& o) const {
  const std::int64_t bytes = rows_all_ * d_.fc1_out * eb_;
  o.s.dev->copy(written(o.s, o.t, 0), o.s.buffer("host.T_M") + o.c * bytes, bytes, o.stream);
}

void Lowering::prefetch_t_di(const Op& o) const {
  const std::int64_t bytes = rows_all_ * d_.d_model * eb_;
  o.s.dev->copy(written(o.s, o.t, 0), o.s.buffer("host.T_DI") + o.c * bytes, bytes, o.stream);
}

void Lowering::recompute_fc1(const Op& o) const { run_fc1(o); }

// T_M holds FC1's output h, which recompute.fc1 has restored: nothing left to compute.
void Lowering::recompute_act(const Op&) const {}

void Lowering::fc2_dgrad(const Op& o) const {
  const std::int64_t M = d_.d_model, H = d_.d_ffn;
  // dA: swiglu's own per-chunk buffer, else dM, which the activation's backward then overwrites
  // in place with its F = H wide input gradient.
  o.s.dev->gemm(expert_gemm(false, true, rows_, H, M, read(o.s, o.t, 0), M, rows_ * M, read(o.s, o.t, 1), M, H * M,
                            written(o.s, o.t, 0), H, rows_ * H, false),
                o.stream);
}

void Lowering::act_backward(const Op& o) const {
  o.s.dev->activation_backward(ActivationBackwardArgs{act_, rows_all_, d_.d_ffn, read(o.s, o.t, 1), read(o.s, o.t, 0),
                                                      written(o.s, o.t, 0), o.s.st.act_ws, type_},
                               o.stream);
}

void Lowering::fc2_wgrad(const Op& o) const {
  const std::int64_t M = d_.d_model, H = d_.d_ffn;
  o.s.dev->gemm(expert_gemm(true, false, H, M, rows_, o.s.st.act_ws, H, rows_ * H, read(o.s, o.t, 1), M,
                            rows_ * M, written(o.s, o.t, 0), M, H * M, o.accumulates()),
                o.stream);
}

void Lowering::fc1_wgrad(const Op& o) const {
  const std::int64_t M = d_.d_model, F = d_.fc1_out;
  o.s.dev->gemm(expert_gemm(true, false, M, F, rows_, read(o.s, o.t, 0), M, rows_ * M, read(o.s, o.t, 1),
                            F, rows_ * F, written(o.s, o.t, 0), F, M * F, o.accumulates()),
                o.stream);
}

void Lowering::fc1_dgrad(const Op& o) const {
  const std::int64_t M = d_.d_model, F = d_.fc1_out;
  o.s.dev->gemm(expert_gemm(false, true, rows_, M, F, read(o.s, o.t, 0), F, rows_ * F, read(o.s, o.t, 1), F, M * F,
                            written(o.s, o.t, 0), M, rows_ * M, false),
                o.stream);
}

void Lowering::encode_backward(const Op& o) const {
  const RankLayer& s = o.s;
  s.dev->encode_backward(
      EncodeBackwardArgs{s.st.send, s.r.topk_row, d_.tokens, d_.top_k, d_.d_model, s.buffer("dT_I"), type_},
      o.stream);
}

void Lowering::route_backward(const Op& o) const {
  const RankLayer& s = o.s;
  s.dev->route_backward(RouteBackwardArgs{s.r.probs, s.r.topk_idx, s.r.topk_score, s.r.dscores, d_.tokens,
                                          d_.num_experts, d_.top_k, normalize_, s.st.dlogits, type_},
                        o.stream);
}

// Accumulates: dX = encode's backward + the router's (+ the shared experts').
void Lowering::gate_dgrad(const Op& o) const {
  const RankLayer& s = o.s;
  const std::int64_t B = d_.tokens, M = d_.d_model;
  const int E = d_.num_experts;
  s.dev->gemm(dense_gemm(false, true, B, M, E, s.st.dlogits, E, o.p.gate, E, s.buffer("dT_I"), M, true), o.stream);
  if (shared_h_ > 0) s.dev->add(AddArgs{s.buffer("dT_I"), s.buffer("shared.dX"), B * M, type_}, o.stream);
}

void Lowering::gate_wgrad(const Op& o) const {
  const std::int64_t B = d_.tokens, M = d_.d_model;
  const int E = d_.num_experts;
  o.s.dev->gemm(dense_gemm(true, false, M, E, B, o.s.buffer("T_I"), M, o.s.st.dlogits, E, o.g.gate, E, false),
                o.stream);
}

void Lowering::shared_fc2_dgrad(const Op& o) const {
  const std::int64_t B = d_.tokens, M = d_.d_model;
  o.s.dev->gemm(dense_gemm(false, true, B, shared_h_, M, o.s.upstream_grad(), M, o.p.shared_w2, M, shared_d_a(o.s),
                           shared_h_, false),
                o.stream);
}

void Lowering::shared_act_backward(const Op& o) const {
  const RankLayer& s = o.s;
  s.dev->activation_backward(ActivationBackwardArgs{act_, d_.tokens, shared_h_, s.buffer("shared.T_M"), shared_d_a(s),
                                                    s.buffer("shared.dM"), s.st.shared_act, type_},
                             o.stream);
}

void Lowering::shared_fc2_wgrad(const Op& o) const {
  const std::int64_t B = d_.tokens, M = d_.d_model;
  o.s.dev->gemm(dense_gemm(true, false, shared_h_, M, B, o.s.st.shared_act, shared_h_, o.s.upstream_grad(), M,
                           o.g.shared_w2, M, false),
                o.stream);
}

void Lowering::shared_fc1_wgrad(const Op& o) const {
  const std::int64_t B = d_.tokens, M = d_.d_model;
  o.s.dev->gemm(dense_gemm(true, false, M, shared_f_, B, o.s.buffer("T_I"), M, o.s.buffer("shared.dM"), shared_f_,
                           o.g.shared_w1, shared_f_, false),
                o.stream);
}

void Lowering::shared_fc1_dgrad(const Op& o) const {
  const std::int64_t B = d_.tokens, M = d_.d_model;
  o.s.dev->gemm(dense_gemm(false, true, B, M, shared_f_, o.s.buffer("shared.dM"), shared_f_, o.p.shared_w1,
                           shared_f_, o.s.buffer("shared.dX"), M, false),
                o.stream);
}

}  // namespace moesim::runtime
