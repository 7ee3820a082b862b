#include "runtime/bench/sm_share_probe.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "runtime/exec/cuda_device.cuh"
#include "sim/core/error.h"

namespace moesim::runtime {
namespace {

#define PROBE_CUDA(call) cuda_check((call), #call)

void probe_cublas(cublasStatus_t st, const char* call) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw InternalError(std::string(call) + " failed: cuBLAS status " + std::to_string(static_cast<int>(st)));
}

struct Stamps {
  unsigned long long first_start;
  unsigned long long last_end;
  unsigned long long cta_ns;  // the sum over CTAs of each one's time from its start to its end
};

__device__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void copy_kernel(const int4* src, int4* dst, long long n, Stamps* st) {
  __shared__ unsigned long long t0;
  if (threadIdx.x == 0) {
    t0 = global_ns();
    atomicMin(&st->first_start, t0);
  }
  __syncthreads();
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) dst[i] = src[i];
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned long long t1 = global_ns();
    atomicMax(&st->last_end, t1);
    atomicAdd(&st->cta_ns, t1 - t0);
  }
}

// Holds its SM for `ns` without touching memory.
__global__ void hold_kernel(unsigned long long ns, Stamps* st) {
  __shared__ unsigned long long t0;
  if (threadIdx.x == 0) {
    t0 = global_ns();
    atomicMin(&st->first_start, t0);
  }
  __syncthreads();
  while (global_ns() - t0 < ns) __nanosleep(1000);
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned long long t1 = global_ns();
    atomicMax(&st->last_end, t1);
    atomicAdd(&st->cta_ns, t1 - t0);
  }
}

// One thread that keeps the GPU from starting the GEMMs until the host has queued them all.
__global__ void blocker_kernel(unsigned long long ns) {
  const unsigned long long t0 = global_ns();
  while (global_ns() - t0 < ns) __nanosleep(1000);
}

__global__ void fill_kernel(__nv_bfloat16* p, long long n, unsigned seed) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    p[i] = __float2bfloat16(static_cast<float>(h & 0xffff) / 32768.0f - 1.0f);
  }
}

struct GemmSequence {
  const char* name;
  int count, m, n, k;
  bool fp32 = false;  // fp32 without tensor cores (cuBLAS's SIMT kernels) instead of bf16
  int batch = 1;      // > 1: one strided-batched launch of `batch` GEMMs (as the runtime's experts)
};
constexpr GemmSequence kSequences[] = {{"2 x 8192^3", 2, 8192, 8192, 8192},
                                       {"32 x 4096x2048x2048", 32, 4096, 2048, 2048},
                                       {"1 x 4096^3 fp32", 1, 4096, 4096, 4096, true}};
constexpr int kCtas[] = {8, 24, 66, 132};

// The --factors cases: a GEMM sequence and how many of its GEMMs make the timed window (a few
// hundred microseconds or more, so that the 30 us launch offset is small beside it). Besides the
// two bf16 sequences above, one rank's expert GEMMs of two public MoE models: DeepSeek-V3 (hidden
// 7,168, expert d_ffn 2,048; 4,096 tokens) and Qwen3-30B-A3B (hidden 2,048, d_ffn 768; 2,048 tokens).
struct FactorCase {
  GemmSequence seq;
  int window_gemms;
};
constexpr FactorCase kFactorCases[] = {{kSequences[0], 1},
                                       {kSequences[1], 8},
                                       {{"4 x 4096x2048x7168", 4, 4096, 2048, 7168}, 4},
                                       {{"32 x 2048x768x2048", 32, 2048, 768, 2048}, 32}};
