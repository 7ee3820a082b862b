// The routing kernels on a GPU against their host versions, position by position: the sort-based
// capacity assignment (exactly equal, any number of experts, with dropping) and top-k routing
// (the same choices). Label `gpu`: skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
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

// The activation kernels (16-byte packs where the width and the arrays allow, else one element at
// a time) against the host's: fp32 within a few ulps in both layouts; bf16 packed and unpacked
// within one bf16 rounding of each other. Widths 128 (packs), 6 (packs in fp32 only) and 97
// (never); offset 1 element misaligns every array, so the same data takes the unpacked kernel.
struct ActivationCase {
  ActivationKind act;
  std::int64_t rows, width;
  std::int64_t in_width() const { return act == ActivationKind::kSwiglu ? 2 * width : width; }
};

// Forward a, then backward dh and a again, of `h` and `da` (fp32 values, stored as T) on the GPU,
// every array starting `offset` elements into its allocation; outputs as floats.
template <typename T, typename ToT, typename ToF>
std::vector<std::vector<float>> activation_on_gpu(OneGpu& gpu, const ActivationCase& c, const std::vector<float>& h,
                                                  const std::vector<float>& da, int offset, Storage type, ToT to_t,
                                                  ToF to_f) {
  const auto device = [&](const std::vector<float>& v) {
    std::vector<T> bits(static_cast<std::size_t>(offset));
    for (float x : v) bits.push_back(to_t(x));
    return bits;
  };
  const std::vector<float> nan_rows(static_cast<std::size_t>(c.rows * c.in_width()),
                                    std::numeric_limits<float>::quiet_NaN());
  DeviceVector<T> d_h(*gpu.dev, device(h), gpu.stream), d_da(*gpu.dev, device(da), gpu.stream),
      d_a(*gpu.dev, device(std::vector<float>(da.size(), 7.f)), gpu.stream),
      d_dh(*gpu.dev, device(nan_rows), gpu.stream), d_a2(*gpu.dev, device(std::vector<float>(da.size(), 7.f)), gpu.stream);
  gpu.dev->activation(ActivationArgs{c.act, c.rows, c.width, d_h.ptr + offset, d_a.ptr + offset, type}, gpu.stream);
  gpu.dev->activation_backward(ActivationBackwardArgs{c.act, c.rows, c.width, d_h.ptr + offset, d_da.ptr + offset,
                                                      d_dh.ptr + offset, d_a2.ptr + offset, type},
                               gpu.stream);
  gpu.dev->synchronize();
  std::vector<std::vector<float>> out;
  for (const DeviceVector<T>* d : {&d_a, &d_dh, &d_a2}) {
    const std::vector<T> got = d->download();
    std::vector<float> values;
    for (std::size_t i = static_cast<std::size_t>(offset); i < got.size(); ++i) values.push_back(to_f(got[i]));
    out.push_back(values);
  }
  return out;
}

std::uint16_t to_bf16(float x) {  // round to nearest even (finite inputs)
  std::uint32_t bits = 0;
  std::memcpy(&bits, &x, 4);
  return static_cast<std::uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}
float from_bf16(std::uint16_t b) {
  const std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
  float x = 0;
  std::memcpy(&x, &bits, 4);
  return x;
}

TEST(KernelsGpu, ActivationsPackedOrNotEqualTheHosts) {
  MOESIM_REQUIRE_GPU_OR_SKIP();
  OneGpu gpu;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.f, 2.f);
  for (ActivationKind act : {ActivationKind::kRelu, ActivationKind::kGelu, ActivationKind::kSwiglu})
    for (std::int64_t width : {128, 6, 97}) {
      const ActivationCase c{act, 37, width};
      std::vector<float> h(static_cast<std::size_t>(c.rows * c.in_width())), da(static_cast<std::size_t>(c.rows * width));
      for (float& x : h) x = from_bf16(to_bf16(normal(rng)));  // exact in bf16 too
      for (float& x : da) x = from_bf16(to_bf16(normal(rng)));
      std::vector<float> a(da.size()), dh(h.size()), a2(da.size());
      host::activation(ActivationArgs{act, c.rows, width, h.data(), a.data(), Storage::kF32});
      host::activation_backward(
          ActivationBackwardArgs{act, c.rows, width, h.data(), da.data(), dh.data(), a2.data(), Storage::kF32});
      const std::vector<std::vector<float>> want{a, dh, a2};
      const std::string label = "act " + std::to_string(static_cast<int>(act)) + " width " + std::to_string(width);
      std::vector<std::vector<float>> bf16_by_offset[2];
      for (int offset : {0, 1}) {
        const auto got = activation_on_gpu<float>(gpu, c, h, da, offset, Storage::kF32, [](float x) { return x; },
                                                  [](float x) { return x; });
        for (std::size_t o = 0; o < want.size(); ++o)
          for (std::size_t i = 0; i < want[o].size(); ++i)
            ASSERT_NEAR(got[o][i], want[o][i], 4e-6f * (1.f + std::abs(want[o][i])))
                << label << " fp32 offset " << offset << " output " << o << " at " << i;
        bf16_by_offset[offset] = activation_on_gpu<std::uint16_t>(gpu, c, h, da, offset, Storage::kBf16, to_bf16,
                                                                  from_bf16);
      }
      for (std::size_t o = 0; o < want.size(); ++o)
        for (std::size_t i = 0; i < want[o].size(); ++i) {
          const float packed = bf16_by_offset[0][o][i], unpacked = bf16_by_offset[1][o][i];
          ASSERT_NEAR(packed, unpacked, std::abs(unpacked) / 128.f + 1e-30f) << label << " bf16 output " << o << " at " << i;
          ASSERT_NEAR(packed, want[o][i], std::abs(want[o][i]) / 64.f + 1e-6f) << label << " bf16 vs host, output " << o;
        }
    }
}

