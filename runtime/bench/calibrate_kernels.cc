#include "runtime/bench/calibrate_kernels.h"

#include <functional>
#include <memory>
#include <set>
#include <string>

#include "runtime/bench/op_timer.h"
#include "sim/core/error.h"
#include "sim/build/memory_kernel_traffic.h"

namespace moesim::runtime {
namespace {

// Device buffers for every kernel at the largest token count; smaller counts use their prefixes.
struct KernelBuffers {
  KernelBuffers(DeviceOps& d, const CalibrationOptions& o, Storage st)
      : tokens(o.kernel_tokens.back()),
        rows(tokens * o.kernel_top_k),
        eb(storage_bytes(st)),
        scratch_bytes(d.assign_scratch_bytes(tokens, o.kernel_top_k, static_cast<int>(o.kernel_experts))),
        x(d, tokens * o.kernel_d_model * eb, "kernel calibration x"),
        y(d, tokens * o.kernel_d_model * eb, "kernel calibration y"),
        dy(d, tokens * o.kernel_d_model * eb, "kernel calibration dy"),
        logits(d, tokens * o.kernel_experts * 4, "kernel calibration logits"),
        probs(d, tokens * o.kernel_experts * 4, "kernel calibration probs"),
        dlogits(d, tokens * o.kernel_experts * eb, "kernel calibration dlogits"),
        topk_idx(d, rows * 4, "kernel calibration topk_idx"),
        topk_row(d, rows * 4, "kernel calibration topk_row"),
        topk_score(d, rows * 4, "kernel calibration topk_score"),
        dscores(d, rows * 4, "kernel calibration dscores"),
        row_token(d, rows * 4, "kernel calibration row_token"),
        row_choice(d, rows * 4, "kernel calibration row_choice"),
        per_expert(d, o.kernel_experts * 4, "kernel calibration tokens per expert"),
        scratch(d, std::max<std::int64_t>(scratch_bytes, 4), "kernel calibration assign scratch"),
        dispatch(d, rows * o.kernel_d_model * eb, "kernel calibration dispatch rows"),
        d_dispatch(d, rows * o.kernel_d_model * eb, "kernel calibration dispatch gradient"),
        h(d, rows * o.kernel_hidden * eb, "kernel calibration h"),
        a(d, rows * o.kernel_hidden * eb, "kernel calibration a"),
        da(d, rows * o.kernel_hidden * eb, "kernel calibration da"),
        dh(d, rows * o.kernel_hidden * eb, "kernel calibration dh") {}

