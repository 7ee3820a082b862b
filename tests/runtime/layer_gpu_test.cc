// The executor on a GPU against the CPU reference (docs/runtime.md tolerance table), bitwise
// equality of the memory strategies, the loopback transport's expert parallelism, and the measured
// memory next to the simulator's prediction. Label `gpu`: skipped without a GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "runtime/comm/loopback.h"
#include "runtime/comm/transport.h"
#include "runtime/exec/cuda_device.h"
#include "runtime/exec/layer_executor.h"
#include "runtime/exec/reference_check.h"
#include "sim/core/error.h"
#include "sim/driver/simulation.h"
#include "sim/spec/loader.h"

namespace moesim::runtime {
namespace {

// The source tree: $MOESIM_SOURCE_DIR on a machine the build was copied to, else where it was built.
ClusterSpec dgx() {
  const char* env = std::getenv("MOESIM_SOURCE_DIR");
  const std::string root = env != nullptr ? env : MOESIM_SOURCE_DIR;
  return load_hardware_spec(root + "/hardware/clusters/adira-8x-dgx-a100.yaml");
}

ModelSpec small_model(int experts, int top_k, DType storage, DType gemm, Activation act = Activation::kGelu) {
  ModelSpec m;
  m.name = "small";
  m.d_model = 64;
  m.d_ffn = 128;
  m.num_experts = experts;
  m.top_k = top_k;
  m.dtype = storage;
  m.gemm_dtype = gemm;
  m.activation = act;
  return m;
}

struct GpuRun {
  std::vector<RankValues> values;
  CheckReport check;
  RankMemoryUse memory;
  std::int64_t simulated_peak = 0;
};

// How the ranks exchange tokens: loopback puts every rank on GPU 0; NCCL gives rank r GPU r.
enum class Comm { kLoopback, kNccl };

GpuRun run_on_gpu(const ModelSpec& model, int ranks, int chunks, MemoryStrategy strategy, std::int64_t tokens,
                  int layers = 1, Comm comm = Comm::kLoopback) {
  RunSpec run;
  run.num_moe_layers = layers;
  run.tokens_per_gpu = tokens;
  run.ep_size = ranks;
  run.num_chunks = chunks;
  run.strategy = strategy;
  const ClusterSpec cluster = dgx();
  BuildOptions options;
  options.representative_rank = false;
  const TaskGraph graph = build_moe_graph(model, cluster, run, options);
  const LayerDims dims = derive_layer_dims(model, cluster, run);
  auto provider = make_cuda_provider();
  std::vector<std::unique_ptr<DeviceOps>> devices;
  std::vector<DeviceOps*> raw;
  std::vector<ExecutorRank> local;
  for (int r = 0; r < ranks; ++r) {
    if (r == 0 || comm == Comm::kNccl) devices.push_back(provider->open(r));
    raw.push_back(devices.back().get());
    local.push_back(ExecutorRank{r, raw.back()});
  }
  const std::unique_ptr<Transport> transport = comm == Comm::kNccl ? provider->multi_device_transport(raw)
                                                                   : std::make_unique<LoopbackTransport>(*raw[0], ranks);
  GpuRun out;
  {
    LayerExecutor exec(graph, model, dims, local, *transport);
    exec.initialize();
    exec.run_step();
    exec.scramble(99);  // a task that ran before its input was written would read noise
    exec.run_step();
    out.check = check_against_reference(exec, model, dims);
    for (int r = 0; r < ranks; ++r) out.values.push_back(exec.download(r));
    out.memory = exec.memory(0);
  }
  const EngineRun sim = simulate_graph(graph, cluster);
  out.simulated_peak = sim.memory.front().peak_device_bytes;
  return out;
}

void expect_ok(const GpuRun& run, const std::string& label) {
  for (const CheckEntry& e : run.check.entries)
    EXPECT_TRUE(e.ok()) << label << ": " << e.tensor << " " << e.relative << " > " << e.tolerance
                        << " (top-k margin " << run.check.topk_margin << ")";
}

const MemoryStrategy kStrategies[] = {MemoryStrategy::kNone, MemoryStrategy::kS1, MemoryStrategy::kS2,
                                      MemoryStrategy::kS3, MemoryStrategy::kS4};

TEST(LayerGpu, MatchesTheReferenceForEveryDtypeChunkCountAndStrategy) {
  MOESIM_REQUIRE_GPU_OR_SKIP();
  const std::pair<DType, DType> dtypes[] = {{DType::kFp32, DType::kFp32}, {DType::kFp32, DType::kTf32},
                                            {DType::kBf16, DType::kBf16}, {DType::kFp16, DType::kFp16}};
  for (const auto& [storage, gemm] : dtypes)
    for (int chunks : {1, 2, 4, 8})
      for (MemoryStrategy st : kStrategies) {
        const std::string label = std::string(to_string(gemm)) + " n" + std::to_string(chunks) + " " +
                                  std::string(to_string(st));
        expect_ok(run_on_gpu(small_model(8, 2, storage, gemm), 2, chunks, st, 128), label);
      }
}

TEST(LayerGpu, StrategiesGiveBitwiseIdenticalResults) {
  MOESIM_REQUIRE_GPU_OR_SKIP();
  for (int chunks : {1, 2, 4, 8}) {
    const GpuRun base = run_on_gpu(small_model(8, 2, DType::kBf16, DType::kBf16), 2, chunks, MemoryStrategy::kNone, 128);
    for (MemoryStrategy st : kStrategies) {
      const GpuRun other = run_on_gpu(small_model(8, 2, DType::kBf16, DType::kBf16), 2, chunks, st, 128);
      for (std::size_t r = 0; r < base.values.size(); ++r) {
        EXPECT_EQ(base.values[r].y, other.values[r].y) << "n" << chunks << " " << to_string(st);
        EXPECT_EQ(base.values[r].dx, other.values[r].dx) << "n" << chunks << " " << to_string(st);
        EXPECT_EQ(base.values[r].dw1, other.values[r].dw1) << "n" << chunks << " " << to_string(st);
        EXPECT_EQ(base.values[r].dw2, other.values[r].dw2) << "n" << chunks << " " << to_string(st);
        EXPECT_EQ(base.values[r].dgate, other.values[r].dgate) << "n" << chunks << " " << to_string(st);
      }
    }
  }
}

// relu and swiglu (FC1 2H wide, its own dA buffer, 2H-wide restores) in fp32 and bf16.
TEST(LayerGpu, OtherActivationsMatchTheReferenceWithEveryStrategy) {
  MOESIM_REQUIRE_GPU_OR_SKIP();
  for (Activation act : {Activation::kRelu, Activation::kSwiglu})
    for (DType dtype : {DType::kFp32, DType::kBf16})
      for (MemoryStrategy st : kStrategies) {
        const std::string label = std::string(to_string(act)) + " " + std::string(to_string(dtype)) + " n4 " +
                                  std::string(to_string(st));
        expect_ok(run_on_gpu(small_model(8, 2, dtype, dtype, act), 2, 4, st, 128), label);
      }
}

// A shared expert next to the routed ones, bf16 and swiglu, every strategy.
TEST(LayerGpu, SharedExpertsMatchTheReference) {
  MOESIM_REQUIRE_GPU_OR_SKIP();
  ModelSpec model = small_model(8, 2, DType::kBf16, DType::kBf16, Activation::kSwiglu);
  model.shared_experts.count = 1;
  model.shared_experts.d_ffn = 96;
  for (MemoryStrategy st : kStrategies) expect_ok(run_on_gpu(model, 2, 4, st, 128), "shared " + std::string(to_string(st)));
}

// Three layers back to back, each checked from the inputs its device holds.
TEST(LayerGpu, StackedLayersMatchTheReferenceLayerByLayer) {
  MOESIM_REQUIRE_GPU_OR_SKIP();
  for (MemoryStrategy st : {MemoryStrategy::kNone, MemoryStrategy::kS1, MemoryStrategy::kS4})
    expect_ok(run_on_gpu(small_model(8, 2, DType::kBf16, DType::kBf16), 2, 2, st, 128, 3),
              "3 layers " + std::string(to_string(st)));
}

TEST(LayerGpu, SixtyFourExpertsOverEightLoopbackRanksEqualOneRank) {
  MOESIM_REQUIRE_GPU_OR_SKIP();
  const ModelSpec model = small_model(64, 1, DType::kFp32, DType::kFp32);
  expect_ok(run_on_gpu(model, 8, 1, MemoryStrategy::kNone, 256), "R8");
  expect_ok(run_on_gpu(model, 1, 1, MemoryStrategy::kNone, 256), "R1");
}

// 2,048 experts and top-16 (route, router gradient and the sort-based capacity assignment at sizes
// the earlier kernels refused), with tokens dropped on every rank.
TEST(LayerGpu, ThousandsOfExpertsAndTopSixteenMatchTheReference) {
  MOESIM_REQUIRE_GPU_OR_SKIP();
  for (DType dtype : {DType::kFp32, DType::kBf16})
    for (MemoryStrategy st : {MemoryStrategy::kNone, MemoryStrategy::kS4}) {
      const GpuRun run = run_on_gpu(small_model(2048, 16, dtype, dtype), 2, 2, st, 256);
      const std::string label = "E2048 k16 " + std::string(to_string(dtype)) + " " + std::string(to_string(st));
      expect_ok(run, label);
      EXPECT_LE(run.check.ambiguous_tokens * 20, 2 * 256) << label << ": " << run.check.ambiguous_tokens;
    }
}

// NCCL's grouped send/recv against the loopback's device copies: one rank on this process's GPU
// always (a communicator of one, sending to itself), and 2, 4 or 8 ranks when that many GPUs are
// visible (ncclCommInitAll). Both run the same kernels on the same data, so on GPUs of one model
// the results must be bitwise identical. s2 re-runs the dispatch in backward (a third all-to-all).
TEST(LayerGpu, NcclTransportEqualsLoopbackBitwise) {
  MOESIM_REQUIRE_GPU_OR_SKIP();
  auto provider = make_cuda_provider();
  try {  // a build without NCCL refuses with InputError
    const std::unique_ptr<DeviceOps> device = provider->open(0);
    provider->multi_device_transport({device.get()});
  } catch (const InputError& e) {
    GTEST_SKIP() << e.what();
  }
  const int gpus = provider->num_devices();
  bool one_model = true;
  for (int g = 1; g < gpus; ++g) one_model = one_model && provider->describe(g) == provider->describe(0);
  const ModelSpec model = small_model(8, 2, DType::kBf16, DType::kBf16);
  for (int ranks : {1, 2, 4, 8}) {
    if (ranks > gpus) {
      std::cout << "NCCL with " << ranks << " ranks: not run, " << gpus << " GPU(s) visible\n";
      continue;
    }
    for (MemoryStrategy st : {MemoryStrategy::kNone, MemoryStrategy::kS2}) {
      const std::string label = "R" + std::to_string(ranks) + " " + std::string(to_string(st));
      const GpuRun nccl = run_on_gpu(model, ranks, 2, st, 128, 1, Comm::kNccl);
      expect_ok(nccl, "nccl " + label);
      if (!one_model) continue;
      const GpuRun loop = run_on_gpu(model, ranks, 2, st, 128, 1, Comm::kLoopback);
      for (int r = 0; r < ranks; ++r) {
        EXPECT_EQ(nccl.values[r].y, loop.values[r].y) << label << " rank " << r;
        EXPECT_EQ(nccl.values[r].dx, loop.values[r].dx) << label << " rank " << r;
        EXPECT_EQ(nccl.values[r].dw1, loop.values[r].dw1) << label << " rank " << r;
        EXPECT_EQ(nccl.values[r].dw2, loop.values[r].dw2) << label << " rank " << r;
        EXPECT_EQ(nccl.values[r].dgate, loop.values[r].dgate) << label << " rank " << r;
      }
    }
  }
}

TEST(LayerGpu, MeasuredMemoryNextToThePrediction) {
  MOESIM_REQUIRE_GPU_OR_SKIP();
  const ModelSpec model = small_model(8, 2, DType::kBf16, DType::kBf16);
  const GpuRun none = run_on_gpu(model, 1, 4, MemoryStrategy::kNone, 1024);
  const GpuRun s4 = run_on_gpu(model, 1, 4, MemoryStrategy::kS4, 1024);
  for (const GpuRun* r : {&none, &s4}) {
    EXPECT_GE(r->memory.arena_bytes, r->simulated_peak);  // plan_memory's guarantee
    EXPECT_GT(r->memory.library_bytes, 0);                // the cuBLAS workspace is counted
    std::cout << "arena " << r->memory.arena_bytes << " workspace " << r->memory.workspace_bytes << " cuBLAS "
              << r->memory.library_bytes << " simulated peak " << r->simulated_peak << "\n";
  }
  EXPECT_LT(s4.memory.arena_bytes, none.memory.arena_bytes);  // the reuse strategy's saving
}

}  // namespace
}  // namespace moesim::runtime
