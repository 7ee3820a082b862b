// What the GPU runtime does when things go wrong on a real GPU: an allocation beyond the device's
// memory names the requested and free bytes; a collective that can never complete ends in the
// NCCL watchdog's error, with the communicators aborted, instead of a hang. Label `gpu`.
//
// The watchdog test leaves an aborted communicator behind, so validate/gpu_session.sh runs it
// in a process of its own (--gtest_filter=NcclWatchdog.*) after the other GPU tests.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "runtime/comm/transport.h"
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

// One rank sends to itself with no matching receive: NCCL waits for ever. The transport's
// wait_for must abort the communicators after MOESIM_NCCL_TIMEOUT_S and throw, naming the cause.
TEST(NcclWatchdog, AbortsACollectiveThatCannotComplete) {
  MOESIM_REQUIRE_GPU_OR_SKIP();
  ::setenv("MOESIM_NCCL_TIMEOUT_S", "2", 1);  // read when the transport is made
  auto provider = make_cuda_provider();
  std::unique_ptr<DeviceOps> dev = provider->open(0);
  std::unique_ptr<Transport> transport;
  try {
    transport = provider->multi_device_transport({dev.get()});
  } catch (const InputError& e) {
    GTEST_SKIP() << e.what();  // a build without NCCL
  }
  const int stream = dev->create_stream();
  void* send = dev->alloc_device(4096, "send");
  void* recv = dev->alloc_device(4096, "recv");
  AllToAllvMember m;
  m.rank = 0;
  m.device = dev.get();
  m.stream = stream;
  m.send = send;
  m.send_bytes = {4096};
  m.recv = recv;
  m.recv_bytes = {0};  // the receive that would match the send is missing
  std::string error;
  try {
    transport->all_to_allv({m}, 0);  // NCCL may refuse the group at once
    transport->wait_for({dev.get()});
  } catch (const InternalError& e) {
    error = e.what();
  }
  ASSERT_FALSE(error.empty()) << "the unmatched send completed";
  EXPECT_NE(error.find("NCCL"), std::string::npos) << error;
  std::cout << "watchdog: " << error << "\n";
  // The device memory and the aborted communicators are left to process exit: the stream may
  // still hold the aborted kernel, and freeing under it could block.
  static_cast<void>(dev.release());
  static_cast<void>(transport.release());
}

}  // namespace
}  // namespace moesim::runtime