  std::int64_t tokens, rows;
  int eb;
  std::int64_t scratch_bytes;
  DeviceBuffer x, y, dy, logits, probs, dlogits, topk_idx, topk_row, topk_score, dscores, row_token, row_choice,
      per_expert, scratch, dispatch, d_dispatch, h, a, da, dh;
};

template <typename T>
T* as(const DeviceBuffer& b) {
  return static_cast<T*>(b.get());
}

// The operation the executor issues for kernel `k` with `tokens` tokens (layer_executor.cc, local()).
std::function<void(int)> kernel_op(DeviceOps& d, const KernelBuffers& b, const CalibrationOptions& o, Storage st,
                                   MemoryKernel k, std::int64_t tokens) {
  const int E = static_cast<int>(o.kernel_experts), top_k = o.kernel_top_k;
  const std::int64_t M = o.kernel_d_model, H = o.kernel_hidden, rows = tokens * top_k;
  const std::int64_t capacity = rows / o.kernel_experts;
  const auto route = RouteArgs{as<float>(b.logits), tokens, E, top_k, false, as<float>(b.probs),
                               as<std::int32_t>(b.topk_idx), as<float>(b.topk_score)};
  const auto assign = AssignArgs{as<std::int32_t>(b.topk_idx), tokens, E, top_k, capacity, 1, as<std::int32_t>(b.topk_row),
                                 as<std::int32_t>(b.row_token), as<std::int32_t>(b.row_choice),
                                 as<std::int32_t>(b.per_expert), b.scratch.get(), b.scratch_bytes};
  switch (k) {
    case MemoryKernel::kRouteFwd:
      return [&d, route, assign](int s) {
        d.route(route, s);
        d.assign(assign, s);
      };
    case MemoryKernel::kEncodeFwd: {
      const EncodeArgs a{b.x.get(), as<std::int32_t>(b.row_token), M, 0, rows, b.dispatch.get(), st};
      return [&d, a](int s) { d.encode(a, s); };
    }
    case MemoryKernel::kActFwd: {
      const ActivationArgs a{ActivationKind::kGelu, rows, H, b.h.get(), b.a.get(), st};
      return [&d, a](int s) { d.activation(a, s); };
    }
    case MemoryKernel::kDecodeFwd: {
      const DecodeArgs a{b.dispatch.get(), as<std::int32_t>(b.topk_row), as<float>(b.topk_score), tokens, top_k, M, b.y.get(), st};
      return [&d, a](int s) { d.decode(a, s); };
    }
    case MemoryKernel::kDecodeBwd: {
      const DecodeBackwardArgs a{b.dy.get(), b.dispatch.get(), as<std::int32_t>(b.topk_row), as<float>(b.topk_score),
                                 as<std::int32_t>(b.row_token), as<std::int32_t>(b.row_choice), tokens, top_k, rows, M,
                                 b.d_dispatch.get(), as<float>(b.dscores), st};
      return [&d, a](int s) { d.decode_backward(a, s); };
    }
    case MemoryKernel::kActBwd: {
      const ActivationBackwardArgs a{ActivationKind::kGelu, rows, H, b.h.get(), b.da.get(), b.dh.get(), b.a.get(), st};
      return [&d, a](int s) { d.activation_backward(a, s); };
    }
    case MemoryKernel::kEncodeBwd: {
      const EncodeBackwardArgs a{b.d_dispatch.get(), as<std::int32_t>(b.topk_row), tokens, top_k, M, b.y.get(), st};
      return [&d, a](int s) { d.encode_backward(a, s); };
    }
    case MemoryKernel::kRouteBwd: {
      const RouteBackwardArgs a{as<float>(b.probs), as<std::int32_t>(b.topk_idx), as<float>(b.topk_score),
                                as<float>(b.dscores), tokens, E, top_k, false, b.dlogits.get(), st};
      return [&d, a](int s) { d.route_backward(a, s); };
    }
  }
  throw InternalError("kernel_op: unknown kernel");
}

// Inputs like a layer's (random, not zeros: routing and the GPU's clock depend on the data).
void fill_inputs(DeviceOps& d, const KernelBuffers& b, const CalibrationOptions& o, Storage st, int s) {
  const std::int64_t bm = b.tokens * o.kernel_d_model, rh = b.rows * o.kernel_hidden;
  d.fill(FillArgs{b.x.get(), bm, 11, 1.0, st}, s);
  d.fill(FillArgs{b.dy.get(), bm, 12, 1.0, st}, s);
  d.fill(FillArgs{b.logits.get(), b.tokens * o.kernel_experts, 13, 4.0, Storage::kF32}, s);
  d.fill(FillArgs{b.dscores.get(), b.rows, 14, 1.0, Storage::kF32}, s);
  d.fill(FillArgs{b.h.get(), rh, 15, 2.0, st}, s);
  d.fill(FillArgs{b.da.get(), rh, 16, 1.0, st}, s);
}

// The executor's order, so that every kernel reads what an earlier one wrote (dispatch rows before
// decode reads them, their gradient before encode's backward sums it).
constexpr MemoryKernel kIssueOrder[] = {MemoryKernel::kRouteFwd,  MemoryKernel::kEncodeFwd, MemoryKernel::kActFwd,
                                        MemoryKernel::kDecodeFwd, MemoryKernel::kDecodeBwd, MemoryKernel::kActBwd,
                                        MemoryKernel::kEncodeBwd, MemoryKernel::kRouteBwd};

// Storage dtypes of the measured math dtypes, once each: fp32 (for fp32 and tf32), bf16, fp16.
std::set<DType> storages_of(const std::vector<DType>& dtypes) {
  std::set<DType> out;
  for (DType d : dtypes) out.insert(d == DType::kTf32 ? DType::kFp32 : d);
  return out;
}

KernelFigures measure_storage(DeviceOps& device, const CalibrationOptions& o, DType storage_dtype) {
  const Storage st = storage_of(storage_dtype);
  const KernelBuffers b(device, o, st);
  OpTimer timer(device, o);
  fill_inputs(device, b, o, st, timer.stream());
  std::map<MemoryKernel, std::vector<double>> bytes, ns;
  for (std::int64_t tokens : o.kernel_tokens) {
    // The routing every other kernel reads, for this token count.
    kernel_op(device, b, o, st, MemoryKernel::kRouteFwd, tokens)(timer.stream());
    const KernelShape shape{tokens, o.kernel_experts, o.kernel_top_k, o.kernel_d_model, o.kernel_hidden,
                            o.kernel_hidden, tokens * o.kernel_top_k};
    for (MemoryKernel k : kIssueOrder) {
      const std::function<void(int)> op = kernel_op(device, b, o, st, k, tokens);
      const ElementwiseWork w = memory_kernel_traffic(k, shape, b.eb);
      bytes[k].push_back(static_cast<double>(w.bytes_read + w.bytes_written));
      ns[k].push_back(timer.per_op_ns([&] { op(timer.stream()); }));
    }
  }
  KernelFigures out;
  for (MemoryKernel k : kMemoryKernels) {
    LaunchBandwidthFit fit;
    try {
      fit = fit_launch_and_bandwidth(bytes[k], ns[k]);
    } catch (const InternalError& e) {
      throw InternalError("calibration: kernel " + std::string(to_string(k)) + " in " +
                          std::string(to_string(storage_dtype)) + ": " + e.what());
    }
    out[k] = KernelFigure{static_cast<TimeNs>(std::llround(fit.launch_ns)), fit.bytes_per_ns * 1e9};
  }
  return out;
}

}  // namespace

LaunchBandwidthFit fit_launch_and_bandwidth(const std::vector<double>& bytes, const std::vector<double>& ns) {
  if (bytes.empty() || bytes.size() != ns.size()) throw InternalError("no kernel times to fit");
  // Weights 1 / t^2: the residuals are relative, so a small size counts as much as a large one.
  double sw = 0, swx = 0, swxx = 0, swt = 0, swxt = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (!(ns[i] > 0) || !(bytes[i] > 0)) throw InternalError("a kernel time or size is not positive");
    const double w = 1.0 / (ns[i] * ns[i]), x = bytes[i], t = ns[i];
    sw += w, swx += w * x, swxx += w * x * x, swt += w * t, swxt += w * x * t;
  }
  const double det = sw * swxx - swx * swx;
  LaunchBandwidthFit fit;
  double slope = 0;  // ns per byte
  if (bytes.size() >= 2 && det > 1e-12 * sw * swxx) {
    fit.launch_ns = (swxx * swt - swx * swxt) / det;
    slope = (sw * swxt - swx * swt) / det;
  } else if (bytes.size() >= 2) {
    throw InternalError("the kernel was timed at sizes that do not differ");
  }
  if (bytes.size() == 1 || fit.launch_ns < 0) {  // no fixed cost shows: through 0
    fit.launch_ns = 0;
    slope = swxt / swxx;
  }
  if (!(slope > 0)) throw InternalError("its time does not grow with its bytes; the timing is not usable");
  fit.bytes_per_ns = 1.0 / slope;
  return fit;
}