constexpr int kFactorCtas[] = {8, 16, 24, 32, 66};
constexpr int kThreads = 512;  // NCCL's CTA size on Hopper
constexpr unsigned long long kBlockerNs = 2'000'000;
constexpr long long kCopyBufferBytes = 6ll << 30;  // 66 CTAs (about 950 GB/s) for 3 x 1.4 ms
constexpr long long kCopySizingBytes = 256ll << 20;
constexpr long long kOperandElems = 128ll << 20;  // elements of each operand buffer: any sequence's largest operand
constexpr long long kL2FlushBytes = 512ll << 20;    // several times any GPU's L2

struct Timing {  // microseconds after the first start event (the GEMMs' or the comm kernel's)
  double arrive = 0, start = 0, end = 0, duration = 0, gemms_start = 0, gemms_end = 0;
  double cta_mean = 0;  // the comm kernel's mean time per CTA, from its start to its end
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

class Probe {
 public:
  explicit Probe(int ordinal);
  ~Probe();
  Probe(const Probe&) = delete;
  Probe& operator=(const Probe&) = delete;

  // What the communication kernel does: copy `bytes` with `ctas`, or hold `ctas` SMs `hold_ns`.
  struct Comm {
    bool copy = true;
    int ctas = 8;
    long long bytes = 0;
    unsigned long long hold_ns = 0;
    bool high_priority = false;
  };
  // `gemms` GEMMs of `seq` (0: none) and, if `comm`, the kernel launched `delay_us` after they
  // began; with `comm_first`, the kernel first and the GEMMs launched `delay_us` after it began.
  Timing run_once(const GemmSequence& seq, int gemms, const Comm* comm, double delay_us, bool comm_first);
  std::string describe() const;
  // The --factors method: each GEMM of a sequence reads and writes its own slice of the operand
  // buffers (as different experts' GEMMs do; one slice for all of them let the smaller shapes run
  // from L2), and L2 is flushed before each run.
  void use_fresh_operands() { fresh_operands_ = true; }

 private:
  void launch_comm(const Comm& c, cudaStream_t s);
  void launch_gemms(const GemmSequence& seq, int gemms);
  Timing read_timing(bool with_comm);

