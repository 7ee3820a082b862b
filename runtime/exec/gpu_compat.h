// Whether a GPU can run what this build asks of it, decided before the first kernel or GEMM so
// that a mismatch is a readable input error instead of CUDA's "no kernel image is available" or a
// silently different computation.
#pragma once

#include <string>

namespace moesim::runtime {

// Whether device code built for `architectures` (CMAKE_CUDA_ARCHITECTURES, entries separated by
// ';' or ',': "80;90", "80-real,90-virtual", "90a") runs on a GPU of compute capability
// major.minor. Machine code for sm_XY runs on X.Y and later minors of major X (an "a" variant only
// on X.Y itself); PTX for compute_XY is compiled by the driver for X.Y and anything later. A plain
// entry carries both, "-real" the machine code, "-virtual" the PTX. Empty when the code runs, or
// when the list cannot be judged ("all", "native", empty); otherwise why not and how to build for
// the GPU. `gpu` names it in the message ("GPU 0 (Tesla V100-SXM2-16GB)").
std::string architecture_mismatch(const std::string& architectures, int major, int minor, const std::string& gpu);

// TF32 GEMMs need the tensor cores of compute capability 8.0 or later; cuBLAS would silently run
// fp32 instead, and the measurement would be labelled with the wrong dtype. Empty when supported.
std::string tf32_unsupported(int major, int minor, const std::string& gpu);

}  // namespace moesim::runtime
