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

struct BenchOptions {
  std::int64_t tokens = 16384;
  int chunks = 1, iters = 20, warmup = 5;
  std::string strategy = "none";
};

BenchOptions parse_options(int argc, char** argv) {
  BenchOptions o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--tokens") o.tokens = std::atoll(value.c_str());
    else if (flag == "--chunks") o.chunks = std::atoi(value.c_str());
    else if (flag == "--iters") o.iters = std::atoi(value.c_str());
    else if (flag == "--warmup") o.warmup = std::atoi(value.c_str());
    else if (flag == "--strategy") o.strategy = value;
    else throw InputError("unknown flag " + flag);
  }
  return o;
}

// MoE-GPT-XL with 4 local experts on one GPU, in bf16, and its run at the options.
struct BenchSetup {
  ModelSpec model;
  ClusterSpec cluster;
  RunSpec run;
};

BenchSetup bench_setup(const BenchOptions& o) {
  const char* env = std::getenv("MOESIM_SOURCE_DIR");
  const std::string root = env != nullptr ? env : MOESIM_SOURCE_DIR;
  BenchSetup s;
  s.model = load_model_spec(root + "/models/moe-gpt-xl-16e.yaml");
  s.model.num_experts = 4;  // 4 local experts on one GPU
  s.model.dtype = s.model.gemm_dtype = DType::kBf16;
  s.cluster = load_hardware_spec(root + "/hardware/clusters/adira-8x-dgx-a100.yaml");
  s.run.tokens_per_gpu = o.tokens;
  s.run.ep_size = 1;
  s.run.num_chunks = o.chunks;
  const auto st = parse_memory_strategy(o.strategy);
  if (!st) throw InputError("unknown strategy " + o.strategy);
  s.run.strategy = *st;
  return s;
}

// Step times (us) of the whole layer under the executor.
std::vector<double> time_layer(const TaskGraph& graph, const ModelSpec& model, const LayerDims& dims,
                               DeviceOps& dev, Transport& transport, const BenchOptions& o) {
  std::vector<double> layer_us;
  LayerExecutor exec(graph, model, dims, {{0, &dev}}, transport);
  exec.initialize();
  for (int i = 0; i < o.warmup; ++i) exec.run_step();
  for (int i = 0; i < o.iters; ++i) layer_us.push_back(static_cast<double>(exec.run_step().makespan_ns()) / 1e3);
  return layer_us;
}

std::vector<GemmWork> graph_gemms(const TaskGraph& graph) {
  std::vector<GemmWork> gemms;
  for (TaskIndex i = 0; i < graph.num_tasks(); ++i)
    if (const auto* g = std::get_if<GemmWork>(&graph.task(i).work)) gemms.push_back(*g);
  return gemms;
}

// Untransposed row-major operands on the scratch buffers a, b, c.
GemmArgs scratch_gemm(const GemmWork& g, void* a, void* b, void* c) {
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
  return args;
}

// Times (us) of the GEMMs alone, back to back on one stream, on scratch buffers as large as the
// largest operands.
std::vector<double> time_gemms_alone(const std::vector<GemmWork>& gemms, DeviceOps& dev, const BenchOptions& o) {
  std::int64_t a_max = 0, b_max = 0, c_max = 0;
  for (const GemmWork& g : gemms) {
    a_max = std::max(a_max, g.batch * g.m * g.k);
    b_max = std::max(b_max, g.batch * g.k * g.n);
    c_max = std::max(c_max, g.batch * g.m * g.n);
  }
  const int stream = dev.create_stream();
  const int e0 = dev.create_event(true), e1 = dev.create_event(true);
  void* a = dev.alloc_device(a_max * 2, "bench A");
  void* b = dev.alloc_device(b_max * 2, "bench B");
  void* c = dev.alloc_device(c_max * 2, "bench C");
  dev.fill(FillArgs{a, a_max, 1, 1.0, Storage::kBf16}, stream);
  dev.fill(FillArgs{b, b_max, 2, 0.02, Storage::kBf16}, stream);
  std::vector<double> gemm_us;
  for (int it = 0; it < o.warmup + o.iters; ++it) {
    dev.record(e0, stream);
    for (const GemmWork& g : gemms) dev.gemm(scratch_gemm(g, a, b, c), stream);
    dev.record(e1, stream);
    dev.synchronize();
    if (it >= o.warmup) gemm_us.push_back(static_cast<double>(dev.elapsed_ms(e0, e1)) * 1e3);
  }
  dev.free_device(a);
  dev.free_device(b);
  dev.free_device(c);
  return gemm_us;
}

int bench_main(int argc, char** argv) {
  const BenchOptions o = parse_options(argc, argv);
  const BenchSetup s = bench_setup(o);
  BuildOptions options;
  options.representative_rank = false;
  const TaskGraph graph = build_moe_graph(s.model, s.cluster, s.run, options);
  const LayerDims dims = derive_layer_dims(s.model, s.cluster, s.run);

  auto provider = make_cuda_provider();
  if (!provider->unavailable_reason().empty()) {
    std::cerr << "no GPU: " << provider->unavailable_reason() << "\n";
    return 2;
  }
  std::unique_ptr<DeviceOps> dev = provider->open(0);
  LoopbackTransport transport(*dev, 1);
  const std::vector<double> layer_us = time_layer(graph, s.model, dims, *dev, transport, o);
  const std::vector<GemmWork> gemms = graph_gemms(graph);
  const std::vector<double> gemm_us = time_gemms_alone(gemms, *dev, o);

  const Stats l = stats(layer_us), g = stats(gemm_us);
  std::cout << "# moe_layer_gpu: " << provider->describe(0) << "\n"
            << "# MoE-GPT-XL M=" << dims.d_model << " H=" << dims.d_ffn << ", " << dims.local_experts
            << " local experts, B=" << o.tokens << ", bf16, n=" << o.chunks << ", strategy " << o.strategy << ", "
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
