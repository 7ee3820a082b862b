// What the GPU runtime does when things go wrong on a real GPU: an allocation beyond the device's
// memory names the requested and free bytes; a step that does not finish in time ends in the
// NCCL watchdog's error, with the communicators aborted, instead of a hang. Label `gpu`.
//
// The watchdog test leaves aborted communicators behind, so validate/gpu_session.sh runs it in a
// process of its own (--gtest_filter=NcclWatchdog.*) after the other GPU tests.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gpu_test_util.h"
#include "runtime/comm/transport.h"
#include "runtime/exec/cuda_device.cuh"
#include "runtime/exec/cuda_device.h"
#include "sim/core/error.h"

namespace moesim::runtime {
namespace {

TEST(CudaDeviceGpu, OutOfMemoryNamesTheRequestedAndFreeBytes) {
  MOESIM_REQUIRE_GPU_OR_SKIP();
  auto provider = make_cuda_provider();
  std::unique_ptr<DeviceOps> dev = provider->open(0);
  const std::int64_t huge = std::int64_t{1} << 50;  // 1 PiB: more than any GPU has
  try {
    dev->alloc_device(huge, "a test buffer");
    FAIL() << "a 1 PiB allocation succeeded";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("out of device memory for a test buffer"), std::string::npos) << what;
    EXPECT_NE(what.find("requested " + std::to_string(huge) + " bytes"), std::string::npos) << what;
    EXPECT_NE(what.find("bytes free"), std::string::npos) << what;
  }
  // The device is still usable afterwards (the allocation error was cleared).
  void* p = dev->alloc_device(1 << 20, "a small buffer");
  dev->free_device(p);
}

// Holds a stream on the device until released: a 32-bit stream memory wait on a flag in mapped
// host memory (cuStreamWaitValue32, reached through cudaGetDriverEntryPointByVersion so that the
// driver library is not linked). A first version held the stream with a host function instead; on
// an H200 (NCCL 2.28) the exchange queued behind it then blocked the host thread until the release
// and the watchdog never ran: a host function occupies CUDA's callback thread, which the launch
// waited for. A memory wait holds only the stream, as a peer that never arrives does.
class StreamHold {
 public:
  explicit StreamHold(cudaStream_t stream) {
    void* host_flag = nullptr;
    EXPECT_EQ(cudaHostAlloc(&host_flag, sizeof(std::uint32_t), cudaHostAllocMapped), cudaSuccess);
    flag_ = static_cast<volatile std::uint32_t*>(host_flag);
    *flag_ = 0;
    void* device_flag = nullptr;
    EXPECT_EQ(cudaHostGetDevicePointer(&device_flag, const_cast<std::uint32_t*>(flag_), 0), cudaSuccess);
    PFN_cuStreamWaitValue32_v11070 wait_value = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    EXPECT_EQ(cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", reinterpret_cast<void**>(&wait_value), 12000,
                                               cudaEnableDefault, &found),
              cudaSuccess);
    EXPECT_EQ(found, cudaDriverEntryPointSuccess);
    if (wait_value != nullptr) {
      EXPECT_EQ(wait_value(reinterpret_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(device_flag), 1,
                           CU_STREAM_WAIT_VALUE_GEQ),
                CUDA_SUCCESS);
    }
  }
  void release() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    *flag_ = 1;
  }
  // The flag is left mapped: the held stream may still read it after an abort (process exit frees it).

 private:
  volatile std::uint32_t* flag_ = nullptr;
};

struct WatchdogOutcome {
  std::string error;    // empty when wait_for returned
  double seconds = 0;   // issue and wait together
  double issue_s = 0;   // in all_to_allv (issuing must not block: the watchdog runs only after it)
};

