#include "sim/build/memory_kernel_traffic.h"

#include "sim/core/checked_math.h"

namespace moesim {

ElementwiseWork memory_kernel_traffic(MemoryKernel k, const KernelShape& s, int element_bytes) {
  const std::int64_t be = checked_mul(s.tokens, s.experts);
  const std::int64_t bk = checked_mul(s.tokens, s.top_k);
  const std::int64_t bm = checked_mul(s.tokens, s.d_model);
  const std::int64_t sent = checked_mul(s.rows, s.d_model);
  const std::int64_t rf = checked_mul(s.rows, s.fc1_out);
  const std::int64_t rh = checked_mul(s.rows, s.hidden);
  // Elements read, written, and FLOPs, as the MoE block counts them (sim/build/moe_layer_forward.cc, moe_layer_backward.cc).
  std::int64_t read = 0, written = 0, flops = 0;
  switch (k) {
    case MemoryKernel::kRouteFwd: read = be, written = be + 2 * bk, flops = 4 * be; break;
    case MemoryKernel::kRouteBwd: read = be + bk, written = be, flops = 4 * be; break;
    case MemoryKernel::kEncodeFwd: read = bm, written = sent, flops = 0; break;
    case MemoryKernel::kEncodeBwd: read = sent, written = bm, flops = sent; break;
    case MemoryKernel::kActFwd: read = rf, written = rh, flops = rh; break;
    case MemoryKernel::kActBwd: read = rh + rf, written = rf, flops = rf; break;
    case MemoryKernel::kDecodeFwd: read = sent + bk, written = bm, flops = checked_mul(2 * bk, s.d_model); break;
    case MemoryKernel::kDecodeBwd: read = bm + sent + bk, written = sent + bk, flops = checked_mul(4 * bk, s.d_model); break;
  }
  return ElementwiseWork{checked_mul(read, element_bytes), checked_mul(written, element_bytes), flops};
}

}  // namespace moesim
