#include "sim/build/shared_experts.h"

#include "sim/core/checked_math.h"

namespace moesim {

SharedExperts::SharedExperts(Emitter& emitter, const ModelSpec& model, const Ordering& ordering, TensorParallel& tp)
    : e_(emitter), ordering_(ordering), tp_(tp) {
  if (model.shared_experts.count > 0) {
    // A tensor-parallel rank's slice of the shared experts (derive_layer_dims: t divides it).
    h_ = checked_mul(model.shared_experts.count, model.shared_experts.d_ffn) / e_.dims().tp_size;
    fc1_out_ = model.activation == Activation::kSwiglu ? checked_mul(2, h_) : h_;
  }
}

SharedExperts::Forward SharedExperts::forward(int l, Pass p, const Node& input, std::vector<Buf>& saved) {
  Forward f;
  if (!present()) return f;
  const std::int64_t B = e_.dims().tokens, M = e_.dims().d_model;
  // The FC1 output (B x Fs) is saved for their backward, as T_M is for the routed experts; their
  // output (B x M) lives until decode adds it to the routed one.
  const Buf t_m = e_.buffer(l, "shared.T_M", -1, e_.bytes(B, fc1_out_), MemoryCategory::kActivations);
  saved.push_back(t_m);
  f.out_buf = e_.buffer(l, "shared.out", -1, e_.bytes(B, M), MemoryCategory::kTemporary);
  const Node fc1 = e_.compute(l, p, "shared.fc1", "shared", -1, e_.gemm(1, B, M, fc1_out_), Uses{{t_m}, {}});
  e_.edge(input, fc1);
  const Node act = e_.compute(
      l, p, "shared.act", "shared", -1,
      e_.elementwise(checked_mul(B, fc1_out_), checked_mul(B, h_), checked_mul(B, h_)), {}, Op::kActivation);
  e_.edge(fc1, act);
  f.out = e_.compute(l, p, "shared.fc2", "shared", -1, e_.gemm(1, B, h_, M), Uses{{f.out_buf}, {}});
  e_.edge(act, f.out);
  return f;
}

SharedExperts::Backward SharedExperts::backward(int l, const Node& decode, const Buf& upstream_grad) {
  Backward b;
  if (!present()) return b;
  const Pass p = Pass::kBackward;
  const std::int64_t B = e_.dims().tokens, M = e_.dims().d_model;
  // Temporaries, as for the routed experts: the activation's input gradient shared.dM (its last
  // reader is fc1.dgrad), swiglu's dA (relu / gelu compute over it in place) and shared.dX.
  const Buf d_m = e_.buffer(l, "shared.dM", -1, e_.bytes(B, fc1_out_), MemoryCategory::kTemporary);
  const Buf d_a =
      fc1_out_ != h_ ? e_.buffer(l, "shared.dA", -1, e_.bytes(B, h_), MemoryCategory::kTemporary) : Buf{};
  b.dx = e_.buffer(l, "shared.dX", -1, e_.bytes(B, M), MemoryCategory::kTemporary);
  const Node fc2_d = e_.compute(l, p, "shared.fc2.dgrad", "shared", -1, e_.gemm(1, B, M, h_, GemmLayout::kNT), Uses{{d_m, d_a}, {}});
  e_.edge(decode, fc2_d);
  const Node act = e_.compute(
      l, p, "shared.act", "shared", -1,
      e_.elementwise(checked_mul(B, h_) + checked_mul(B, fc1_out_), checked_mul(B, fc1_out_),
                     checked_mul(B, fc1_out_)),
      Uses{{}, {d_a}}, Op::kActivation);
  e_.edge(fc2_d, act);
  // The W2 gradient reads dY and the activation's output, which the backward shared.act
  // recomputes; it is the last reader of dY (after shared.fc2.dgrad, through act).
  const Node fc2_w =
      e_.compute(l, p, "shared.fc2.wgrad", "shared", -1, e_.gemm(1, h_, B, M, GemmLayout::kTN), Uses{{}, {upstream_grad}});
  e_.edge(decode, fc2_w);
  e_.edge(act, fc2_w);
  const Node fc1_w = e_.compute(l, p, "shared.fc1.wgrad", "shared", -1, e_.gemm(1, M, B, fc1_out_, GemmLayout::kTN));
  e_.edge(act, fc1_w);
  b.dgrad = e_.compute(l, p, "shared.fc1.dgrad", "shared", -1, e_.gemm(1, B, fc1_out_, M, GemmLayout::kNT), Uses{{b.dx}, {d_m}});
  e_.edge(act, b.dgrad);
  e_.edge(fc1_w, b.dgrad);  // the W1 gradient reads shared.dM, which fc1.dgrad frees
  b.wgrads = {fc1_w, fc2_w};
  return b;
}

void SharedExperts::reduce_before_all_to_alls(int l, Pass p, Node& partial) {
  if (reduced() && !ordering_.single_comm_stream())
    tp_.reduce_tokens(l, p, "shared.allreduce", ordering_.side_stream(), partial);
}

void SharedExperts::reduce_after_all_to_alls(int l, Pass p, Node& partial) {
  if (reduced() && ordering_.single_comm_stream())
    tp_.reduce_tokens(l, p, "shared.allreduce", ordering_.side_stream(), partial);
}

}  // namespace moesim
