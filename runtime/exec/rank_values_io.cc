#include "runtime/exec/rank_values_io.h"

#include <array>
#include <cstdint>
#include <cstring>

#include "sim/core/error.h"

namespace moesim::runtime {

namespace {

constexpr std::size_t kTensors = 16;

// Every tensor of RankValues in a fixed order, as (pointer to vector, element size).
template <typename Values, typename Visit>
void for_each_tensor(Values& v, Visit visit) {
  for (auto* f : {&v.x, &v.dy, &v.gate, &v.w1, &v.w2, &v.y, &v.dx, &v.dgate, &v.dw1, &v.dw2, &v.shared_w1,
                  &v.shared_w2, &v.dshared_w1, &v.dshared_w2})
    visit(*f);
  for (auto* i : {&v.topk_idx, &v.topk_row}) visit(*i);
}

}  // namespace

std::vector<std::byte> pack_rank_values(const RankValues& values) {
  std::array<std::uint64_t, kTensors> lengths{};
  std::size_t k = 0, payload = 0;
  for_each_tensor(values, [&](const auto& t) {
    lengths[k++] = t.size();
    payload += t.size() * sizeof(t[0]);
  });
  std::vector<std::byte> out(sizeof lengths + payload);
  std::memcpy(out.data(), lengths.data(), sizeof lengths);
  std::size_t at = sizeof lengths;
  for_each_tensor(values, [&](const auto& t) {
    if (t.empty()) return;
    std::memcpy(out.data() + at, t.data(), t.size() * sizeof(t[0]));
    at += t.size() * sizeof(t[0]);
  });
  return out;
}

RankValues unpack_rank_values(const std::vector<std::byte>& bytes) {
  std::array<std::uint64_t, kTensors> lengths{};
  if (bytes.size() < sizeof lengths) throw InternalError("rank values: " + std::to_string(bytes.size()) + " bytes is no header");
  std::memcpy(lengths.data(), bytes.data(), sizeof lengths);
  RankValues v;
  std::size_t k = 0, at = sizeof lengths;
  for_each_tensor(v, [&](auto& t) {
    const std::size_t n = static_cast<std::size_t>(lengths[k++]);
    const std::size_t size = n * sizeof(t[0]);
    if (n > bytes.size() || at + size > bytes.size())
      throw InternalError("rank values: tensor " + std::to_string(k - 1) + " runs past the end of the bytes");
    t.resize(n);
    if (n > 0) std::memcpy(t.data(), bytes.data() + at, size);
    at += size;
  });
  if (at != bytes.size()) throw InternalError("rank values: " + std::to_string(bytes.size() - at) + " bytes left over");
  return v;
}

}  // namespace moesim::runtime
