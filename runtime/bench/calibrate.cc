#include "runtime/bench/calibrate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "runtime/bench/calibrate_device_copies.h"
#include "runtime/bench/calibrate_kernels.h"
#include "runtime/bench/op_timer.h"
#include "sim/core/error.h"
#include "sim/spec/file_kind.h"
#include "sim/spec/yaml_text.h"

namespace moesim::runtime {
namespace {

void check_options(const CalibrationOptions& o) {
  if (o.dtypes.empty()) throw InputError("calibration: no dtype to measure GEMMs in");
  if (o.dims.empty()) throw InputError("calibration: the GEMM dimension list is empty");
  check_axis(o.dims, "GEMM dimension", "GEMM dimensions");
  // A batch of 1 is a single GEMM, which the gemm table measures.
  check_axis(o.batches, "GEMM batch", "GEMM batches", 2);
  if (!o.batches.empty() && o.batched_dims.empty())
    throw InputError("calibration: the batched GEMM dimension list is empty");
  check_axis(o.batched_dims, "batched GEMM dimension", "batched GEMM dimensions");
  if (!o.batches.empty() && o.batched_layouts.empty())
    throw InputError("calibration: batched GEMMs need at least one operand layout");
  check_kernel_options(o);
  check_device_copy_options(o);
  if (o.copy_bytes < 1024) throw InputError("calibration: the copy size must be at least 1 KiB");
  if (o.min_reps < 1 || o.max_reps < o.min_reps || o.warmup < 0 || !(o.min_time_ms >= 0))
    throw InputError("calibration: repetitions need 1 <= min_reps <= max_reps, warmup >= 0, min_time_ms >= 0");
}

constexpr std::int64_t kSmallCopyBytes = 64;  // a copy this small costs its latency only

// Latency and bandwidth of copies from `src` to `dst` (one pinned, one device buffer).
LinkSpec measure_copy(OpTimer& timer, DeviceOps& device, void* dst, const void* src, std::int64_t bytes) {
  const int s = timer.stream();
  const double small_ns = timer.per_op_ns([&] { device.copy(dst, src, kSmallCopyBytes, s); });
  const double large_ns = timer.per_op_ns([&] { device.copy(dst, src, bytes, s); });
  if (!(large_ns > small_ns)) {
    throw InternalError("calibration: a " + std::to_string(bytes) + "-byte copy took " + std::to_string(large_ns) +
                        " ns, no longer than a " + std::to_string(kSmallCopyBytes) + "-byte one (" +
                        std::to_string(small_ns) + " ns); the timing is not usable");
  }
  LinkSpec link;
  link.latency_ns = static_cast<TimeNs>(std::llround(small_ns));
  link.bandwidth = static_cast<double>(bytes) / (large_ns - small_ns) * 1e9;
  return link;
}

// A, B and C of `elems` elements each; A and B hold values like a layer's (not zeros: a GPU's
// power, and so its clock, depends on the data).
struct GemmBuffers {
  GemmBuffers(DeviceOps& device, std::int64_t elems, Storage storage, int stream)
      : a(device, elems * storage_bytes(storage), "calibration GEMM A"),
        b(device, elems * storage_bytes(storage), "calibration GEMM B"),
        c(device, elems * storage_bytes(storage), "calibration GEMM C") {
    device.fill(FillArgs{a.get(), elems, 1, 1.0, storage}, stream);
    device.fill(FillArgs{b.get(), elems, 2, 1.0, storage}, stream);
  }
  DeviceBuffer a, b, c;
};

GemmTimeTable measure_gemms(OpTimer& timer, DeviceOps& device, DType dtype, const CalibrationOptions& o) {
  const Storage storage = storage_of(dtype);
  const GemmBuffers buffers(device, o.dims.back() * o.dims.back(), storage, timer.stream());
  const DeviceBuffer &a = buffers.a, &b = buffers.b, &c = buffers.c;

  GemmTimeTable t;
  t.m = t.n = t.k = o.dims;
  const std::size_t total = o.dims.size() * o.dims.size() * o.dims.size();
  t.time_ns.reserve(total);
  const auto begin = std::chrono::steady_clock::now();
  std::size_t next_report = total / 10;
  for (std::int64_t m : t.m) {
    for (std::int64_t n : t.n) {
      for (std::int64_t k : t.k) {
        GemmArgs g;
        g.m = m;
        g.n = n;
        g.k = k;
        g.a = a.get();
        g.lda = k;
        g.b = b.get();
        g.ldb = n;
        g.c = c.get();
        g.ldc = n;
        g.ab_type = g.c_type = storage;
        g.math = math_of(dtype, dtype);
        t.time_ns.push_back(timer.per_op_ns([&] { device.gemm(g, timer.stream()); }));
        if (o.progress && t.time_ns.size() >= next_report && t.time_ns.size() < total) {
          const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
          o.progress(std::string(to_string(dtype)) + " GEMMs: " + std::to_string(t.time_ns.size()) + " of " +
                     std::to_string(total) + " shapes (" + std::to_string(static_cast<int>(s)) + " s)");
          next_report += std::max<std::size_t>(1, total / 10);
        }
      }
    }
  }
  return t;
}

// One strided-batched launch of batch x (m, n, k) in `layout`, row-major as the executor's expert
// GEMMs: each expert's matrices one after the other (strides m k, k n, m n); a transposed operand
// is stored k x m (A) or n x k (B), as the backward's weight and data gradients read them.
GemmArgs batched_gemm_args(GemmLayout layout, std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k) {
  GemmArgs g;
  g.trans_a = layout == GemmLayout::kTN;
  g.trans_b = layout == GemmLayout::kNT;
  g.m = m;
  g.n = n;
  g.k = k;
  g.batch = batch;
  g.lda = g.trans_a ? m : k;
  g.stride_a = m * k;
  g.ldb = g.trans_b ? k : n;
  g.stride_b = k * n;
  g.ldc = n;
  g.stride_c = m * n;
  return g;
}

// Every (batch, m, n, k) of the batched grid in one layout.
BatchedGemmTable measure_batched_gemms(OpTimer& timer, DeviceOps& device, DType dtype, GemmLayout layout,
                                       const CalibrationOptions& o) {
  const Storage storage = storage_of(dtype);
  const GemmBuffers buffers(device, o.batches.back() * o.batched_dims.back() * o.batched_dims.back(), storage,
                            timer.stream());
  const DeviceBuffer &a = buffers.a, &b = buffers.b, &c = buffers.c;
  BatchedGemmTable t;
  t.batch = o.batches;
  t.m = t.n = t.k = o.batched_dims;
  t.time_ns.reserve(t.batch.size() * t.m.size() * t.n.size() * t.k.size());
  for (std::int64_t batch : t.batch) {
    for (std::int64_t m : t.m) {
      for (std::int64_t n : t.n) {
        for (std::int64_t k : t.k) {
          GemmArgs g = batched_gemm_args(layout, batch, m, n, k);
          g.a = a.get();
          g.b = b.get();
          g.c = c.get();
          g.ab_type = g.c_type = storage;
          g.math = math_of(dtype, dtype);
          t.time_ns.push_back(timer.per_op_ns([&] { device.gemm(g, timer.stream()); }));
        }
      }
    }
    if (o.progress)
      o.progress(std::string(to_string(dtype)) + " " + std::string(to_string(layout)) + " batched GEMMs: batch " +
                 std::to_string(batch) + " done");
  }
  return t;
}

std::string list(const std::vector<std::int64_t>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

// The GEMM of the interference cells: square, at most 4096, in the first dtype measured.
GemmArgs interference_gemm(DType dtype, std::int64_t dim, void* a, void* b, void* c) {
  GemmArgs g;
  g.m = g.n = g.k = dim;
  g.a = a;
  g.lda = dim;
  g.b = b;
  g.ldb = dim;
  g.c = c;
  g.ldc = dim;
  g.ab_type = g.c_type = storage_of(dtype);
  g.math = math_of(dtype, dtype);
  return g;
}

// That GEMM with its buffers, for the interference cells and the device copies' probe.
struct InterferenceGemm {
  InterferenceGemm(DeviceOps& device, const CalibrationOptions& o, int stream)
      : dim(std::min<std::int64_t>(4096, o.dims.back())),
        buffers(device, dim * dim, storage_of(o.dtypes.front()), stream),
        args(interference_gemm(o.dtypes.front(), dim, buffers.a.get(), buffers.b.get(), buffers.c.get())) {}
  std::int64_t dim;
  GemmBuffers buffers;
  GemmArgs args;
};

std::vector<InterferenceCell> measure_interference(DeviceOps& device, OpTimer& timer, const CalibrationOptions& o,
                                                   const std::function<void(int)>& gemm, void* src, void* dst,
                                                   void* host) {
  OpTimer other(device, o);
  const auto h2d = [&](int stream) { device.copy(dst, host, o.copy_bytes, stream); };
  // Its own pinned destination: reading and writing one buffer from two streams would be a race.
  DeviceBuffer host_out(device, o.copy_bytes, "interference D2H destination", true);
  const auto d2h = [&](int stream) { device.copy(host_out.get(), src, o.copy_bytes, stream); };
  constexpr auto kComputation = InterferenceClass::kComputation;
  constexpr auto kMemcpy = InterferenceClass::kMemcpy;
  return {
      InterferenceCell{kComputation, static_cast<int>(kMemcpy), slowdown_factor(timer, gemm, other, h2d)},
      InterferenceCell{kMemcpy, static_cast<int>(kComputation), slowdown_factor(timer, h2d, other, gemm)},
      InterferenceCell{kMemcpy, static_cast<int>(kMemcpy), slowdown_factor(timer, h2d, other, d2h)},
  };
}

void write_batched_gemm_tables(std::ostream& y, GemmLayout layout, const std::map<DType, BatchedGemmTable>& tables) {
  if (!tables.empty())
    y << batched_gemm_section(layout) << ":  # strided-batched " << to_string(layout)
      << " GEMMs, one launch of `batch` GEMMs of m x n x k\n";
  for (const auto& [dtype, t] : tables) {
    y << "  " << to_string(dtype) << ":\n"
      << "    batch: " << list(t.batch) << "\n"
      << "    m: " << list(t.m) << "\n"
      << "    n: " << list(t.n) << "\n"
      << "    k: " << list(t.k) << "\n"
      << "    time_us:  # one row per (batch, m, n), batch-major then m; one time per k\n";
    for (std::size_t b = 0; b < t.batch.size(); ++b) {
      for (std::size_t i = 0; i < t.m.size(); ++i) {
        for (std::size_t j = 0; j < t.n.size(); ++j) {
          y << "      - [";
          for (std::size_t l = 0; l < t.k.size(); ++l)
            y << (l ? ", " : "") << yaml_fixed(t.time_ns[t.index(b, i, j, l)] / 1e3, 4);
          y << "]  # batch=" << t.batch[b] << " m=" << t.m[i] << " n=" << t.n[j] << "\n";
        }
      }
    }
  }
}

void write_kernel_figures(std::ostream& y, const std::map<DType, KernelFigures>& kernels) {
  if (kernels.empty()) return;
  y << "kernels:  # memory-bound kernels per storage: time = launch + bytes (as the task graph counts them) / bandwidth\n";
  for (const auto& [storage, figures] : kernels) {
    y << "  " << to_string(storage) << ":\n";
    for (const auto& [kernel, f] : figures) {
      y << "    " << to_string(kernel) << ": {launch: " << yaml_fixed(static_cast<double>(f.launch_ns) / 1e3, 3)
        << " us, bandwidth: " << yaml_fixed(f.bandwidth / 1e9, 3) << " GB/s}\n";
    }
  }
}

}  // namespace

std::size_t batched_table_count(const CalibrationMeasurement& m) {
  std::size_t n = 0;
  for (const auto& [layout, tables] : m.batched_gemm) n += tables.size();
  return n;
}

CalibrationMeasurement calibrate(DeviceOps& device, const CalibrationOptions& options) {
  check_options(options);
  const auto say = [&](const std::string& s) {
    if (options.progress) options.progress(s);
  };
  CalibrationMeasurement m;
  m.device = device.name();
  OpTimer timer(device, options);
  const int s = timer.stream();

  say("kernel launch gap");
  DeviceBuffer one(device, 4, "calibration launch probe");
  m.kernel_launch_ns = static_cast<TimeNs>(
      std::llround(timer.per_op_ns([&] { device.fill(FillArgs{one.get(), 1, 0, 1.0, Storage::kF32}, s); })));

  say("HBM and PCIe bandwidth (" + std::to_string(options.copy_bytes >> 20) + " MiB copies)");
  DeviceBuffer src(device, options.copy_bytes, "calibration copy source");
  DeviceBuffer dst(device, options.copy_bytes, "calibration copy destination");
  DeviceBuffer host(device, options.copy_bytes, "calibration pinned host buffer", true);
  device.zero(src.get(), options.copy_bytes, s);
  const double d2d_ns = timer.per_op_ns([&] { device.copy(dst.get(), src.get(), options.copy_bytes, s); });
  m.hbm_bandwidth = 2.0 * static_cast<double>(options.copy_bytes) / d2d_ns * 1e9;
  m.pcie_h2d = measure_copy(timer, device, dst.get(), host.get(), options.copy_bytes);
  m.pcie_d2h = measure_copy(timer, device, host.get(), src.get(), options.copy_bytes);

  {
    const InterferenceGemm gemm(device, options, s);
    const auto computation = [&](int stream) { device.gemm(gemm.args, stream); };
    say("interference (a GEMM and PCIe copies on two streams)");
    m.interference = measure_interference(device, timer, options, computation, src.get(), dst.get(), host.get());
    if (!options.loopback_ranks.empty()) {
      say("device-copy collectives (the loopback all-to-all of " + list(options.loopback_ranks) + " ranks at " +
          list(options.loopback_bytes) + " bytes per exchange)");
      m.device_copies = measure_device_copies(device, options, computation);
    }
  }

  for (DType dtype : options.dtypes) {
    say(std::string(to_string(dtype)) + " GEMMs: " + std::to_string(options.dims.size() * options.dims.size() * options.dims.size()) +
        " shapes, dimensions " + list(options.dims));
    m.gemm[dtype] = measure_gemms(timer, device, dtype, options);
    if (options.batches.empty()) continue;
    for (GemmLayout layout : options.batched_layouts) {
      say(std::string(to_string(dtype)) + " " + std::string(to_string(layout)) + " batched GEMMs: " +
          std::to_string(options.batches.size() * options.batched_dims.size() * options.batched_dims.size() *
                         options.batched_dims.size()) +
          " shapes, batches " + list(options.batches) + ", dimensions " + list(options.batched_dims));
      m.batched_gemm[layout][dtype] = measure_batched_gemms(timer, device, dtype, layout, options);
    }
  }
  if (!options.kernel_tokens.empty()) m.kernels = measure_kernels(device, options);
  return m;
}

std::string calibration_yaml(const CalibrationMeasurement& m, const std::string& gpu_name,
                             const std::string& provenance) {
  std::ostringstream y;
  y << "# Calibration of " << gpu_name << ", measured on " << m.device << ".\n"
    << "# " << provenance << "\n"
    << "# Written by `moesim calibrate`; docs/calibration.md says how each value is measured and used.\n"
    << "schema_version: " << kCalibrationSchemaVersion << "\n"
    << "kind: calibration\n"
    << "name: " << yaml_quoted(gpu_name + " calibration") << "\n"
    << "source: " << yaml_quoted(provenance) << "\n"
    << "gpu: " << yaml_quoted(gpu_name) << "\n"
    << "device: " << yaml_quoted(m.device) << "\n"
    << "kernel_launch_overhead: " << yaml_fixed(static_cast<double>(m.kernel_launch_ns) / 1e3, 3) << " us\n"
    << "hbm_bandwidth: " << yaml_fixed(m.hbm_bandwidth / 1e9, 3) << " GB/s\n"
    << "pcie:\n"
    << "  h2d_bandwidth: " << yaml_fixed(m.pcie_h2d.bandwidth / 1e9, 3) << " GB/s\n"
    << "  d2h_bandwidth: " << yaml_fixed(m.pcie_d2h.bandwidth / 1e9, 3) << " GB/s\n"
    << "  h2d_latency: " << yaml_fixed(static_cast<double>(m.pcie_h2d.latency_ns) / 1e3, 3) << " us\n"
    << "  d2h_latency: " << yaml_fixed(static_cast<double>(m.pcie_d2h.latency_ns) / 1e3, 3) << " us\n";
  if (!m.interference.empty()) {
    static constexpr const char* kRows[] = {"communication", "computation", "memcpy"};
    static constexpr const char* kCols[] = {"with_communication", "with_computation", "with_memcpy", "with_all"};
    y << "interference:  # measured cells: speed alone / speed while the column's class runs; the others keep the node's\n";
    for (int row = 0; row < kNumInterferenceClasses; ++row) {
      std::string cells;
      for (const InterferenceCell& cell : m.interference)
        if (static_cast<int>(cell.op) == row)
          cells += (cells.empty() ? "" : ", ") + std::string(kCols[cell.column]) + ": " + yaml_fixed(cell.factor, 4);
      if (!cells.empty()) y << "  " << kRows[row] << ": {" << cells << "}\n";
    }
  }
  if (!m.gemm.empty()) y << "gemm:\n";
  for (const auto& [dtype, t] : m.gemm) {
    y << "  " << to_string(dtype) << ":\n"
      << "    m: " << list(t.m) << "\n"
      << "    n: " << list(t.n) << "\n"
      << "    k: " << list(t.k) << "\n"
      << "    time_us:  # one row per (m, n), m-major; one time per k\n";
    for (std::size_t i = 0; i < t.m.size(); ++i) {
      for (std::size_t j = 0; j < t.n.size(); ++j) {
        y << "      - [";
        for (std::size_t l = 0; l < t.k.size(); ++l) y << (l ? ", " : "") << yaml_fixed(t.time_ns[t.index(i, j, l)] / 1e3, 4);
        y << "]  # m=" << t.m[i] << " n=" << t.n[j] << "\n";
      }
    }
  }
  for (const auto& [layout, tables] : m.batched_gemm) write_batched_gemm_tables(y, layout, tables);
  write_kernel_figures(y, m.kernels);
  write_device_copy_figures(y, m.device_copies);
  return y.str();
}

}  // namespace moesim::runtime