// Issues `members`' all-to-allv and waits for the step with the transport's watchdog set to 2 s.
// With `hold`, the exchange is first run once unheld (NCCL's lazy set-up, as after a run's warm-up
// steps), then issued behind a hold released after 6 s.
WatchdogOutcome wait_with_watchdog(Transport& transport, const std::vector<AllToAllvMember>& members,
                                   const std::vector<DeviceOps*>& devices, cudaStream_t hold) {
  std::unique_ptr<StreamHold> held;
  if (hold != nullptr) {
    transport.all_to_allv(members, 0);
    transport.wait_for(devices);
    held = std::make_unique<StreamHold>(hold);
  }
  WatchdogOutcome out;
  std::atomic<bool> done{false};
  const auto start = std::chrono::steady_clock::now();
  std::thread releaser([&] {
    for (int i = 0; i < 600 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (held) held->release();
  });
  try {
    transport.all_to_allv(members, 0);
    out.issue_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    transport.wait_for(devices);
  } catch (const InternalError& e) {
    out.error = e.what();
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  done = true;
  releaser.join();
  return out;
}

AllToAllvMember member(int rank, DeviceOps* dev, int ranks, std::int64_t bytes, bool receive) {
  AllToAllvMember m;
  m.rank = rank;
  m.device = dev;
  m.stream = dev->create_stream();
  m.send = dev->alloc_device(bytes * ranks, "send");
  m.recv = dev->alloc_device(bytes * ranks, "recv");
  m.send_bytes.assign(static_cast<std::size_t>(ranks), 0);
  m.recv_bytes.assign(static_cast<std::size_t>(ranks), receive ? bytes : 0);
  m.send_bytes[static_cast<std::size_t>((rank + 1) % ranks)] = bytes;  // to the next rank (itself when alone)
  return m;
}

// A step that does not finish within MOESIM_NCCL_TIMEOUT_S ends in the watchdog's error, with the
// communicators aborted, instead of a hang. One GPU: a valid exchange with itself, held back
// behind a host function for longer than the timeout. Two or more GPUs, also: rank 0 sends to
// rank 1, which never posts its receive (NCCL waits for ever). The device state after an abort is
// left to process exit (validate/gpu_session.sh runs this test in a process of its own).
TEST(NcclWatchdog, AbortsAStepThatDoesNotFinishInTime) {
  MOESIM_REQUIRE_GPU_OR_SKIP();
  const char* previous = std::getenv("MOESIM_NCCL_TIMEOUT_S");
  const std::string saved = previous != nullptr ? previous : "";
  ::setenv("MOESIM_NCCL_TIMEOUT_S", "2", 1);  // read when a transport is made
  auto provider = make_cuda_provider();
  std::vector<std::unique_ptr<DeviceOps>> devices;
  devices.push_back(provider->open(0));
  std::unique_ptr<Transport> alone;
  try {
    alone = provider->multi_device_transport({devices[0].get()});
  } catch (const InputError& e) {
    GTEST_SKIP() << e.what();  // a build without NCCL
  }
  DeviceOps* dev0 = devices[0].get();
  const AllToAllvMember self = member(0, dev0, 1, 4096, true);
  const WatchdogOutcome held = wait_with_watchdog(*alone, {self}, {dev0},
                                                  dynamic_cast<CudaDevice&>(*dev0).native_stream(self.stream));
  EXPECT_NE(held.error.find("NCCL watchdog: the step did not finish within 2"), std::string::npos) << held.error;
  EXPECT_NE(held.error.find("the communicators were aborted"), std::string::npos) << held.error;
  EXPECT_GE(held.seconds, 2.0);
  EXPECT_LT(held.issue_s, 1.0) << "issuing the exchange blocked";
  std::cout << "one GPU, held stream: " << held.error << " (" << held.seconds << " s, issue " << held.issue_s
            << " s)\n";

  if (provider->num_devices() >= 2) {
    devices.push_back(provider->open(1));
    std::unique_ptr<Transport> pair = provider->multi_device_transport({dev0, devices[1].get()});
    const AllToAllvMember sender = member(0, dev0, 2, 4096, false);
    const WatchdogOutcome stuck = wait_with_watchdog(*pair, {sender}, {dev0, devices[1].get()}, nullptr);
    EXPECT_NE(stuck.error.find("NCCL watchdog: the step did not finish within 2"), std::string::npos) << stuck.error;
    std::cout << "two GPUs, receive never posted: " << stuck.error << " (" << stuck.seconds << " s)\n";
    static_cast<void>(pair.release());
  } else {
    std::cout << "two GPUs, receive never posted: not run, one GPU visible\n";
  }
  static_cast<void>(alone.release());
  for (auto& d : devices) static_cast<void>(d.release());
  if (previous != nullptr)
    ::setenv("MOESIM_NCCL_TIMEOUT_S", saved.c_str(), 1);
  else
    ::unsetenv("MOESIM_NCCL_TIMEOUT_S");
}

}  // namespace
}  // namespace moesim::runtime
