#include "runtime/exec/gpu_compat.h"

#include <algorithm>
#include <cstdint>

#include "sim/core/error.h"
#include "sim/build/layer_dims.h"

namespace moesim::runtime {

namespace {

std::string sm(int major, int minor) { return "sm_" + std::to_string(major) + std::to_string(minor); }

}  // namespace

std::string no_kernel_image_message(const std::string& gpu, int major, int minor, const std::string& architectures,
                                    const std::string& driver_error, bool toolkit_13) {
  std::string why = gpu + " is " + sm(major, minor) + ", and the driver cannot run this build's GPU code (" +
                    driver_error + "; built for CMAKE_CUDA_ARCHITECTURES " +
                    (architectures.empty() ? std::string("as set in CMAKE_CUDA_FLAGS") : architectures) +
                    "): reconfigure with -DCMAKE_CUDA_ARCHITECTURES=" + std::to_string(major) + std::to_string(minor) +
                    " and rebuild";
  if (toolkit_13 && major * 10 + minor < 75) why += " with CUDA 12 (CUDA 13 cannot target " + sm(major, minor) + ")";
  return why;
}

std::string tf32_unsupported(int major, int minor, const std::string& gpu) {
  if (major >= 8) return "";
  return "TF32 GEMMs need tensor cores of compute capability 8.0 or later, and " + gpu + " is " + sm(major, minor) +
         " (cuBLAS would run fp32 instead and the report would say tf32): use --dtype fp32";
}

void check_equal_chunks(const LayerDims& dims) {
  if (dims.even_chunks()) return;
  std::string divisors;
  for (std::int64_t n = 1; n <= std::min<std::int64_t>(dims.capacity, 64); ++n)
    if (dims.capacity % n == 0) divisors += (divisors.empty() ? "" : ", ") + std::to_string(n);
  throw InputError("the GPU runtime runs chunks of equal size, and the capacity C = " + std::to_string(dims.capacity) +
                   " slots per expert in n = " + std::to_string(dims.num_chunks) + " chunks (chunk_alignment " +
                   std::to_string(dims.chunk_alignment) + ") are not (the simulator splits C unevenly, the runtime "
                   "does not yet): use an n among " + divisors + (dims.capacity > 64 ? ", ..." : "") +
                   " with a chunk_alignment that divides C/n");
}

}  // namespace moesim::runtime
