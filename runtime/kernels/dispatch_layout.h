// Row layout of the source-side dispatch tensor [E, C, M] as the runtime stores it: chunk-major,
// so that chunk c (slots [c*C/n, (c+1)*C/n) of every expert, Tutel's split) is one contiguous
// block [E, C/n, M], and within it the rows for the experts of peer q (E_l = E/R consecutive
// experts) are contiguous too: the block an all-to-all sends to q.
//   row(e, slot) = (c * E + e) * (C/n) + slot % (C/n),  c = slot / (C/n)
// The CPU reference numbers rows e*C + slot; reference_row maps one to the other. Plain C++17,
// usable from device code through MOESIM_HOST_DEVICE.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define MOESIM_HOST_DEVICE __host__ __device__
#else
#define MOESIM_HOST_DEVICE
#endif

namespace moesim::runtime {

MOESIM_HOST_DEVICE inline std::int64_t dispatch_row(std::int64_t expert, std::int64_t slot, std::int64_t experts,
                                                    std::int64_t capacity, std::int64_t chunks) {
  const std::int64_t per_chunk = capacity / chunks;
  const std::int64_t c = slot / per_chunk;
  return (c * experts + expert) * per_chunk + slot % per_chunk;
}

// The reference's row e*C + slot of the runtime's row `row`.
MOESIM_HOST_DEVICE inline std::int64_t reference_row(std::int64_t row, std::int64_t experts, std::int64_t capacity,
                                                     std::int64_t chunks) {
  const std::int64_t per_chunk = capacity / chunks;
  const std::int64_t within = row % per_chunk;
  const std::int64_t e = (row / per_chunk) % experts;
  const std::int64_t c = row / (per_chunk * experts);
  return e * capacity + c * per_chunk + within;
}

}  // namespace moesim::runtime
