#include "sim/cli/calibrate_command.h"

#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>

#include "runtime/bench/calibrate_device_copies.h"
#include "sim/cli/calibrate_network.h"
#include "sim/cli/collective_command.h"
#include "sim/cli/list_args.h"
#include "sim/cli/number_flags.h"
#include "sim/cli/output_file.h"
#include "sim/core/error.h"
#include "sim/driver/network_calibration.h"
#include "sim/spec/loader.h"
#include "sim/spec/nccl_tests_log.h"
#include "sim/spec/yaml_reader.h"
#include "sim/spec/yaml_text.h"

#if MOESIM_HAVE_CUDA
#include "runtime/bench/calibrate.h"
#include "runtime/bench/calibrate_collectives.h"
#include "runtime/exec/cuda_device.h"
#endif

namespace moesim::cli {
namespace {

struct CalibrateInputs {
  ClusterSpec cluster;
  std::vector<DType> dtypes;
  std::vector<std::int64_t> dims;
  std::int64_t copy_bytes = 0;
  // Unset: the defaults; empty: "none", not measured.
  std::optional<std::vector<std::int64_t>> batches, batched_dims, kernel_tokens, loopback_ranks, loopback_bytes;
};

// A strictly increasing list of sizes from `min` on for `flag`; unset for "" (the default).
std::optional<std::vector<std::int64_t>> read_axis(const char* flag, const std::string& text, std::int64_t min,
                                                   bool none_allowed) {
  if (text.empty()) return std::nullopt;
  if (none_allowed && text == "none") return std::vector<std::int64_t>{};
  std::vector<std::int64_t> axis = parse_int_list(flag, text, min, 1 << 20);
  for (std::size_t i = 1; i < axis.size(); ++i) {
    if (axis[i] <= axis[i - 1])
      throw InputError(std::string(flag) + " must be strictly increasing; " + std::to_string(axis[i]) + " follows " +
                       std::to_string(axis[i - 1]));
  }
  return axis;
}

// --loopback-ranks and --loopback-bytes, checked as the measurement will check them.
void read_loopback_axes(const CalibrateArgs& a, CalibrateInputs& in) {
  in.loopback_ranks = read_axis("--loopback-ranks", a.loopback_ranks, 1, true);
  if (!a.loopback_bytes.empty()) {
    in.loopback_bytes.emplace();
    for (const std::string& size : split_list("--loopback-bytes", a.loopback_bytes))
      in.loopback_bytes->push_back(parse_size_bytes(size, "--loopback-bytes"));
  }
  runtime::CalibrationOptions o;
  if (in.loopback_ranks) o.loopback_ranks = *in.loopback_ranks;
  if (in.loopback_bytes) o.loopback_bytes = *in.loopback_bytes;
  try {
    runtime::check_device_copy_options(o);
  } catch (const InputError& e) {
    throw InputError(std::string("--loopback-ranks, --loopback-bytes: ") + e.what());
  }
}

CalibrateInputs read_inputs(const CalibrateArgs& a) {
  if (a.hardware_path.empty()) throw InputError("--hardware is required (the preset whose GPU is calibrated)");
  CalibrateInputs in{load_hardware_spec(a.hardware_path), {}, {}, parse_size_bytes(a.copy_size, "--copy-size"), {}, {}, {}, {}, {}};
  const GpuSpec& gpu = in.cluster.node.gpu;
  if (a.dtypes.empty()) {
    for (const auto& [dtype, flops] : gpu.peak_flops)
      if (dtype != DType::kFp8) in.dtypes.push_back(dtype);  // the runtime has no FP8 GEMMs to time
  } else {
    for (const std::string& name : split_list("--dtypes", a.dtypes)) {
      const auto d = parse_dtype(name);
      if (!d) throw InputError("--dtypes: '" + name + "' is not a dtype; valid: " + YamlValue::join_names(dtype_names()));
      if (*d == DType::kFp8)
        throw InputError("--dtypes: fp8 cannot be measured: the GPU runtime has no FP8 GEMMs (the simulator prices them "
                         "from the GPU's fp8 peak)");
      if (!gpu.peak_flops.count(*d)) {
        throw InputError("--dtypes: GPU '" + gpu.name + "' (" + gpu.origin.to_string() + ") has no peak_flops for " +
                         name + ", so the simulator never runs GEMMs in it");
      }
      in.dtypes.push_back(*d);
    }
  }
  if (auto dims = read_axis("--dims", a.dims, 1, false)) in.dims = *dims;
  // A batch of 1 is a single GEMM: the gemm table measures it.
  in.batches = read_axis("--batches", a.batches, 2, true);
  in.batched_dims = read_axis("--batched-dims", a.batched_dims, 1, false);
  in.kernel_tokens = read_axis("--kernel-tokens", a.kernel_tokens, 1, true);
  read_loopback_axes(a, in);
  if (in.copy_bytes < 1024) throw InputError("--copy-size must be at least 1K");
  return in;
}

// The calibration is loaded back before it is kept, so it goes to a file, never to stdout; its path
// is checked before anything is measured or fitted.
void check_calibration_output(const std::string& path) {
  if (path.empty()) throw InputError("--output is required (the calibration file to write)");
  if (path == "-")
    throw InputError("--output: a calibration is loaded back before it is kept, so it needs a file name, not '-'");
  check_outputs({{"--output", path}});
}

// A measured all-to-all: the cluster GPUs it ran on, in rank order, one point per message size.
struct MeasuredAllToAll {
  std::vector<int> gpus;
  std::vector<AllToAllPoint> points;
  std::string source;               // where it was measured, for the file
  std::string file;                 // the log, where there is one
  std::vector<std::string> notes;   // how the log's ranks were placed, where it had to guess
  int ranks() const { return static_cast<int>(gpus.size()); }
};

// --alltoall-log: an nccl-tests alltoall_perf log, its ranks placed on `cluster`'s GPUs.
MeasuredAllToAll read_alltoall_log(const CalibrateArgs& a, const ClusterSpec& cluster) {
  const NcclTestsLog log = parse_nccl_tests_log(a.alltoall_log);
  const SourceLocation file{log.file, 0, 0};
  MeasuredAllToAll m;
  m.source = "nccl-tests alltoall_perf log " + a.alltoall_log;
  m.file = log.file;
  if (log.rows.empty()) throw InputError(file, "no nccl-tests result rows (size, count, type, redop, root, time, ...)");
  if (!log.test.empty() && log.test != "alltoall_perf")
    throw InputError(file, "this is a log of " + log.test + ", not of alltoall_perf");
  if (log.cpu_times)
    throw InputError(file, "the times are CPU times (nccl-tests -C 1), not the GPU's; rerun alltoall_perf without -C");
  if (a.ranks != 0 && log.ranks != 0 && log.ranks != a.ranks)
    throw InputError(file, "the log lists " + std::to_string(log.ranks) + " ranks, --ranks says " + std::to_string(a.ranks));
  check_has_network(cluster);  // before the log's ranks are placed on its GPUs
  check_logged_gpu(log, cluster.node.gpu.name, a.force, m.notes);
  LoggedGpus placed = gpus_of_log(log, cluster, a.ranks);
  m.gpus = std::move(placed.gpus);
  m.notes.insert(m.notes.end(), placed.notes.begin(), placed.notes.end());
  const LoggedShape shape = shape_of_log(log, a.ranks);
  if (const std::string why = alltoall_shape_mismatch(shape, cluster); !why.empty()) {
    if (!a.force) {
      throw InputError(SourceLocation{log.file, shape.line, shape.line ? 1 : 0},
                       why + "; give --hardware a preset of the GPUs it ran on (--ranks for a log without '#  Rank' "
                             "lines), or --force to fit it anyway");
    }
    m.notes.push_back(why + "; fitted anyway (--force): its links are those of the logged GPUs");
  }
  for (const NcclTestsRow& row : log.rows) {
    const SourceLocation at{log.file, row.line, 1};
    if (row.redop != "none" && !row.redop.empty())  // blank in older alltoall_perf
      throw InputError(at, "redop '" + row.redop + "': this is not an all-to-all log (alltoall_perf writes 'none')");
    if (row.size_bytes % m.ranks() != 0)
      throw InputError(at, "the size " + std::to_string(row.size_bytes) + " does not split evenly over " +
                               std::to_string(m.ranks()) + " ranks");
    m.points.push_back(AllToAllPoint{row.size_bytes / m.ranks(), row.time_us * 1e3});
  }
  return m;
}

#if MOESIM_HAVE_CUDA
// This process's GPUs, or an input error saying why `command` cannot have them.
std::unique_ptr<runtime::DeviceProvider> usable_gpus(const std::string& command) {
  auto provider = runtime::make_cuda_provider();
  if (const std::string why = provider->unavailable_reason(); !why.empty())
    throw InputError("`" + command + "` needs a GPU, and none is usable: " + why);
  return provider;
}
#else
[[noreturn]] void no_gpu_runtime(const std::string& command, const std::string& instead) {
  throw InputError("this build of moesim has no GPU runtime (it was configured without CUDA: MOESIM_WITH_CUDA=OFF or no "
                   "nvcc found), so `" + command + "` cannot measure" + instead);
}
#endif

// --collectives: the first `wanted` GPUs of this process (0: all) through NCCL
// (runtime/bench/calibrate_collectives.h), once `cluster` is known to take them.
MeasuredAllToAll measure_alltoall_here(const ClusterSpec& cluster, int wanted) {
#if !MOESIM_HAVE_CUDA
  (void)cluster;
  (void)wanted;
  no_gpu_runtime("moesim calibrate --collectives", "; fit an nccl-tests log with --alltoall-log");
#else
  const auto provider = usable_gpus("moesim calibrate --collectives");
  const int visible = provider->num_devices();
  if (visible < 2 || wanted > visible) {
    throw InputError("`moesim calibrate --collectives` measures the all-to-all between this node's GPUs and this "
                     "process sees " + std::to_string(visible) + (wanted > visible ? " (--ranks " + std::to_string(wanted) + ")" : "") +
                     "; run it on a node with several (or fit an nccl-tests log of one with --alltoall-log)");
  }
  const int n = wanted == 0 ? visible : wanted;
  check_network_gpus(cluster, first_gpus(n));  // before the GPUs are opened and measured
  std::vector<std::unique_ptr<runtime::DeviceOps>> devices;
  std::vector<runtime::DeviceOps*> raw;
  std::vector<runtime::ExecutorRank> ranks;
  for (int g = 0; g < n; ++g) {
    devices.push_back(provider->open(g));
    raw.push_back(devices.back().get());
    ranks.push_back(runtime::ExecutorRank{g, raw.back()});
  }
  std::unique_ptr<runtime::Transport> transport;
  try {
    transport = provider->multi_device_transport(raw);
  } catch (const InputError&) {
    throw InputError("this build of moesim has no NCCL, which `moesim calibrate --collectives` needs; fit an "
                     "nccl-tests log with --alltoall-log");
  }
  std::cerr << "calibrate: all-to-all over " << n << " x " << provider->describe(0) << " (" << transport->name() << ")\n";
  runtime::AllToAllCalibrationOptions options;
  options.progress = [](const std::string& s) { std::cerr << "calibrate: " << s << "\n"; };
  MeasuredAllToAll m;
  m.gpus = first_gpus(n);
  m.points = runtime::measure_all_to_all(*transport, ranks, options);
  m.source = "moesim calibrate --collectives, " + std::to_string(n) + " x " + provider->describe(0) + ", " +
             transport->name();
  return m;
#endif
}

// What the network fit found, on stdout.
void print_network_fit(const CalibrateArgs& a, const MeasuredAllToAll& m, const NetworkCalibration& cal) {
  std::cout << "wrote " << a.out_path << ": all-to-all of " << m.ranks() << " GPUs"
            << (cal.inter_node ? " on " + std::to_string(cal.nodes) + " nodes" : "") << ", " << m.points.size()
            << " sizes: latency " << yaml_fixed(cal.measured.latency_ns / 1e3, 2) << " us, bandwidth "
            << yaml_fixed(cal.measured.bandwidth / 1e9, 1) << " GB/s per GPU";
  if (cal.inter_node_link)
    std::cout << " (alpha-beta inter_node " << yaml_fixed(cal.inter_node_link->effective_bandwidth() / 1e9, 1)
              << " GB/s per GPU, latency " << yaml_fixed(static_cast<double>(cal.inter_node_link->latency_ns) / 1e3, 2)
              << " us)";
  std::cout << "; calibrated alpha-beta within " << yaml_fixed(100 * cal.alpha_beta_max_error, 1) << "%";
  if (!cal.link_types.empty() || cal.nic_port) std::cout << ", flow within " << yaml_fixed(100 * cal.flow_max_error, 1) << "%";
  std::cout << " of every measured time\n";
  const double worst = 100 * cal.measured.worst_relative_residual;
  std::cout << "fit: latency +- " << yaml_fixed(cal.measured.latency_stderr_ns / 1e3, 2) << " us, bandwidth +- "
            << yaml_fixed(cal.measured.bandwidth_stderr / 1e9, 1)
            << " GB/s (standard errors); the measured times around the line: rms "
            << yaml_fixed(100 * cal.measured.rms_relative_residual, 1) << "%, worst "
            << (std::abs(worst) < 0.05 ? std::string("0.0") : (worst > 0 ? "+" : "") + yaml_fixed(worst, 1)) << "%\n";
  for (const std::string& note : cal.notes) std::cout << "note: " << note << "\n";
  std::cout << "use it: moesim simulate --hardware " << a.hardware_path << " --calibration " << a.out_path << " ...\n";
}

// The network fitted to a measured all-to-all, written as a calibration file: the intra-node
// network from GPUs of one node, the inter-node network from GPUs on several (on top of --base's
// intra-node calibration, where it has one).
int run_network_calibration(const CalibrateArgs& a, const std::string& version) {
  const ClusterSpec preset = load_hardware_spec(a.hardware_path);
  std::optional<MeasuredAllToAll> logged;
  if (!a.alltoall_log.empty()) logged = read_alltoall_log(a, preset);
  bool inter_node = false;
  if (logged) {
    check_network_gpus(preset, logged->gpus);  // before --base is read: the log's errors first
    inter_node = nodes_holding(preset, logged->gpus) > 1;
  }
  if (preset.node.gpu.calibration) {
    // A node takes one calibration, and the file written here would be a second one. Its GPU
    // measurements can go on as --base, unless it already holds the network this fit writes.
    const std::string& named = preset.node.gpu.calibration->file;
    const CalibrationSpec existing = load_calibration(named);
    const bool holds_this = inter_node ? existing.calibrates_inter_node()
                                       : existing.calibrates_intra_node() || existing.calibrates_inter_node();
    throw InputError(preset.node.origin,
                     "node '" + preset.node.name + "' already has a calibration (" + named +
                         "), and a node takes one: give --hardware a preset without the calibration: key" +
                         (holds_this ? std::string(" (that file already calibrates this network)")
                                     : ", and that file as --base"));
  }
  ClusterSpec cluster = preset;  // what the fit starts from: the preset with --base applied
  std::string text;
  bool intra_calibrated = false;
  if (!a.base_path.empty()) {  // checked before measuring
    const CalibrationSpec base = load_calibration(a.base_path, "--base");
    if (base.calibrates_inter_node()) {
      throw InputError(base.origin, inter_node ? "--base already calibrates the inter-node network"
                                               : "--base calibrates the inter-node network, which is fitted on top of "
                                                 "the intra-node one: fit this one-node measurement first and give "
                                                 "its file as --base to the inter-node fit");
    }
    if (!inter_node && base.calibrates_intra_node())
      throw InputError(base.origin, "--base already calibrates the network; give a calibration of the GPU alone");
    if (base.calibrates_all_reduce())
      throw InputError(base.origin, "--base holds an all-reduce fit, made on the links this fit moves: fit the "
                                    "all-to-all first and give its file as --base to the all-reduce fit");
    intra_calibrated = base.calibrates_intra_node();
    apply_calibration(cluster, base);      // another GPU's file is named here, not as the output's
    text = whole_text(a.base_path);
  }
  const MeasuredAllToAll m = logged ? *logged : measure_alltoall_here(cluster, a.ranks);
  NetworkCalibration cal;
  try {
    cal = calibrate_network(cluster, m.gpus, m.points);
  } catch (const InputError& e) {  // the fit's rules are about the log: name it
    if (m.file.empty() || !e.where().file.empty()) throw;
    throw InputError(SourceLocation{m.file, 0, 0}, e.rule());
  }
  cal.notes.insert(cal.notes.begin(), m.notes.begin(), m.notes.end());
  if (cal.inter_node && !intra_calibrated) {
    cal.notes.push_back("the intra-node links keep --hardware's values; for measured ones, fit a one-node log first "
                        "and give its file as --base");
  }
  if (a.base_path.empty()) {
    text = network_calibration_header(cal.inter_node ? cluster.name : cluster.node.name, cluster.node.gpu.name, m.source,
                                      version, a.command_line);
  }
  text += network_calibration_yaml(cal, m.ranks(), m.points, m.source);
  write_checked_calibration(a.out_path, text, preset.node, m.file.empty() ? m.source : m.file);
  print_network_fit(a, m, cal);
  return 0;
}

}  // namespace

int run_calibrate(const CalibrateArgs& a, const std::string& version) {
  check_calibration_output(a.out_path);
  if (a.force && a.alltoall_log.empty() && a.allreduce_log.empty())
    throw InputError("--force goes with --alltoall-log or --allreduce-log: it fits a log the checks would refuse");
  if (!a.allreduce_log.empty()) return run_allreduce_calibration(a, version);
  if (!a.alltoall_log.empty() || a.collectives) return run_network_calibration(a, version);
  if (!a.base_path.empty() || a.ranks != 0)
    throw InputError(std::string(a.ranks != 0 ? "--ranks" : "--base") +
                     " goes with --alltoall-log, --allreduce-log or --collectives (the network); a GPU calibration measures one GPU");
  const CalibrateInputs in = read_inputs(a);  // bad input is named as such first, without CUDA too
#if !MOESIM_HAVE_CUDA
  (void)in;
  (void)version;
  no_gpu_runtime("moesim calibrate", "");
#else
  const auto provider = usable_gpus("moesim calibrate");
  if (a.device >= provider->num_devices()) {
    throw InputError("--device " + std::to_string(a.device) + ": this process sees " +
                     std::to_string(provider->num_devices()) + " GPU(s)");
  }
  const std::string described = provider->describe(a.device);
  std::cerr << "calibrate: " << described << " as " << in.cluster.node.gpu.name << "\n";
  runtime::CalibrationOptions options;
  options.dtypes = in.dtypes;
  if (!in.dims.empty()) options.dims = in.dims;
  if (in.batches) options.batches = *in.batches;
  if (in.batched_dims) options.batched_dims = *in.batched_dims;
  if (in.kernel_tokens) options.kernel_tokens = *in.kernel_tokens;
  if (in.loopback_ranks) options.loopback_ranks = *in.loopback_ranks;
  if (in.loopback_bytes) options.loopback_bytes = *in.loopback_bytes;
  options.copy_bytes = in.copy_bytes;
  options.min_time_ms = a.min_time_ms;
  const auto start = std::chrono::steady_clock::now();
  options.progress = [&start](const std::string& s) {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cerr << "calibrate: [" << static_cast<int>(secs) << " s] " << s << "\n";
  };
  const auto device = provider->open(a.device);
  const runtime::CalibrationMeasurement m = runtime::calibrate(*device, options);
  const std::string provenance =
      "moesim " + version + " calibrate on " + described + ", " + utc_now() + "; command: " + a.command_line;
  // Written beside the target first: the target appears only once the simulator accepts it
  // (plausible ranges included), so a scripted `[ -s FILE ]` never sees a rejected file.
  write_checked_calibration(a.out_path, runtime::calibration_yaml(m, in.cluster.node.gpu.name, provenance),
                            in.cluster.node);
  std::cout << "wrote " << a.out_path << ": launch gap " << m.kernel_launch_ns << " ns, HBM "
            << m.hbm_bandwidth / 1e9 << " GB/s, PCIe h2d " << m.pcie_h2d.bandwidth / 1e9 << " GB/s, d2h "
            << m.pcie_d2h.bandwidth / 1e9 << " GB/s, " << m.gemm.size() << " GEMM table(s), "
            << batched_table_count(m) << " batched GEMM table(s), memory-bound kernels in " << m.kernels.size()
            << " storage type(s), device-copy collectives at " << m.device_copies.by_ranks.size() << " rank count(s)\n"
            << "use it: moesim simulate --hardware " << a.hardware_path << " --calibration " << a.out_path << " ...\n";
  return 0;
#endif
}

}  // namespace moesim::cli
