// Activation checkpointing (run.checkpoint, with strategy none) as a policy over the MoE block: a
// layer's forward frees at its decode everything it saved except its input T_I (and, with cac,
// the stash); its backward starts by re-running the forward (pass bwd, inside an
// Emitter::RerunScope: ids and buffers prefixed recompute., L0.bwd.recompute.fc1.c0,
// L0.recompute.T_M; local tasks in stage recompute, the all-to-alls in redispatch / recombine),
// whose tensors and output (L{l}.recompute.out, B x M) bwd.gate.wgrad frees; bwd.decode waits for
// the re-run's decode.
//
// Communication-aware checkpointing (cac, DeepSpeed-TED): the forward keeps what its all-to-alls
// received (T_DI and T_O, or with duplicate token dropping the 1/t shares L{l}.stash.T_DI / .T_O,
// allocated by the first dispatch / combine) and the re-run has no all-to-alls: it reads T_DI /
// T_O, or all-gathers the shares into new tensors.
#pragma once

#include <functional>
#include <vector>

#include "sim/build/emitter.h"
#include "sim/spec/run_spec.h"

namespace moesim {

class Checkpointing {
 public:
  Checkpointing(Emitter& emitter, const RunSpec& run);

  bool active() const { return mode_ != ActivationCheckpointing::kNone; }

  // Before layer l's backward: its forward again, in a RerunScope, writing L{l}.recompute.out;
  // `forward(out)` emits it and returns its decode. An empty Node without checkpointing.
  Node rerun(int layer, const std::function<Node(const Buf& out)>& forward);

  // The current pass is a cac re-run: it sends nothing and reads the stash.
  bool reads_stash() const { return e_.rerunning() && cac(); }
  // The re-run's T_O / T_DI when the stash is those tensors themselves (else empty: make them).
  Buf stashed_t_o(int layer) const { return reads_stash() && stash_is_tensor() ? stash_[idx(layer)].o : Buf{}; }
  Buf stashed_t_di(int layer) const { return reads_stash() && stash_is_tensor() ? stash_[idx(layer)].di : Buf{}; }
  // In a cac forward, after T_O (and T_DI) exist: stash them, or make the share buffers.
  void stash_t_o(int layer, const Buf& t_o);
  void stash_t_di(int layer, const Buf& t_di);
  // The stash buffer the first dispatch / combine of a cac forward allocates (the shares).
  Buf dispatch_stash(int layer, bool first_dispatch) const;
  Buf combine_stash(int layer, bool first_combine) const;

  // Which of a pass's saved tensors `saved` (and the layer's input t_i, the re-run's output) live
  // until the layer's backward ends (`kept`) and which its decode frees (appended to
  // `freed_at_decode`).
  void split_saved(int layer, const std::vector<Buf>& saved, const Buf& t_i, const Buf& output,
                   std::vector<Buf>& kept, std::vector<Buf>& freed_at_decode) const;

 private:
  bool cac() const { return mode_ == ActivationCheckpointing::kCommAware; }
  // With duplicate token dropping the stash holds the rank's shares, which the re-run all-gathers.
  bool stash_is_tensor() const { return cac() && !e_.dims().drop_duplicate_tokens; }
  bool stashing() const { return cac() && !e_.rerunning(); }  // a cac forward, not its re-run
  std::size_t idx(int layer) const { return static_cast<std::size_t>(layer); }

  struct Stash {
    Buf di, o;
  };
  Emitter& e_;
  ActivationCheckpointing mode_;
  std::vector<Stash> stash_;  // per layer
};

}  // namespace moesim