// encode, decode, decode's backward and encode's backward on the GPU against the host, in fp32,
// with every array aligned (the packed kernels where d_model allows) and misaligned by one element
// (the element-wise ones): rows assigned to (token, choice) pairs with some choices dropped.
TEST(KernelsGpu, GathersAndScattersPackedOrNotEqualTheHosts) {
  MOESIM_REQUIRE_GPU_OR_SKIP();
  OneGpu gpu;
  DeviceOps& dev = *gpu.dev;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.f, 1.f);
  const std::int64_t B = 50, rows = 96;
  const int k = 2;
  for (std::int64_t M : {64, 6, 97}) {
    std::vector<std::int32_t> topk_row(static_cast<std::size_t>(B * k), -1), row_token(rows, -1), row_choice(rows, 0);
    std::int32_t next = 0;
    for (std::int64_t i = 0; i < B * k; ++i)
      if (rng() % 5 != 0) {  // a fifth of the choices dropped
        topk_row[i] = next;
        row_token[next] = static_cast<std::int32_t>(i / k);
        row_choice[next++] = static_cast<std::int32_t>(i % k);
      }
    std::vector<float> x(static_cast<std::size_t>(B * M)), expert_out(static_cast<std::size_t>(rows * M)),
        dy(x.size()), score(topk_row.size());
    for (auto* v : {&x, &expert_out, &dy, &score})
      for (float& e : *v) e = normal(rng);
    std::vector<float> enc(expert_out.size()), y(x.size()), d_out(expert_out.size()), dscores(score.size()),
        dx(x.size());
    host::encode(EncodeArgs{x.data(), row_token.data(), M, 0, rows, enc.data(), Storage::kF32});
    host::decode(DecodeArgs{expert_out.data(), topk_row.data(), score.data(), B, k, M, y.data(), Storage::kF32});
    host::decode_backward(DecodeBackwardArgs{dy.data(), expert_out.data(), topk_row.data(), score.data(),
                                             row_token.data(), row_choice.data(), B, k, rows, M, d_out.data(),
                                             dscores.data(), Storage::kF32});
    host::encode_backward(EncodeBackwardArgs{expert_out.data(), topk_row.data(), B, k, M, dx.data(), Storage::kF32});
    const std::vector<std::vector<float>> want{enc, y, d_out, dscores, dx};

    DeviceVector<std::int32_t> d_topk(dev, topk_row, gpu.stream), d_token(dev, row_token, gpu.stream),
        d_choice(dev, row_choice, gpu.stream);
    DeviceVector<float> d_score(dev, score, gpu.stream);
    for (int offset : {0, 1}) {
      const auto shifted = [&](const std::vector<float>& v) {
        std::vector<float> out(static_cast<std::size_t>(offset), 0.f);
        out.insert(out.end(), v.begin(), v.end());
        return out;
      };
      const auto nans = [&](std::size_t n) { return shifted(std::vector<float>(n, std::nanf(""))); };
      DeviceVector<float> d_x(dev, shifted(x), gpu.stream), d_eo(dev, shifted(expert_out), gpu.stream),
          d_dy(dev, shifted(dy), gpu.stream), d_enc(dev, nans(enc.size()), gpu.stream),
          d_y(dev, nans(y.size()), gpu.stream), d_dout(dev, nans(d_out.size()), gpu.stream),
          d_ds(dev, std::vector<float>(dscores.size(), std::nanf("")), gpu.stream), d_dx(dev, nans(dx.size()), gpu.stream);
      const int o = offset;
      dev.encode(EncodeArgs{d_x.ptr + o, d_token.ptr, M, 0, rows, d_enc.ptr + o, Storage::kF32}, gpu.stream);
      dev.decode(DecodeArgs{d_eo.ptr + o, d_topk.ptr, d_score.ptr, B, k, M, d_y.ptr + o, Storage::kF32}, gpu.stream);
      dev.decode_backward(DecodeBackwardArgs{d_dy.ptr + o, d_eo.ptr + o, d_topk.ptr, d_score.ptr, d_token.ptr,
                                             d_choice.ptr, B, k, rows, M, d_dout.ptr + o, d_ds.ptr, Storage::kF32},
                          gpu.stream);
      dev.encode_backward(EncodeBackwardArgs{d_eo.ptr + o, d_topk.ptr, B, k, M, d_dx.ptr + o, Storage::kF32},
                          gpu.stream);
      dev.synchronize();
      const std::vector<std::vector<float>> got{d_enc.download(), d_y.download(), d_dout.download(), d_ds.download(),
                                                d_dx.download()};
      for (std::size_t out = 0; out < want.size(); ++out) {
        const std::size_t skip = out == 3 ? 0 : static_cast<std::size_t>(o);  // dscores is never shifted
        for (std::size_t i = 0; i < want[out].size(); ++i)
          ASSERT_NEAR(got[out][i + skip], want[out][i], 1e-5f * (1.f + std::abs(want[out][i])))
              << "d_model " << M << " offset " << o << " output " << out << " at " << i;
      }
    }
  }
}

}  // namespace
}  // namespace moesim::runtime