  int ordinal_;
  bool fresh_operands_ = false;
  cudaStream_t compute_ = nullptr, comm_normal_ = nullptr, comm_high_ = nullptr;
  int least_priority_ = 0, greatest_priority_ = 0;
  cublasHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  __nv_bfloat16 *a_ = nullptr, *b_ = nullptr, *c_ = nullptr;
  void *src_ = nullptr, *dst_ = nullptr;
  Stamps* stamps_ = nullptr;
  cudaEvent_t start_ = nullptr, gemms_start_ = nullptr, gemms_end_ = nullptr, arrive_ = nullptr, comm_end_ = nullptr;
};

Probe::Probe(int ordinal) : ordinal_(ordinal) {
  PROBE_CUDA(cudaSetDevice(ordinal));
  PROBE_CUDA(cudaDeviceGetStreamPriorityRange(&least_priority_, &greatest_priority_));
  PROBE_CUDA(cudaStreamCreateWithPriority(&compute_, cudaStreamNonBlocking, least_priority_));
  PROBE_CUDA(cudaStreamCreateWithPriority(&comm_normal_, cudaStreamNonBlocking, least_priority_));
  PROBE_CUDA(cudaStreamCreateWithPriority(&comm_high_, cudaStreamNonBlocking, greatest_priority_));
  probe_cublas(cublasCreate(&handle_), "cublasCreate");
  probe_cublas(cublasSetStream(handle_, compute_), "cublasSetStream");
  constexpr std::size_t kWorkspace = 32u << 20;
  PROBE_CUDA(cudaMalloc(&workspace_, kWorkspace));
  probe_cublas(cublasSetWorkspace(handle_, workspace_, kWorkspace), "cublasSetWorkspace");
  for (__nv_bfloat16** p : {&a_, &b_, &c_}) PROBE_CUDA(cudaMalloc(p, kOperandElems * sizeof(__nv_bfloat16)));
  fill_kernel<<<1024, 256, 0, compute_>>>(a_, kOperandElems, 1u);
  fill_kernel<<<1024, 256, 0, compute_>>>(b_, kOperandElems, 2u);
  PROBE_CUDA(cudaMalloc(&src_, kCopyBufferBytes));
  PROBE_CUDA(cudaMalloc(&dst_, kCopyBufferBytes));
  PROBE_CUDA(cudaMemsetAsync(src_, 1, kCopyBufferBytes, compute_));
  PROBE_CUDA(cudaMalloc(&stamps_, sizeof(Stamps)));
  for (cudaEvent_t* e : {&start_, &gemms_start_, &gemms_end_, &arrive_, &comm_end_}) PROBE_CUDA(cudaEventCreate(e));
  PROBE_CUDA(cudaDeviceSynchronize());
}

Probe::~Probe() {
  // Best effort: a destructor must not throw.
  cudaDeviceSynchronize();
  for (cudaEvent_t e : {start_, gemms_start_, gemms_end_, arrive_, comm_end_}) cudaEventDestroy(e);
  for (void* p : {static_cast<void*>(a_), static_cast<void*>(b_), static_cast<void*>(c_), src_, dst_,
                  static_cast<void*>(stamps_), workspace_})
    cudaFree(p);
  if (handle_ != nullptr) cublasDestroy(handle_);
  for (cudaStream_t s : {compute_, comm_normal_, comm_high_}) cudaStreamDestroy(s);
}

std::string Probe::describe() const {
  cudaDeviceProp prop{};
  PROBE_CUDA(cudaGetDeviceProperties(&prop, ordinal_));
  return std::string(prop.name) + ", " + std::to_string(prop.multiProcessorCount) + " SMs, stream priorities " +
         std::to_string(least_priority_) + " (normal) to " + std::to_string(greatest_priority_) + " (highest)";
}

void Probe::launch_comm(const Comm& c, cudaStream_t s) {
  if (c.copy)
    copy_kernel<<<c.ctas, kThreads, 0, s>>>(static_cast<const int4*>(src_), static_cast<int4*>(dst_),
                                            c.bytes / static_cast<long long>(sizeof(int4)), stamps_);
  else
    hold_kernel<<<c.ctas, kThreads, 0, s>>>(c.hold_ns, stamps_);
  PROBE_CUDA(cudaGetLastError());
}

void Probe::launch_gemms(const GemmSequence& seq, int gemms) {
  const float alpha = 1.0f, beta = 0.0f;
  const cudaDataType_t type = seq.fp32 ? CUDA_R_32F : CUDA_R_16BF;
  const cublasComputeType_t compute = seq.fp32 ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F;
  // Slices of the operand buffers (bf16 elements; fp32 takes two each); a batched launch takes
  // `batch` consecutive slices, one per GEMM.
  const long long width = seq.fp32 ? 2 : 1, capacity = kOperandElems / width;
  const long long sizes[3] = {1ll * seq.m * seq.k, 1ll * seq.k * seq.n, 1ll * seq.m * seq.n};
  PROBE_CUDA(cudaEventRecord(gemms_start_, compute_));
  for (int i = 0; i < gemms; ++i) {
    __nv_bfloat16* ops[3] = {a_, b_, c_};
    for (int o = 0; o < 3 && fresh_operands_; ++o) {
      const long long slice = sizes[o] * seq.batch;
      ops[o] += (i % (capacity / slice)) * slice * width;
    }
    if (seq.batch > 1)
      probe_cublas(cublasGemmStridedBatchedEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, seq.m, seq.n, seq.k, &alpha, ops[0], type,
                                              seq.m, sizes[0], ops[1], type, seq.k, sizes[1], &beta, ops[2], type, seq.m,
                                              sizes[2], seq.batch, compute, CUBLAS_GEMM_DEFAULT),
                   "cublasGemmStridedBatchedEx");
    else
      probe_cublas(cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, seq.m, seq.n, seq.k, &alpha, ops[0], type, seq.m,
                                ops[1], type, seq.k, &beta, ops[2], type, seq.m, compute, CUBLAS_GEMM_DEFAULT),
                   "cublasGemmEx");
  }
  PROBE_CUDA(cudaEventRecord(gemms_end_, compute_));
}

