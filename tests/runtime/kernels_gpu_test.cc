// The routing kernels on a GPU against their host versions, position by position: the sort-based
// capacity assignment (exactly equal, any number of experts, with dropping) and top-k routing
// (the same choices). Label `gpu`: skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "kernels/assignment_cases.h"
#include "runtime/exec/cuda_device.h"
#include "runtime/kernels/host_kernels.h"

namespace moesim::runtime {
namespace {

// A device copy of a host vector, freed with the test.
template <typename T>
struct DeviceVector {
  DeviceOps& dev;
  std::int64_t count;
  T* ptr;
  DeviceVector(DeviceOps& d, const std::vector<T>& host, int stream)
      : dev(d), count(static_cast<std::int64_t>(host.size())),
        ptr(static_cast<T*>(d.alloc_device(count * static_cast<std::int64_t>(sizeof(T)), "a test array"))) {
    if (count > 0) dev.copy(ptr, host.data(), count * static_cast<std::int64_t>(sizeof(T)), stream);
    dev.synchronize();  // `host` may be a temporary: the copy must have read it
  }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;
  ~DeviceVector() { dev.free_device(ptr); }
  std::vector<T> download() const {
    std::vector<T> out(static_cast<std::size_t>(count));
    if (count > 0) dev.download(out.data(), ptr, count * static_cast<std::int64_t>(sizeof(T)));
    return out;
  }
};

// GPU 0 and a stream on it.
struct OneGpu {
  std::unique_ptr<DeviceProvider> provider = make_cuda_provider();
  std::unique_ptr<DeviceOps> dev = provider->open(0);
  int stream = dev->create_stream();
};

TEST(KernelsGpu, CapacityAssignmentEqualsTheSequentialDefinition) {
  MOESIM_REQUIRE_GPU_OR_SKIP();
  OneGpu gpu;
  DeviceOps* dev = gpu.dev.get();
  const int stream = gpu.stream;
  std::mt19937 rng(5);
  const testing::AssignmentCase cases[] = {{1, 1, 1, 1, 1},          {37, 3, 2, 8, 4},
                                           {4096, 8, 2, 1024, 4},     {16384, 64, 2, 256, 8},
                                           {16384, 64, 8, 2048, 8},   {2000, 2048, 16, 4, 2},
                                           {3000, 5000, 12, 2, 1},    {200, 16, 16, 400, 8}};
  for (const testing::AssignmentCase& c : cases)
    for (bool skewed : {false, true}) {
      const std::vector<std::int32_t> topk_idx = testing::random_choices(c, skewed, rng);
      testing::Assignment expected;
      host::assign(expected.args(topk_idx, c));

      const std::int64_t scratch_bytes = dev->assign_scratch_bytes(c.tokens, c.k, c.experts);
      const auto poisoned = [](const std::vector<std::int32_t>& like) { return std::vector<std::int32_t>(like.size(), 7); };
      DeviceVector<std::int32_t> d_idx(*dev, topk_idx, stream), d_row(*dev, poisoned(expected.topk_row), stream),
          d_token(*dev, poisoned(expected.row_token), stream), d_choice(*dev, poisoned(expected.row_choice), stream),
          d_count(*dev, poisoned(expected.tokens_per_expert), stream);
      DeviceVector<char> scratch(*dev, std::vector<char>(static_cast<std::size_t>(scratch_bytes), 0x5A), stream);
      dev->assign(AssignArgs{d_idx.ptr, c.tokens, c.experts, c.k, c.capacity, c.chunks, d_row.ptr, d_token.ptr,
                             d_choice.ptr, d_count.ptr, scratch.ptr, scratch_bytes},
                  stream);
      dev->synchronize();
      testing::Assignment got{d_row.download(), d_token.download(), d_choice.download(), d_count.download()};
      EXPECT_TRUE(got == expected) << c.label(skewed);
    }
}

TEST(KernelsGpu, RoutingPicksTheHostsExperts) {
  MOESIM_REQUIRE_GPU_OR_SKIP();
  OneGpu gpu;
  DeviceOps* dev = gpu.dev.get();
  const int stream = gpu.stream;
  std::mt19937 rng(9);
  for (int E : {8, 256, 3000})
    for (int k : {1, 8, 16}) {
      if (k > E) continue;
      const std::int64_t B = 512;
      // Logits on a grid of 1/8: exact ties decided by index, other gaps far above expf's error.
      std::uniform_int_distribution<int> level(-16, 16);
      std::vector<float> logits(static_cast<std::size_t>(B * E));
      for (float& l : logits) l = static_cast<float>(level(rng)) / 8.0f;
      std::vector<float> probs(logits.size()), score(static_cast<std::size_t>(B * k));
      std::vector<std::int32_t> idx(score.size());
      host::route(RouteArgs{logits.data(), B, E, k, true, probs.data(), idx.data(), score.data()});

      const float nan = std::numeric_limits<float>::quiet_NaN();
      DeviceVector<float> d_logits(*dev, logits, stream), d_probs(*dev, std::vector<float>(probs.size(), nan), stream),
          d_score(*dev, std::vector<float>(score.size(), nan), stream);
      DeviceVector<std::int32_t> d_idx(*dev, std::vector<std::int32_t>(idx.size(), -7), stream);
      dev->route(RouteArgs{d_logits.ptr, B, E, k, true, d_probs.ptr, d_idx.ptr, d_score.ptr}, stream);
      dev->synchronize();
      const std::string label = "E " + std::to_string(E) + " k " + std::to_string(k);
      EXPECT_EQ(d_idx.download(), idx) << label;
      const std::vector<float> got = d_score.download(), got_probs = d_probs.download();
      for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], score[i], 1e-5f * (1 + score[i])) << label;
      for (std::size_t i = 0; i < got_probs.size(); ++i) ASSERT_NEAR(got_probs[i], probs[i], 1e-6f) << label;
    }
}

}  // namespace
}  // namespace moesim::runtime
