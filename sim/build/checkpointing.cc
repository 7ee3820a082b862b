#include "sim/build/checkpointing.h"

#include <algorithm>

#include "sim/core/checked_math.h"

namespace moesim {

Checkpointing::Checkpointing(Emitter& emitter, const RunSpec& run)
    : e_(emitter), mode_(run.checkpoint), stash_(static_cast<std::size_t>(run.num_moe_layers)) {}

Node Checkpointing::rerun(int l, const std::function<Node(const Buf& out)>& forward) {
  if (!active()) return Node{};
  // Autograd reaches the re-run after the layer above's backward, which the compute stream's
  // order gives.
  const Emitter::RerunScope scope(e_);
  const LayerDims& d = e_.dims();
  const Buf out = e_.buffer(l, "out", -1, e_.bytes(d.tokens, d.d_model), MemoryCategory::kActivations);
  return forward(out);
}

void Checkpointing::stash_t_o(int l, const Buf& t_o) {
  if (!stashing()) return;
  Stash& s = stash_[idx(l)];
  if (stash_is_tensor()) {
    s.o = t_o;
    return;
  }
  // The rank's 1/t share of every chunk (padded where t does not divide it); duplicate token
  // dropping runs with uniform routing only, so every rank sends what it receives.
  const LayerDims& d = e_.dims();
  std::int64_t share_rows = 0;
  for (int c = 0; c < d.num_chunks; ++c)
    share_rows = checked_add(share_rows, checked_mul(d.num_experts, d.shared_chunk_capacity(c)));
  s.di = e_.buffer(l, "stash.T_DI", -1, e_.bytes(share_rows, d.d_model), MemoryCategory::kActivations);
  s.o = e_.buffer(l, "stash.T_O", -1, e_.bytes(share_rows, d.d_model), MemoryCategory::kActivations);
}

void Checkpointing::stash_t_di(int l, const Buf& t_di) {
  if (stashing() && stash_is_tensor()) stash_[idx(l)].di = t_di;
}

Buf Checkpointing::dispatch_stash(int l, bool first_dispatch) const {
  return first_dispatch && stashing() && !stash_is_tensor() ? stash_[idx(l)].di : Buf{};
}

Buf Checkpointing::combine_stash(int l, bool first_combine) const {
  return first_combine && stashing() && !stash_is_tensor() ? stash_[idx(l)].o : Buf{};
}

void Checkpointing::split_saved(int l, const std::vector<Buf>& saved, const Buf& t_i, const Buf& output,
                                std::vector<Buf>& kept, std::vector<Buf>& freed_at_decode) const {
  // The re-run's tensors are kept, with its output, which autograd holds until the layer's
  // backward ends.
  if (e_.rerunning()) {
    kept.insert(kept.end(), saved.begin(), saved.end());
    kept.push_back(output);
    return;
  }
  kept = {t_i};
  if (!active()) {
    kept.insert(kept.end(), saved.begin(), saved.end());
    return;
  }
  // A checkpointed forward keeps only its input and the stash.
  std::vector<Buf> stashed;
  if (stashing()) stashed = {stash_[idx(l)].di, stash_[idx(l)].o};
  for (const Buf& b : saved)
    if (std::find(stashed.begin(), stashed.end(), b) == stashed.end()) freed_at_decode.push_back(b);
  kept.insert(kept.end(), stashed.begin(), stashed.end());
}

}  // namespace moesim