// Busy-waits (the host) until `event` completed and `delay_us` more passed.
void wait_after(cudaEvent_t event, double delay_us) {
  while (cudaEventQuery(event) == cudaErrorNotReady) {
  }
  const auto released = std::chrono::steady_clock::now();
  while (std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - released).count() < delay_us) {
  }
}

Timing Probe::run_once(const GemmSequence& seq, int gemms, const Comm* comm, double delay_us, bool comm_first) {
  const Stamps reset{std::numeric_limits<unsigned long long>::max(), 0, 0};
  PROBE_CUDA(cudaMemcpy(stamps_, &reset, sizeof reset, cudaMemcpyHostToDevice));
  // The copy's destination is written before it is read: clearing part of it evicts L2.
  if (fresh_operands_) PROBE_CUDA(cudaMemsetAsync(dst_, 0, kL2FlushBytes, compute_));
  PROBE_CUDA(cudaDeviceSynchronize());
  if (comm != nullptr && comm_first) {
    cudaStream_t s = comm->high_priority ? comm_high_ : comm_normal_;
    PROBE_CUDA(cudaEventRecord(start_, s));
    PROBE_CUDA(cudaEventRecord(arrive_, s));
    launch_comm(*comm, s);
    PROBE_CUDA(cudaEventRecord(comm_end_, s));
    wait_after(start_, delay_us);
    launch_gemms(seq, gemms);
  } else {
    // The blocker keeps the GPU from starting the GEMMs until the host has queued them all.
    blocker_kernel<<<1, 32, 0, compute_>>>(kBlockerNs);
    PROBE_CUDA(cudaEventRecord(start_, compute_));
    launch_gemms(seq, gemms);
    if (comm != nullptr) {
      cudaStream_t s = comm->high_priority ? comm_high_ : comm_normal_;
      wait_after(start_, delay_us);
      PROBE_CUDA(cudaEventRecord(arrive_, s));
      launch_comm(*comm, s);
      PROBE_CUDA(cudaEventRecord(comm_end_, s));
    }
  }
  PROBE_CUDA(cudaDeviceSynchronize());
  return read_timing(comm != nullptr);
}

Timing Probe::read_timing(bool with_comm) {
  Timing t;
  float ms = 0;
  PROBE_CUDA(cudaEventElapsedTime(&ms, start_, gemms_start_));
  t.gemms_start = ms * 1e3;
  PROBE_CUDA(cudaEventElapsedTime(&ms, start_, gemms_end_));
  t.gemms_end = ms * 1e3;
  if (with_comm) {
    Stamps st{};
    PROBE_CUDA(cudaMemcpy(&st, stamps_, sizeof st, cudaMemcpyDeviceToHost));
    PROBE_CUDA(cudaEventElapsedTime(&ms, start_, arrive_));
    t.arrive = ms * 1e3;
    PROBE_CUDA(cudaEventElapsedTime(&ms, start_, comm_end_));
    t.end = ms * 1e3;
    t.duration = static_cast<double>(st.last_end - st.first_start) / 1e3;
    t.cta_mean = static_cast<double>(st.cta_ns) / 1e3;  // divided by the CTAs by the caller
    t.start = t.end - t.duration;
  }
  return t;
}

