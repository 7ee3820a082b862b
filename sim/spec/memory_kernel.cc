#include "sim/spec/memory_kernel.h"

namespace moesim {

std::string_view to_string(MemoryKernel k) {
  switch (k) {
    case MemoryKernel::kRouteFwd: return "route_fwd";
    case MemoryKernel::kRouteBwd: return "route_bwd";
    case MemoryKernel::kEncodeFwd: return "encode_fwd";
    case MemoryKernel::kEncodeBwd: return "encode_bwd";
    case MemoryKernel::kActFwd: return "act_fwd";
    case MemoryKernel::kActBwd: return "act_bwd";
    case MemoryKernel::kDecodeFwd: return "decode_fwd";
    case MemoryKernel::kDecodeBwd: return "decode_bwd";
  }
  return "?";
}

std::optional<MemoryKernel> parse_memory_kernel(std::string_view s) {
  for (MemoryKernel k : kMemoryKernels)
    if (to_string(k) == s) return k;
  return std::nullopt;
}

}  // namespace moesim
