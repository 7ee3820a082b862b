// Small enumerations shared by the specs, the graph and the cost models, with their names.
//
// Every enumeration has to_string and a parse_* function; parse_* returns std::nullopt for an
// unknown name so that callers can report it with their own file position and the valid names.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moesim {

// Element type of tensors, and the math mode of GEMMs (tf32 is a math mode on fp32 storage).
// kFp8 (E4M3) is a GEMM precision only: tensors are stored in bf16 or fp16 (FP8 training keeps
// its activations so and casts to FP8 for the GEMMs).
enum class DType { kFp32, kTf32, kBf16, kFp16, kFp8 };
std::string_view to_string(DType d);
std::optional<DType> parse_dtype(std::string_view s);
std::vector<std::string> dtype_names();
// Bytes per element; tf32 is stored as fp32.
int dtype_bytes(DType d);

// How a GEMM's operands are stored, as the runtime issues it (row-major, runtime/exec/device.h's
// trans_a / trans_b): nn C = A B (forward), nt C = A B^T (data gradient: dY W^T), tn C = A^T B
// (weight gradient: X^T dY, k the tokens). cuBLAS may pick a different kernel per layout, so a
// calibration measured per layout prices each with its own table (sim/cost/gemm_calibration.h).
enum class GemmLayout { kNN, kNT, kTN };
std::string_view to_string(GemmLayout l);  // "nn", "nt", "tn"
std::optional<GemmLayout> parse_gemm_layout(std::string_view s);
std::vector<std::string> gemm_layout_names();

enum class Activation { kRelu, kGelu, kSwiglu };
std::string_view to_string(Activation a);
std::optional<Activation> parse_activation(std::string_view s);
std::vector<std::string> activation_names();

// How the pipelined chunks of a layer are issued onto streams (reference section 2).
enum class OrderPolicy { kSequential, kMPipeMoE, kFasterMoE, kTutel };
std::string_view to_string(OrderPolicy p);
std::optional<OrderPolicy> parse_order_policy(std::string_view s);
std::vector<std::string> order_policy_names();

// MPipeMoE memory-reuse strategies (IPDPS'23 Table II): `none` keeps full-size T_DI/T_M/T_DO for
// backward; s1-s4 reuse per-chunk buffer slots and restore T_DI / T_M in backward by
// s1: offload both; s2: re-communicate T_DI, offload T_M; s3: offload T_DI, recompute T_M;
// s4: re-communicate T_DI, recompute T_M.
enum class MemoryStrategy { kNone, kS1, kS2, kS3, kS4 };
std::string_view to_string(MemoryStrategy s);
std::optional<MemoryStrategy> parse_memory_strategy(std::string_view s);
std::vector<std::string> memory_strategy_names();
// How a strategy restores T_DI (offload and prefetch: s1, s3; else re-dispatch) and T_M (offload
// and prefetch: s1, s2; else recompute); both false for none.
inline bool offloads_t_di(MemoryStrategy s) { return s == MemoryStrategy::kS1 || s == MemoryStrategy::kS3; }
inline bool offloads_t_m(MemoryStrategy s) { return s == MemoryStrategy::kS1 || s == MemoryStrategy::kS2; }

// Optimizer, for model-state accounting: optimizer states per parameter (adam 2, momentum 1, sgd 0).
enum class Optimizer { kAdam, kMomentum, kSgd };
std::string_view to_string(Optimizer o);
std::optional<Optimizer> parse_optimizer(std::string_view s);
std::vector<std::string> optimizer_names();
int optimizer_states_per_param(Optimizer o);

// Which collective model runs the network (docs/network.md): alpha-beta (one latency and
// bandwidth per link class, for huge sweeps), flow (max-min fair flows over the topology), or
// auto: flow when the hardware file describes a topology (and a fabric for several nodes).
enum class NetworkModel { kAuto, kAlphaBeta, kFlow };
std::string_view to_string(NetworkModel m);
std::optional<NetworkModel> parse_network_model(std::string_view s);
std::vector<std::string> network_model_names();

// Which compute model prices the tasks that are not collectives (docs/concepts.md, "Cost models"):
// roofline (GEMMs by tiles and waves, memory-bound kernels, a calibration's tables where present,
// host copies over PCIe), pipemoe-alpha-beta (PipeMoE's linear costs for every task, collectives
// included, from the hardware's alpha_beta section), or auto: pipemoe-alpha-beta when the hardware
// says alpha_beta.simulate, else roofline. The models themselves are registered by these names in
// sim/driver/model_registry.h, as the network models are.
enum class ComputeModel { kAuto, kRoofline, kPipeMoeAlphaBeta };
std::string_view to_string(ComputeModel m);
std::optional<ComputeModel> parse_compute_model(std::string_view s);
std::vector<std::string> compute_model_names();

// The all-to-all algorithm of the MoE layer's dispatch and combine under the flow model:
// pairwise (NCCL's grouped send/recv) or 2dh (Tutel's hierarchical all-to-all).
enum class AllToAllAlgorithm { kPairwise, kHierarchical };
std::string_view to_string(AllToAllAlgorithm a);
std::optional<AllToAllAlgorithm> parse_all_to_all_algorithm(std::string_view s);
std::vector<std::string> all_to_all_algorithm_names();

// Activation checkpointing of each MoE layer (DeepSpeed-TED, reference section 5): none keeps the
// layer's activations for backward; full keeps only its input and re-runs its forward before its
// backward, all-to-alls included (6 all-to-alls per layer and step); cac, TED's
// communication-aware checkpointing, also stashes what the dispatch and combine all-to-alls
// received, so the re-run sends nothing through them (4 all-to-alls).
enum class ActivationCheckpointing { kNone, kFull, kCommAware };
std::string_view to_string(ActivationCheckpointing c);
std::optional<ActivationCheckpointing> parse_activation_checkpointing(std::string_view s);
std::vector<std::string> activation_checkpointing_names();

}  // namespace moesim
