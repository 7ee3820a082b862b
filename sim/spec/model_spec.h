// ModelSpec: the MoE model whose layer is simulated (models/*.yaml).
//
// Notation follows MPipeMoE (IPDPS'23) Table I: M = d_model, H = d_ffn, E = num_experts, k = top_k,
// f = capacity_factor. A swiglu activation doubles FC1's output width (gate and up projections).
#pragma once

#include <cstdint>
#include <string>

#include "sim/core/error.h"
#include "sim/spec/types.h"

namespace moesim {

struct SharedExpertSpec {
  int count = 0;            // dense experts every token passes through (DeepSeek-style); 0 = none
  std::int64_t d_ffn = 0;   // hidden size of each shared expert
};

struct ModelSpec {
  std::string name;
  SourceLocation origin;          // the file it was read from
  std::int64_t d_model = 0;       // M
  std::int64_t d_ffn = 0;         // H, hidden size of one routed expert
  int num_experts = 0;            // E
  int top_k = 1;                  // k
  double capacity_factor = 1.0;   // f
  DType dtype = DType::kFp32;     // storage type of activations and parameters
  DType gemm_dtype = DType::kFp32;  // math mode of GEMMs (tf32 on fp32 storage, as PyTorch 1.7-1.11)
  Activation activation = Activation::kGelu;
  int num_layers = 1;             // layers of the whole model (memory accounting); MoE layers simulated come from RunSpec
  SharedExpertSpec shared_experts;

  int element_bytes() const { return dtype_bytes(dtype); }
  // Width of FC1's output (T_M before the activation).
  std::int64_t fc1_out_dim() const { return activation == Activation::kSwiglu ? 2 * d_ffn : d_ffn; }
};

}  // namespace moesim
