// How a communication kernel of a few CTAs shares one GPU with GEMMs on another stream, at normal
// and at high stream priority (runtime/bench/sm_share_probe.h says what is measured and why).
// Needs a GPU; `gpu_session.sh run bench` runs it.
//
//   moesim_sm_share_probe [--reps N] [--factors | --shapes | --waves | --batched]   (N in 1..100,
//                                                                             default 7)
//
// --factors: the interference table's communication cells instead (run_sm_share_factors);
// --shapes: the computation cell by GEMM shape, --waves: by tiles per CTA, --batched: of
// strided-batched launches (run_sm_share_shapes).
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>

#include "runtime/bench/sm_share_probe.h"

int main(int argc, char** argv) {
  moesim::runtime::SmShareOptions options;
  bool factors = false, shapes = false, waves = false, batched = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--factors") == 0) {
      factors = true;
    } else if (std::strcmp(argv[i], "--shapes") == 0) {
      shapes = true;
    } else if (std::strcmp(argv[i], "--waves") == 0) {
      waves = true;
    } else if (std::strcmp(argv[i], "--batched") == 0) {
      batched = true;
    } else if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      char* end = nullptr;
      const long reps = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || reps < 1 || reps > 100) {
        std::cerr << "moesim_sm_share_probe: --reps must be an integer in 1..100, got '" << argv[i] << "'\n";
        return 2;
      }
      options.repetitions = static_cast<int>(reps);
    } else {
      std::cerr << "moesim_sm_share_probe: unknown argument '" << argv[i] << "' (usage: moesim_sm_share_probe [--reps N] [--factors | --shapes | --waves | --batched])\n";
      return 2;
    }
  }
  try {
    if (factors + shapes + waves + batched > 1) {
      std::cerr << "moesim_sm_share_probe: --factors, --shapes, --waves and --batched are separate runs; give one\n";
      return 2;
    }
    using moesim::runtime::ShapeSweep;
    if (shapes || waves || batched)
      moesim::runtime::run_sm_share_shapes(
          options, waves ? ShapeSweep::kWaves : (batched ? ShapeSweep::kBatched : ShapeSweep::kShapes), std::cout);
    else if (factors)
      moesim::runtime::run_sm_share_factors(options, std::cout);
    else
      moesim::runtime::run_sm_share_probe(options, std::cout);
  } catch (const std::exception& e) {
    std::cerr << "moesim_sm_share_probe: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
