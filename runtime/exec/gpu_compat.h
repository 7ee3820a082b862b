// What the GPU runtime says when a GPU cannot run what this build asks of it, decided before the
// first kernel or GEMM so that a mismatch is a readable input error instead of CUDA's "no kernel
// image is available" at the first launch, or a silently different computation.
#pragma once

#include <string>

// Declared, not included: cuda_device.cu includes this header, and nvcc cannot compile the
// simulator's specs (C++20 defaulted friend comparisons).
namespace moesim {
struct LayerDims;
}  // namespace moesim

namespace moesim::runtime {

// The driver found no machine code or PTX in this build for `gpu` (compute capability
// major.minor): why, and how to build for it. `architectures` is CMAKE_CUDA_ARCHITECTURES as built
// (entries separated by ',' or ';'), `driver_error` the driver's answer, and `toolkit_13` whether
// the build's CUDA is 13 or later (which cannot target compute capability below 7.5).
std::string no_kernel_image_message(const std::string& gpu, int major, int minor, const std::string& architectures,
                                    const std::string& driver_error, bool toolkit_13);

// TF32 GEMMs need the tensor cores of compute capability 8.0 or later; cuBLAS would silently run
// fp32 instead, and the measurement would be labelled with the wrong dtype. Empty when supported.
std::string tf32_unsupported(int major, int minor, const std::string& gpu);

// The runtime lays every chunk out with C/n rows per (expert, source): it runs the layers whose
// capacity C the n chunks divide. The simulator also splits other C unevenly (chunk sizes differ
// by one); the runtime does not yet, and says so (InputError) instead of computing other sizes
// than the graph it is asked to run.
void check_equal_chunks(const LayerDims& dims);

}  // namespace moesim::runtime
