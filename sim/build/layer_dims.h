// The sizes of one MoE layer on one rank (LayerDims), derived from the model, cluster and run specs
// and validated once, before any graph is built; and the routing plan those sizes call for.
//
// Chunking: capacity C = floor(k*f*B/E) slots per (expert, source rank), split over the n chunks
// as evenly as integers allow, so no slot is dropped for pipelining: chunk c carries C/n rows, the
// remainder one row each to the first chunks (sizes differ by at most one). With an alignment a
// (run.chunk_alignment) the floor(C/a) blocks of a slots are split so, and the last chunk also
// takes the C mod a slots left (sizes differ by at most a). MPipeMoE and Tutel take n dividing C;
// other n used to round C down and lose up to n - 1 slots per expert.
//
// Tensor parallelism (DeepSpeed-TED, run.tp_size = t > 1): each rank holds a 1/t slice of every
// local expert (fc1_out/t, H/t); with duplicate token dropping each rank sends only its 1/t share
// of a chunk's capacity slots (padded where t does not divide them), see the *_shard and
// shared_chunk_capacity accessors.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "sim/routing/routing.h"
#include "sim/spec/hardware_spec.h"
#include "sim/spec/model_spec.h"
#include "sim/spec/parallel_layout.h"
#include "sim/spec/run_spec.h"

namespace moesim {

// Sizes of one MoE layer on one rank, derived and validated from the specs.
struct LayerDims {
  std::int64_t tokens = 0;        // B, per rank
  std::int64_t d_model = 0;       // M
  std::int64_t d_ffn = 0;         // H
  std::int64_t fc1_out = 0;       // H, or 2H for swiglu
  int num_experts = 0;            // E
  int top_k = 1;                  // k
  int ep_size = 1;                // N
  int tp_size = 1;                // t, tensor-parallel degree (DeepSpeed-TED)
  int dp_size = 1;                // data-parallel replicas of the tp x ep ranks: GPUs / (t * N)
  bool drop_duplicate_tokens = false;  // TED's duplicate token dropping in effect (t > 1)
  int local_experts = 1;          // E_l = E / N
  int num_chunks = 1;             // n
  std::int64_t capacity = 0;      // C = floor(k*f*B/E) slots per expert per source rank
  int chunk_alignment = 1;        // a: chunk sizes are multiples of it but for the last chunk
  int element_bytes = 4;
  DType storage_dtype = DType::kFp32;  // of the activations and parameters (element_bytes each)
  DType gemm_dtype = DType::kFp32;

  // The per-chunk sizes below default to the largest chunk (what a slot buffer must hold).
  static constexpr int kLargestChunk = -1;
  // Slots per (expert, source rank) in chunk c: a x (floor(C/a) blocks split over n, one more
  // for the first chunks), plus C mod a for the last.
  std::int64_t chunk_capacity(int c = kLargestChunk) const;
  std::vector<std::int64_t> chunk_capacities() const;
  bool even_chunks() const;  // every chunk the same size
  // Rows of chunk c's dispatch tensor on a rank, and of its experts' input: E * C_c.
  std::int64_t rows_per_chunk(int c = kLargestChunk) const;
  // Rows each local expert computes in chunk c: N * C_c.
  std::int64_t rows_per_expert_chunk(int c = kLargestChunk) const;
  // The share of those rows each tensor-parallel rank sends through an all-to-all: t with
  // duplicate token dropping, else 1.
  int token_share() const { return drop_duplicate_tokens ? tp_size : 1; }
  // Slots per (expert, source) one tensor-parallel rank sends in chunk c: ceil(C_c / share). A
  // chunk the share does not divide is padded, as an all-gather needs equal parts.
  std::int64_t shared_chunk_capacity(int c = kLargestChunk) const;
  // Bytes one rank sends to one peer in chunk c's all-to-all: E_l * ceil(C_c / share) * M * bytes.
  std::int64_t a2a_bytes_per_peer(int c = kLargestChunk) const;
  // Rows of chunk c's dispatch tensor after the tensor-parallel all-gather: E * share *
  // ceil(C_c / share) (rows_per_chunk(c) plus the padding).
  std::int64_t gathered_rows_per_chunk(int c = kLargestChunk) const;
  // Width of a rank's slice of FC1's output and of the activation (fc1_out / t, H / t).
  std::int64_t fc1_out_shard() const { return fc1_out / tp_size; }
  std::int64_t d_ffn_shard() const { return d_ffn / tp_size; }
  ParallelLayout layout() const { return ParallelLayout{tp_size, ep_size, dp_size}; }
};

// The part of derive_layer_dims about run.tp_size alone: at least 1, dividing the cluster's GPUs,
// not on a loopback node, dividing d_ffn and the shared experts' width, uniform routing when above
// 1. A sweep calls it first so that a bad tensor-parallel degree is named at its own axis.
void check_tensor_parallel_degree(const ModelSpec& model, const ClusterSpec& cluster, const RunSpec& run);

// Validates the combination (experts divisible by the EP size, top-k <= experts, capacity C >= n,
// tp x EP dividing the cluster, d_ffn divisible by tp, sizes that fit in 64 bits, slots 1 or 2,
// PCIe bandwidth for the offloading strategies s1-s3, ZeRO stage 0 or 1) and derives the dims.
// Throws InputError naming the values and the rule.
LayerDims derive_layer_dims(const ModelSpec& model, const ClusterSpec& cluster, const RunSpec& run);

RoutingShape routing_shape(const LayerDims& dims);

// The routing plan of run.routing for these dims: nullopt for uniform routing (the padded,
// balanced layout). Throws InputError for a bad routing matrix file.
std::optional<RoutingPlan> make_layer_routing(const LayerDims& dims, const RunSpec& run);

}  // namespace moesim