// Medians of `reps` runs (after two warm-ups).
Timing median_of(Probe& p, int reps, const GemmSequence& seq, int gemms, const Probe::Comm* comm, double delay_us,
                 bool comm_first = false) {
  std::vector<double> arrive, start, end, duration, gemms_start, gemms_end, cta_mean;
  for (int r = 0; r < reps + 2; ++r) {
    const Timing t = p.run_once(seq, gemms, comm, delay_us, comm_first);
    if (r < 2) continue;
    arrive.push_back(t.arrive);
    start.push_back(t.start);
    end.push_back(t.end);
    duration.push_back(t.duration);
    gemms_start.push_back(t.gemms_start);
    gemms_end.push_back(t.gemms_end);
    cta_mean.push_back(comm != nullptr ? t.cta_mean / comm->ctas : 0.0);
  }
  return {median(arrive),      median(start),     median(end),     median(duration),
          median(gemms_start), median(gemms_end), median(cta_mean)};
}

// The copy's bytes for about `target_us` alone with `ctas` CTAs (a multiple of 16 bytes).
long long copy_bytes_for(Probe& p, int reps, int ctas, double target_us) {
  Probe::Comm c;
  c.ctas = ctas;
  c.bytes = kCopySizingBytes;
  const double us = median_of(p, reps, kSequences[0], 0, &c, 0.0).duration;
  const double scaled = static_cast<double>(kCopySizingBytes) * target_us / std::max(us, 1.0);
  const long long bytes = static_cast<long long>(scaled) / 16 * 16;
  return std::clamp(bytes, 1ll << 20, kCopyBufferBytes);
}

void print_row(std::ostream& out, const GemmSequence& seq, const Probe::Comm& c, const char* mode, double gemms_alone,
               double comm_alone, const Timing& t) {
  char line[320];
  const double gemms_run = t.gemms_end - t.gemms_start;
  // The copy's bytes copied per second alone (each byte read once and written once), in GB/s.
  const double copy_gbps = c.copy ? static_cast<double>(c.bytes) / std::max(comm_alone, 1e-3) / 1e3 : 0.0;
  std::snprintf(line, sizeof line,
                "%-20s %-5s %-4s %4d %-6s %9.1f %9.1f %6.0f %8.1f %8.1f %7.1f %9.1f %5.2f %8.1f %9.1f %5.2f %9.1f\n",
                seq.name, mode, c.copy ? "copy" : "hold", c.ctas, c.high_priority ? "high" : "normal", gemms_alone,
                comm_alone, copy_gbps, t.arrive, t.start, t.start - t.arrive, t.duration,
                t.duration / std::max(comm_alone, 1e-3), t.gemms_start, t.gemms_end,
                gemms_run / std::max(gemms_alone, 1e-3), t.end);
  out << line;
}

// The rows of one GEMM sequence: the communication kernel launched a quarter into the GEMMs
// (both priorities), and for the bf16 sequences also launched first, the GEMMs 30 us after it.
void probe_sequence(Probe& probe, int reps, const GemmSequence& seq, std::ostream& out) {
  const double gemms_alone = median_of(probe, reps, seq, seq.count, nullptr, 0.0).gemms_end;
  for (bool copy : {true, false}) {
    for (int ctas : kCtas) {
      Probe::Comm c;
      c.copy = copy;
      c.ctas = ctas;
      c.bytes = copy ? copy_bytes_for(probe, reps, ctas, gemms_alone / 3) : 0;
      c.hold_ns = static_cast<unsigned long long>(gemms_alone / 3 * 1e3);
      const double comm_alone = median_of(probe, reps, seq, 0, &c, 0.0).duration;
      for (bool high : {false, true}) {
        c.high_priority = high;
        print_row(out, seq, c, "mid", gemms_alone, comm_alone,
                  median_of(probe, reps, seq, seq.count, &c, gemms_alone / 4));
      }
      if (seq.fp32) continue;
      c.high_priority = false;
      print_row(out, seq, c, "first", gemms_alone, comm_alone,
                median_of(probe, reps, seq, seq.count, &c, 30.0, /*comm_first=*/true));
    }
  }
}

