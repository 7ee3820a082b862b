// ParallelLayout: where a rank sits in DeepSpeed-TED's hybrid tensor x expert x data layout
// (Singh et al., ICS'23; reference section 5), and the rank groups its collectives run over.
//
// G = tp * ep * dp GPUs. Ranks are numbered tensor-parallel index fastest, then expert-parallel,
// then data-parallel replica:  rank = (dp_index * ep + ep_index) * tp + tp_index.  Tensor-parallel
// groups are therefore tp consecutive ranks (one node when tp divides the GPUs per node, as
// Megatron places them), and an expert-parallel group is the ep ranks of one replica with the same
// tensor-parallel index (stride tp). The groups, per rank:
//   tensor      the tp ranks of its replica and expert index: FC1 column- and FC2 row-parallel, the
//               all-reduce of the partial sums, duplicate token dropping's all-gathers;
//   expert      the ep ranks of its replica and tensor index: the dispatch and combine all-to-alls;
//   expert_data the dp ranks with its expert and tensor index (one per replica): they hold the same
//               expert shards, so their expert gradients are all-reduced over it (G_data_exp);
//   dense_data  the ep * dp ranks with its tensor index: they hold the same shard of the non-expert
//               parameters (the gate, the shared experts), all-reduced over it (G_data_nonexp).
// The identity of TED: tp * ep * dp = tp * |dense_data| = G.
#pragma once

#include <string>
#include <vector>

namespace moesim {

struct ParallelLayout {
  int tp = 1;  // G_tensor
  int ep = 1;  // G_expert
  int dp = 1;  // G_data_exp: replicas of the expert-parallel groups

  int world() const { return tp * ep * dp; }
  int replica_size() const { return tp * ep; }  // ranks of one data-parallel replica

  int tp_index(int rank) const { return rank % tp; }
  int ep_index(int rank) const { return (rank / tp) % ep; }
  int dp_index(int rank) const { return rank / (tp * ep); }
  int rank_of(int dp_index, int ep_index, int tp_index) const { return (dp_index * ep + ep_index) * tp + tp_index; }

  // Sorted member lists.
  std::vector<int> tensor_group(int rank) const;
  std::vector<int> expert_group(int rank) const;
  std::vector<int> expert_data_group(int rank) const;
  std::vector<int> dense_data_group(int rank) const;

  // "tp 2 x ep 4 x dp 2 = 16 GPUs".
  std::string describe() const;
};

}  // namespace moesim
