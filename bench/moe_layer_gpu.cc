// GPU bench (needs a GPU; built with the runtime): one MoE layer, forward + backward, against the
// same layer's GEMMs run back to back alone on one stream (the lower bound the executor's overhead
// is judged by). Default: MoE-GPT-XL (M 2048, H 8192) with 4 local experts on one GPU, 16,384
// tokens, bf16, n = 1, strategy none.
//
//   moesim_moe_layer_gpu [--tokens 16384] [--chunks 1] [--strategy none] [--iters 20] [--warmup 5]
//
// Prints min / median / max of both, and their ratio (the target is <= 1.25). The GEMMs alone use
// the graph's GEMM shapes (batch x m x n x k) with untransposed operands on scratch buffers.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "runtime/comm/loopback.h"
#include "runtime/exec/cuda_device.h"
#include "runtime/exec/layer_executor.h"
#include "sim/core/error.h"
#include "sim/spec/loader.h"

namespace {

using namespace moesim;
using namespace moesim::runtime;

struct Stats {
  double min = 0, median = 0, max = 0;
};

Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return Stats{v.front(), v[v.size() / 2], v.back()};
}

int bench_main(int argc, char** argv) {
  std::int64_t tokens = 16384;
  int chunks = 1, iters = 20, warmup = 5;
  std::string strategy = "none";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--tokens") tokens = std::atoll(value.c_str());
    else if (flag == "--chunks") chunks = std::atoi(value.c_str());
    else if (flag == "--iters") iters = std::atoi(value.c_str());
    else if (flag == "--warmup") warmup = std::atoi(value.c_str());
    else if (flag == "--strategy") strategy = value;
    else throw InputError("unknown flag " + flag);
  }
  const char* env = std::getenv("MOESIM_SOURCE_DIR");
  const std::string root = env != nullptr ? env : MOESIM_SOURCE_DIR;
  ModelSpec model = load_model_spec(root + "/models/moe-gpt-xl-16e.yaml");
  model.num_experts = 4;  // 4 local experts on one GPU
  model.dtype = model.gemm_dtype = DType::kBf16;
  const ClusterSpec cluster = load_hardware_spec(root + "/hardware/clusters/adira-8x-dgx-a100.yaml");
  RunSpec run;
  run.tokens_per_gpu = tokens;
  run.ep_size = 1;
  run.num_chunks = chunks;
  const auto st = parse_memory_strategy(strategy);
  if (!st) throw InputError("unknown strategy " + strategy);
  run.strategy = *st;
  BuildOptions options;
  options.representative_rank = false;
  const TaskGraph graph = build_moe_graph(model, cluster, run, options);
  const LayerDims dims = derive_layer_dims(model, cluster, run);

  auto provider = make_cuda_provider();
  if (!provider->unavailable_reason().empty()) {
    std::cerr << "no GPU: " << provider->unavailable_reason() << "\n";
    return 2;
  }
  std::unique_ptr<DeviceOps> dev = provider->open(0);
  LoopbackTransport transport(*dev, 1);
  std::vector<double> layer_us;
  {
    LayerExecutor exec(graph, model, dims, {{0, dev.get()}}, transport);
    exec.initialize();
    for (int i = 0; i < warmup; ++i) exec.run_step();
    for (int i = 0; i < iters; ++i) layer_us.push_back(static_cast<double>(exec.run_step().makespan_ns()) / 1e3);
  }

  // The graph's GEMMs alone, back to back on one stream.
  std::vector<GemmWork> gemms;
  std::int64_t a_max = 0, b_max = 0, c_max = 0;
  for (TaskIndex i = 0; i < graph.num_tasks(); ++i)
    if (const auto* g = std::get_if<GemmWork>(&graph.task(i).work)) {
      gemms.push_back(*g);
      a_max = std::max(a_max, g->batch * g->m * g->k);
      b_max = std::max(b_max, g->batch * g->k * g->n);
      c_max = std::max(c_max, g->batch * g->m * g->n);
    }
  const int stream = dev->create_stream();
  const int e0 = dev->create_event(true), e1 = dev->create_event(true);
  void* a = dev->alloc_device(a_max * 2, "bench A");
  void* b = dev->alloc_device(b_max * 2, "bench B");
  void* c = dev->alloc_device(c_max * 2, "bench C");
  dev->fill(FillArgs{a, a_max, 1, 1.0, Storage::kBf16}, stream);
  dev->fill(FillArgs{b, b_max, 2, 0.02, Storage::kBf16}, stream);
  std::vector<double> gemm_us;
  for (int it = 0; it < warmup + iters; ++it) {
    dev->record(e0, stream);
    for (const GemmWork& g : gemms) {
      GemmArgs args;
      args.m = g.m;
      args.n = g.n;
      args.k = g.k;
      args.batch = g.batch;
      args.a = a;
      args.lda = g.k;
      args.stride_a = g.m * g.k;
      args.b = b;
      args.ldb = g.n;
      args.stride_b = g.k * g.n;
      args.c = c;
      args.ldc = g.n;
      args.stride_c = g.m * g.n;
      args.ab_type = args.c_type = Storage::kBf16;
      args.math = GemmMath::kHalf;
      dev->gemm(args, stream);
    }
    dev->record(e1, stream);
    dev->synchronize();
    if (it >= warmup) gemm_us.push_back(static_cast<double>(dev->elapsed_ms(e0, e1)) * 1e3);
  }
  dev->free_device(a);
  dev->free_device(b);
  dev->free_device(c);

  const Stats l = stats(layer_us), g = stats(gemm_us);
  std::cout << "# moe_layer_gpu: " << provider->describe(0) << "\n"
            << "# MoE-GPT-XL M=" << dims.d_model << " H=" << dims.d_ffn << ", " << dims.local_experts
            << " local experts, B=" << tokens << ", bf16, n=" << chunks << ", strategy " << strategy << ", "
            << gemms.size() << " GEMMs\n"
            << "layer fwd+bwd (us): min " << l.min << " median " << l.median << " max " << l.max << "\n"
            << "GEMMs alone  (us): min " << g.min << " median " << g.median << " max " << g.max << "\n"
            << "ratio (median): " << l.median / g.median << " (target <= 1.25)\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return bench_main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
}