// The interference table's two communication cells (sim/spec/hardware_spec.h: a task's speed
// while the other class runs, over its speed alone), with fresh operands per GEMM and L2 flushed
// before each run (Probe::use_fresh_operands), each measured while the other side runs for the
// whole timed window:
//   computation.with_communication: `gemms` GEMMs of `seq` launched 30 us into a copy of `ctas`
//     CTAs sized to last three times their time alone: their time alone / their time beside it;
//     again beside a "hold" kernel of as many CTAs (SMs taken without memory traffic);
//   communication.with_computation: a copy of a third of the GEMMs' time, launched 0.3 of the way
//     into a run of 4 x `gemms` GEMMs: its time alone / its time beside them, as the span from its
//     first CTA's start to its last CTA's end (a CTA that waited for the running GEMM's SMs
//     lengthens it) and as the mean time of one CTA from its own start to its end.
// A cell whose other side did not cover the timed window is marked "not covered".
void probe_factors(Probe& probe, int reps, const GemmSequence& seq, int gemms, int ctas, std::ostream& out) {
  const double gemms_alone = median_of(probe, reps, seq, gemms, nullptr, 0.0).gemms_end;
  Probe::Comm c;
  c.ctas = ctas;
  c.bytes = copy_bytes_for(probe, reps, ctas, 3 * gemms_alone);
  const Timing beside_copy = median_of(probe, reps, seq, gemms, &c, 30.0, /*comm_first=*/true);
  const double computation = gemms_alone / std::max(beside_copy.gemms_end - beside_copy.gemms_start, 1e-3);
  const bool computation_covered = beside_copy.end >= beside_copy.gemms_end;
  Probe::Comm hold = c;
  hold.copy = false;
  hold.hold_ns = static_cast<unsigned long long>(3 * gemms_alone * 1e3);
  const Timing beside_hold = median_of(probe, reps, seq, gemms, &hold, 30.0, /*comm_first=*/true);
  const double computation_hold = gemms_alone / std::max(beside_hold.gemms_end - beside_hold.gemms_start, 1e-3);

  const double long_alone = median_of(probe, reps, seq, 4 * gemms, nullptr, 0.0).gemms_end;
  c.bytes = copy_bytes_for(probe, reps, ctas, gemms_alone / 3);
  const Timing copy_alone = median_of(probe, reps, seq, 0, &c, 0.0);
  const Timing beside_gemms = median_of(probe, reps, seq, 4 * gemms, &c, long_alone * 0.3);
  const double communication = copy_alone.duration / std::max(beside_gemms.duration, 1e-3);
  const double communication_cta = copy_alone.cta_mean / std::max(beside_gemms.cta_mean, 1e-3);
  const bool communication_covered = beside_gemms.end <= beside_gemms.gemms_end;

  char line[320];
  std::snprintf(line, sizeof line, "%-20s %6d %4d %9.1f %9.3f%s %9.3f %9.1f %9.1f %9.3f %9.3f%s\n", seq.name, gemms, ctas,
                gemms_alone, computation, computation_covered ? "" : " (not covered)", computation_hold,
                copy_alone.duration, beside_gemms.duration, communication, communication_cta,
                communication_covered ? "" : " (not covered)");
  out << line;
}

