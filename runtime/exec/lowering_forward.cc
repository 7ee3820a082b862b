// The forward pass's local ops (lowering.h).
#include "runtime/exec/lowering.h"

namespace moesim::runtime {

const Lowering::HandlerTable& Lowering::forward_ops() {
  static const HandlerTable table = {
      {"gate", &Lowering::gate},
      {"route", &Lowering::route},
      {"encode", &Lowering::encode},
      {"fc1", &Lowering::fc1_forward},
      {"act", &Lowering::act_forward},
      {"fc2", &Lowering::fc2},
      {"offload.T_DI", &Lowering::offload_t_di},
      {"offload.T_M", &Lowering::offload_t_m},
      {"decode", &Lowering::decode},
      {"shared.fc1", &Lowering::shared_fc1},
      {"shared.act", &Lowering::shared_act_forward},
      {"shared.fc2", &Lowering::shared_fc2},
  };
  return table;
}

void Lowering::gate(const Op& o) const {
  const std::int64_t B = d_.tokens, M = d_.d_model;
  const int E = d_.num_experts;
  GemmArgs g = dense_gemm(false, false, B, E, M, o.s.buffer("T_I"), M, o.p.gate, E, o.s.st.logits, E, false);
  g.c_type = Storage::kF32;  // routing decisions from fp32 logits
  o.s.dev->gemm(g, o.stream);
}

void Lowering::route(const Op& o) const {
  const RankLayer& s = o.s;
  const std::int64_t B = d_.tokens;
  const int E = d_.num_experts, k = d_.top_k;
  s.dev->route(RouteArgs{s.st.logits, B, E, k, normalize_, s.r.probs, s.r.topk_idx, s.r.topk_score}, o.stream);
  s.dev->assign(AssignArgs{s.r.topk_idx, B, E, k, d_.capacity, d_.num_chunks, s.r.topk_row, s.r.row_token,
                           s.r.row_choice, s.r.tokens_per_expert, s.st.assign_scratch, s.st.assign_scratch_bytes},
                o.stream);
}

void Lowering::encode(const Op& o) const { encode_rows(o.s, 0, dispatch_rows_, o.stream); }

void Lowering::fc1_forward(const Op& o) const { run_fc1(o); }

void Lowering::act_forward(const Op& o) const {
  o.s.dev->activation(ActivationArgs{act_, rows_all_, d_.d_ffn, read(o.s, o.t, 0), o.s.st.act_ws, type_},
                      o.stream);
}

void Lowering::fc2(const Op& o) const {
  const std::int64_t M = d_.d_model, H = d_.d_ffn;
  o.s.dev->gemm(expert_gemm(false, false, rows_, M, H, o.s.st.act_ws, H, rows_ * H, read(o.s, o.t, 1), M, H * M,
                            written(o.s, o.t, 0), M, rows_ * M, false),
                o.stream);
}

void Lowering::offload_t_di(const Op& o) const {
  const std::int64_t bytes = rows_all_ * d_.d_model * eb_;
  o.s.dev->copy(o.s.buffer("host.T_DI") + o.c * bytes, read(o.s, o.t, 0), bytes, o.stream);
}

void Lowering::offload_t_m(const Op& o) const {
  const std::int64_t bytes = rows_all_ * d_.fc1_out * eb_;
  o.s.dev->copy(o.s.buffer("host.T_M") + o.c * bytes, read(o.s, o.t, 0), bytes, o.stream);
}

void Lowering::decode(const Op& o) const {
  const RankLayer& s = o.s;
  const std::int64_t B = d_.tokens, M = d_.d_model;
  s.dev->decode(DecodeArgs{s.buffer("T_O"), s.r.topk_row, s.r.topk_score, B, d_.top_k, M, s.output(), type_},
                o.stream);
  if (shared_h_ > 0) s.dev->add(AddArgs{s.output(), s.buffer("shared.out"), B * M, type_}, o.stream);
}

void Lowering::shared_fc1(const Op& o) const {
  const std::int64_t B = d_.tokens, M = d_.d_model;
  o.s.dev->gemm(dense_gemm(false, false, B, shared_f_, M, o.s.buffer("T_I"), M, o.p.shared_w1, shared_f_,
                           o.s.buffer("shared.T_M"), shared_f_, false),
                o.stream);
}

void Lowering::shared_act_forward(const Op& o) const {
  o.s.dev->activation(
      ActivationArgs{act_, d_.tokens, shared_h_, o.s.buffer("shared.T_M"), o.s.st.shared_act, type_}, o.stream);
}

void Lowering::shared_fc2(const Op& o) const {
  const std::int64_t B = d_.tokens, M = d_.d_model;
  o.s.dev->gemm(dense_gemm(false, false, B, M, shared_h_, o.s.st.shared_act, shared_h_, o.p.shared_w2, M,
                           o.s.buffer("shared.out"), M, false),
                o.stream);
}

}  // namespace moesim::runtime