void check_kernel_options(const CalibrationOptions& o) {
  if (o.kernel_tokens.empty()) return;
  check_axis(o.kernel_tokens, "kernel token count", "kernel token counts");
  if (o.kernel_experts < 1 || o.kernel_top_k < 1 || o.kernel_top_k > o.kernel_experts || o.kernel_d_model < 1 ||
      o.kernel_hidden < 1)
    throw InputError("calibration: the kernels' layer needs experts >= 1, 1 <= top_k <= experts, d_model and hidden >= 1");
  for (std::int64_t t : o.kernel_tokens) {
    if (t * o.kernel_top_k % o.kernel_experts != 0)
      throw InputError("calibration: kernel token count " + std::to_string(t) + " x top_k " + std::to_string(o.kernel_top_k) +
                       " is not a multiple of the " + std::to_string(o.kernel_experts) +
                       " experts: the capacity (rows per expert) must be whole");
  }
}

std::map<DType, KernelFigures> measure_kernels(DeviceOps& device, const CalibrationOptions& options) {
  std::map<DType, KernelFigures> out;
  for (DType storage : storages_of(options.dtypes)) {
    if (options.progress)
      options.progress("memory-bound kernels in " + std::string(to_string(storage)) + ": " +
                       std::to_string(kMemoryKernels.size()) + " kernels at " +
                       std::to_string(options.kernel_tokens.size()) + " token counts");
    out[storage] = measure_storage(device, options, storage);
  }
  return out;
}

}  // namespace moesim::runtime