// The --shapes sweep: which GEMM shapes lose how much beside a communication kernel. Shapes that
// vary the output tiles (M x N) at a fixed K, the work per tile (K) at fixed tiles, and squares;
// 16-bit GEMMs of tens of tiles to tens of thousands.
constexpr GemmSequence kShapeSweep[] = {
    {"256x2048x2048", 0, 256, 2048, 2048},     {"512x2048x2048", 0, 512, 2048, 2048},
    {"1024x2048x2048", 0, 1024, 2048, 2048},   {"2048x2048x2048", 0, 2048, 2048, 2048},
    {"4096x2048x2048", 0, 4096, 2048, 2048},   {"8192x2048x2048", 0, 8192, 2048, 2048},
    {"16384x2048x2048", 0, 16384, 2048, 2048}, {"4096x2048x512", 0, 4096, 2048, 512},
    {"4096x2048x8192", 0, 4096, 2048, 8192},   {"4096x2048x16384", 0, 4096, 2048, 16384},
    {"4096x256x4096", 0, 4096, 256, 4096},     {"4096x1024x4096", 0, 4096, 1024, 4096},
    {"4096x4096x4096", 0, 4096, 4096, 4096},   {"4096x8192x4096", 0, 4096, 8192, 4096},
    {"1024x1024x1024", 0, 1024, 1024, 1024},   {"8192x8192x8192", 0, 8192, 8192, 8192},
    {"2048x768x2048", 0, 2048, 768, 2048},     {"4096x7168x2048", 0, 4096, 7168, 2048}};
// The --waves series: one shape family's output (M x 2048, K 2048) doubled from an eighth of a
// tile per SM to about sixteen tiles, each beside holds of 1 to 64 CTAs.
constexpr GemmSequence kWaveSweep[] = {{"256x2048x2048", 0, 256, 2048, 2048},
                                       {"512x2048x2048", 0, 512, 2048, 2048},
                                       {"1024x2048x2048", 0, 1024, 2048, 2048},
                                       {"2048x2048x2048", 0, 2048, 2048, 2048},
                                       {"4096x2048x2048", 0, 4096, 2048, 2048},
                                       {"8192x2048x2048", 0, 8192, 2048, 2048},
                                       {"16384x2048x2048", 0, 16384, 2048, 2048},
                                       {"32768x2048x2048", 0, 32768, 2048, 2048}};
// The --batched series: expert-sized GEMMs as one strided-batched launch of several experts (the
// runtime's grouped GEMMs), beside the same GEMM launched alone: whether a batched kernel's
// slowdown follows its whole output or one GEMM's.
constexpr GemmSequence kBatchedSweep[] = {{"2048x768x2048", 0, 2048, 768, 2048},
                                          {"4 x 2048x768x2048", 0, 2048, 768, 2048, false, 4},
                                          {"8 x 2048x768x2048", 0, 2048, 768, 2048, false, 8},
                                          {"16 x 1024x768x2048", 0, 1024, 768, 2048, false, 16},
                                          {"1024x2048x7168", 0, 1024, 2048, 7168},
                                          {"2 x 1024x2048x7168", 0, 1024, 2048, 7168, false, 2},
                                          {"4 x 1024x2048x7168", 0, 1024, 2048, 7168, false, 4},
                                          {"8 x 1024x2048x7168", 0, 1024, 2048, 7168, false, 8},
                                          {"4 x 4096x2048x2048", 0, 4096, 2048, 2048, false, 4}};
constexpr int kShapeCtas[] = {1, 8, 32};
constexpr int kBatchedCtas[] = {8, 16, 32};
constexpr int kWaveCtas[] = {1, 2, 4, 8, 16, 32, 64};
constexpr double kShapeWindowUs = 400;  // the timed window: as many GEMMs of a shape as take this long

