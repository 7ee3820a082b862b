// Whether a GPU named by a measurement (nvidia-smi, an nccl-tests "#  Rank" line: "NVIDIA H100
// 80GB HBM3", "Tesla V100-SXM2-16GB") is the GPU a hardware preset describes ("H100-SXM5-80GB").
// A calibration fitted to one GPU's measurement and applied to another's preset would move the
// other's parameters by what the first GPU measured: `moesim calibrate --alltoall-log` refuses it.
//
// Names are compared by what both always carry: the chip (a letter and two to four digits, A100,
// H100, H200, V100, B200, L40), and the memory size (a number followed by GB) where both give
// one. Anything else (form factor, HBM generation, vendor prefix) is not compared, because the
// two sources spell it differently.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace moesim {

struct GpuIdentity {
  std::string chip;              // "H100"; "" when the name holds none
  std::optional<int> memory_gb;  // 80; none when the name gives no size
};

GpuIdentity identify_gpu(std::string_view name);

// "" when `measured` may be `preset`; else why not ("chip A100 is not H100", "80 GB is not 40 GB").
// A measured name without a recognisable chip is a mismatch too: nothing can be checked.
std::string gpu_mismatch(std::string_view measured, std::string_view preset);

}  // namespace moesim
