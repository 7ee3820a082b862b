// Model-state sizes: MPipeMoE Eq. 1 in fp32 and the mixed-precision (ZeRO) accounting.
#include "sim/build/memory_sizes.h"

#include <gtest/gtest.h>

namespace moesim {
namespace {

LayerDims dims_for(std::int64_t M, std::int64_t H, int E, int local, bool swiglu = false) {
  LayerDims d;
  d.d_model = M;
  d.d_ffn = H;
  d.fc1_out = swiglu ? 2 * H : H;
  d.num_experts = E;
  d.local_experts = local;
  return d;
}

ModelSpec model_with(DType dtype) {
  ModelSpec m;
  m.dtype = dtype;
  return m;
}

TEST(MemorySizes, Fp32AdamIsEquationOne) {
  // MoE-GPT-S, one local expert: M_ms = 4 (E*M + 2*H*M) elements of 4 bytes.
  const std::int64_t M = 768, H = 3072, E = 64;
  const ModelStateBytes s = layer_model_state_bytes(model_with(DType::kFp32), dims_for(M, H, E, 1), Optimizer::kAdam);
  EXPECT_EQ(s.parameters, E * M + 2 * H * M);
  EXPECT_EQ(s.total(), 4 * (E * M + 2 * H * M) * 4);
  EXPECT_EQ(s.param_bytes, s.parameters * 4);
  EXPECT_EQ(s.grad_bytes, s.parameters * 4);
  EXPECT_EQ(s.optimizer_bytes, s.parameters * 8);
}

TEST(MemorySizes, MixedPrecisionIsSixteenBytesPerParameterWithAdam) {
  const LayerDims d = dims_for(1024, 4096, 16, 4);
  const std::int64_t params = 16 * 1024 + 4 * 2 * 1024 * 4096;
  const ModelStateBytes bf16 = layer_model_state_bytes(model_with(DType::kBf16), d, Optimizer::kAdam);
  EXPECT_EQ(bf16.parameters, params);
  EXPECT_EQ(bf16.param_bytes, 2 * params);
  EXPECT_EQ(bf16.grad_bytes, 2 * params);
  EXPECT_EQ(bf16.optimizer_bytes, 12 * params);  // fp32 master + m + v
  EXPECT_EQ(bf16.total(), 16 * params);
  EXPECT_EQ(layer_model_state_bytes(model_with(DType::kFp16), d, Optimizer::kSgd).total(), 8 * params);
  EXPECT_EQ(layer_model_state_bytes(model_with(DType::kFp32), d, Optimizer::kMomentum).total(), 12 * params);
}

TEST(MemorySizes, SwigluAndSharedExpertsCount) {
  ModelSpec m = model_with(DType::kBf16);
  m.activation = Activation::kSwiglu;
  m.shared_experts = {1, 2048};
  const std::int64_t M = 7168;
  const LayerDims d = dims_for(M, 2048, 256, 4, true);
  // gate E*M + 4 experts (M*2H + H*M) + shared (M*2*2048 + 2048*M).
  const std::int64_t params = 256 * M + 4 * (M * 4096 + 2048 * M) + (M * 4096 + 2048 * M);
  EXPECT_EQ(layer_model_state_bytes(m, d, Optimizer::kAdam).parameters, params);
}

// DeepSpeed-TED: each tensor-parallel rank holds 1/t of every expert and shared expert, the gate
// whole; ZeRO-1 shards the optimizer part over the data-parallel group of the parameters.
TEST(MemorySizes, TensorParallelSlicesAndZeroOneShards) {
  ModelSpec m = model_with(DType::kBf16);
  m.shared_experts = {1, 4096};
  const std::int64_t M = 1024, H = 4096, E = 16;
  LayerDims d = dims_for(M, H, E, 4);  // ep 4 -> 4 local experts
  d.ep_size = 4;
  d.tp_size = 2;
  d.dp_size = 2;  // tp 2 x ep 4 x dp 2 = 16 GPUs
  const std::int64_t experts = 4 * (M * H + H * M) / 2;
  const std::int64_t dense = E * M + (M * 4096 + 4096 * M) / 2;
  const ModelStateBytes s = layer_model_state_bytes(m, d, Optimizer::kAdam);
  EXPECT_EQ(s.parameters, experts + dense);
  EXPECT_EQ(s.expert_parameters, experts);
  EXPECT_EQ(s.expert_grad_bytes(), 2 * experts);
  EXPECT_EQ(s.dense_grad_bytes(), 2 * dense);
  EXPECT_EQ(s.total(), 16 * (experts + dense));
  // ZeRO-1: 12 bytes per parameter of optimizer part, the experts' over dp = 2, the rest over
  // ep x dp = 8 ranks (rounded up to whole bytes per rank).
  const ModelStateBytes z = layer_model_state_bytes(m, d, Optimizer::kAdam, 1);
  EXPECT_EQ(z.param_bytes, s.param_bytes);
  EXPECT_EQ(z.grad_bytes, s.grad_bytes);
  EXPECT_EQ(z.optimizer_bytes, 12 * experts / 2 + (12 * dense + 7) / 8);
  // Without replicas there is nothing to shard the experts' states over.
  d.dp_size = 1;
  EXPECT_EQ(layer_model_state_bytes(m, d, Optimizer::kAdam, 1).optimizer_bytes, 12 * experts + (12 * dense + 3) / 4);
  // fp32 SGD keeps no optimizer state to shard.
  EXPECT_EQ(layer_model_state_bytes(model_with(DType::kFp32), d, Optimizer::kSgd, 1).optimizer_bytes, 0);
}

}  // namespace
}  // namespace moesim