// One row per shape: the GEMMs' time alone, and the computation cell beside the hold kernel (SMs
// taken without memory traffic, which calls 16-17 found costs the GEMMs as much as the copy) of
// each CTA count in kShapeCtas, launched first, the GEMMs 30 us after it.
template <std::size_t N>
void probe_shape(Probe& probe, int reps, GemmSequence seq, const int (&cta_counts)[N], std::ostream& out) {
  const double one = median_of(probe, reps, seq, 1, nullptr, 0.0).gemms_end;
  const int gemms = std::clamp(static_cast<int>(kShapeWindowUs / std::max(one, 1.0)) + 1, 1, 256);
  const double alone = median_of(probe, reps, seq, gemms, nullptr, 0.0).gemms_end;
  const double tflops = 2.0 * seq.m * seq.n * seq.k * seq.batch * gemms / (alone * 1e6);
  char line[320];
  int used = std::snprintf(line, sizeof line, "%-22s %6d %10.1f %8.1f", seq.name, gemms, alone / gemms, tflops);
  for (int ctas : cta_counts) {
    Probe::Comm hold;
    hold.copy = false;
    hold.ctas = ctas;
    hold.hold_ns = static_cast<unsigned long long>(3 * alone * 1e3);
    const Timing t = median_of(probe, reps, seq, gemms, &hold, 30.0, /*comm_first=*/true);
    const bool covered = t.end >= t.gemms_end;
    used += std::snprintf(line + used, sizeof line - used, " %7.3f%s", alone / std::max(t.gemms_end - t.gemms_start, 1e-3),
                          covered ? "" : "*");
  }
  std::snprintf(line + used, sizeof line - used, "\n");
  out << line;
}

}  // namespace

void run_sm_share_shapes(const SmShareOptions& options, ShapeSweep sweep, std::ostream& out) {
  Probe probe(options.ordinal);
  probe.use_fresh_operands();
  out << "# " << probe.describe() << "\n# medians of " << options.repetitions
      << " runs; bf16 GEMMs (fp32 accumulate), each its own operands, L2 flushed before each run; speed beside a"
         " hold kernel of each CTA count over speed alone (* : the hold ended before the GEMMs)\n";
  switch (sweep) {
    case ShapeSweep::kShapes:
      out << "# shape (MxNxK)     gemms  us_per_gemm  TFLOP/s  hold1  hold8  hold32\n";
      for (const GemmSequence& seq : kShapeSweep) probe_shape(probe, options.repetitions, seq, kShapeCtas, out);
      break;
    case ShapeSweep::kWaves:
      out << "# shape (MxNxK)     gemms  us_per_gemm  TFLOP/s  hold1  hold2  hold4  hold8 hold16 hold32 hold64\n";
      for (const GemmSequence& seq : kWaveSweep) probe_shape(probe, options.repetitions, seq, kWaveCtas, out);
      break;
    case ShapeSweep::kBatched:
      out << "# launch (batch x MxNxK)  launches  us_per_launch  TFLOP/s  hold8 hold16 hold32\n";
      for (const GemmSequence& seq : kBatchedSweep) probe_shape(probe, options.repetitions, seq, kBatchedCtas, out);
      break;
  }
}

void run_sm_share_factors(const SmShareOptions& options, std::ostream& out) {
  Probe probe(options.ordinal);
  probe.use_fresh_operands();
  out << "# " << probe.describe() << "\n# medians of " << options.repetitions
      << " runs; interference cells with the copy stand-in (speed beside the other class / speed alone);"
         " each GEMM its own operands, L2 flushed before each run\n"
      << "# sequence           gemms ctas gemms_us computation.with_communication (copy, hold) copy_us beside_us"
         " communication.with_computation (span, per CTA)\n";
  for (const FactorCase& fc : kFactorCases)
    for (int ctas : kFactorCtas) probe_factors(probe, options.repetitions, fc.seq, fc.window_gemms, ctas, out);
}

void run_sm_share_probe(const SmShareOptions& options, std::ostream& out) {
  Probe probe(options.ordinal);
  out << "# " << probe.describe() << "\n# medians of " << options.repetitions
      << " runs; times in us after the first start; mid: comm launched a quarter into the GEMMs' time alone,"
         " first: comm launched first, the GEMMs 30 us after it began\n"
      << "# sequence           mode  kind ctas prio   gemms_us   comm_us   GB/s   arrive    start    wait  comm_run     x"
         " gemms_at gemms_end     x  comm_end\n";
  for (const GemmSequence& seq : kSequences) probe_sequence(probe, options.repetitions, seq, out);
}

}  // namespace moesim::runtime
