#include "runtime/reference/expert_parallel.h"

#include <algorithm>
#include <string>

#include "sim/core/error.h"

namespace moesim::runtime::reference {

ExpertParallelResult run_unpartitioned(const MoeLayerShape& shape, const MoeLayerParams& params,
                                       const std::vector<Matrix>& x, const std::vector<Matrix>& dy,
                                       const std::vector<std::vector<int>>* forced_topk) {
  if (x.size() != dy.size()) throw InputError("run_unpartitioned: one dY per batch of x");
  if (forced_topk != nullptr && forced_topk->size() != x.size())
    throw InputError("run_unpartitioned: one forced top-k per batch of x");
  ExpertParallelResult res;
  res.grads = zero_gradients(shape);
  for (std::size_t r = 0; r < x.size(); ++r) {
    const MoeForward f = moe_forward(shape, params, x[r], forced_topk != nullptr ? &(*forced_topk)[r] : nullptr);
    backward_accumulate(shape, params, x[r], f, dy[r], res.grads);
    res.y.push_back(f.y);
    res.dx.push_back(std::move(res.grads.dx));
  }
  res.grads.dx = Matrix();
  res.grads.dlogits = Matrix();
  res.grads.dscores.clear();
  return res;
}

namespace {

bool offloads_di(MemoryStrategy s) { return s == MemoryStrategy::kS1 || s == MemoryStrategy::kS3; }
bool offloads_m(MemoryStrategy s) { return s == MemoryStrategy::kS1 || s == MemoryStrategy::kS2; }
bool recomputes(MemoryStrategy s) { return s == MemoryStrategy::kS3 || s == MemoryStrategy::kS4; }

// Rows of the exchange buffers. A per-chunk slice of an [E, C, M] tensor has rows e * Cc + s
// (expert-major), which is also (peer, local expert, slot) order: the block for peer p is
// contiguous. After the all-to-all, rank q holds rows (source, local expert, slot).
class Partition {
 public:
  Partition(const MoeLayerShape& shape, const ExpertParallelOptions& o)
      : shape_(shape), ranks_(o.ep_size), local_(shape.num_experts / o.ep_size),
        chunk_slots_(shape.capacity / o.num_chunks) {}

  std::int64_t block_rows() const { return local_ * chunk_slots_; }
  std::int64_t exchange_rows() const { return ranks_ * block_rows(); }

  // Chunk c of a [E*C, cols] tensor, rows e * Cc + s.
  Matrix take_chunk(const Matrix& full, int c) const {
    Matrix out(exchange_rows(), full.cols);
    for (int e = 0; e < shape_.num_experts; ++e)
      std::copy_n(full.row(e * shape_.capacity + c * chunk_slots_), chunk_slots_ * full.cols,
                  out.row(e * chunk_slots_));
    return out;
  }

  void put_chunk(const Matrix& chunk, int c, Matrix& full) const {
    for (int e = 0; e < shape_.num_experts; ++e)
      std::copy_n(chunk.row(e * chunk_slots_), chunk_slots_ * full.cols,
                  full.row(e * shape_.capacity + c * chunk_slots_));
  }

  // Pairwise all-to-all as a permutation of blocks: recv[q] block r = send[r] block q.
  std::vector<Matrix> all_to_all(const std::vector<Matrix>& send) const {
    std::vector<Matrix> recv;
    for (int q = 0; q < ranks_; ++q) recv.emplace_back(exchange_rows(), send[0].cols);
    const std::int64_t n = block_rows() * send[0].cols;
    for (int r = 0; r < ranks_; ++r)
      for (int q = 0; q < ranks_; ++q)
        std::copy_n(send[static_cast<std::size_t>(r)].row(q * block_rows()), n,
                    recv[static_cast<std::size_t>(q)].row(r * block_rows()));
    return recv;
  }

  // The R * Cc rows of local expert el in a received buffer, in (source, slot) order.
  Matrix gather_expert(const Matrix& buf, int el) const {
    Matrix out(ranks_ * chunk_slots_, buf.cols);
    for (int r = 0; r < ranks_; ++r)
      std::copy_n(buf.row((r * local_ + el) * chunk_slots_), chunk_slots_ * buf.cols,
                  out.row(r * chunk_slots_));
    return out;
  }

  void scatter_expert(const Matrix& rows, int el, Matrix& buf) const {
    for (int r = 0; r < ranks_; ++r)
      std::copy_n(rows.row(r * chunk_slots_), chunk_slots_ * buf.cols,
                  buf.row((r * local_ + el) * chunk_slots_));
  }

  int ranks() const { return ranks_; }
  int local_experts() const { return local_; }

 private:
  const MoeLayerShape& shape_;
  int ranks_;
  int local_;
  std::int64_t chunk_slots_;
};

// The dispatch tensor [E*C, M] of one batch (the encode step; re-run from T_I by a re-dispatch).
Matrix encode(const MoeLayerShape& shape, const Routing& routing, const Matrix& x) {
  Matrix d(shape.dispatch_rows(), shape.d_model);
  for (std::int64_t t = 0; t < shape.tokens; ++t)
    for (int j = 0; j < shape.top_k; ++j) {
      const auto i = static_cast<std::size_t>(t * shape.top_k + j);
      if (routing.slot[i] < 0) continue;
      std::copy_n(x.row(t), shape.d_model, d.row(routing.topk_idx[i] * shape.capacity + routing.slot[i]));
    }
  return d;
}

// A rank's pool of slot buffers; the chunk at sequence position q uses slot q % size.
struct Pool {
  std::vector<Matrix> slots;
  Matrix& at(std::size_t q) { return slots[q % slots.size()]; }
};

Pool make_pool(std::size_t count, std::int64_t rows, std::int64_t cols) {
  Pool p;
  for (std::size_t i = 0; i < count; ++i) p.slots.emplace_back(rows, cols);
  return p;
}

void check_options(const MoeLayerShape& shape, const std::vector<Matrix>& x, const std::vector<Matrix>& dy,
                   const ExpertParallelOptions& o) {
  shape.validate();
  if (o.ep_size < 1 || shape.num_experts % o.ep_size != 0)
    throw InputError("expert parallel reference: ep_size " + std::to_string(o.ep_size) +
                     " must be positive and divide num_experts " + std::to_string(shape.num_experts));
  if (o.num_chunks < 1 || shape.capacity % o.num_chunks != 0)
    throw InputError("expert parallel reference: num_chunks " + std::to_string(o.num_chunks) +
                     " must be positive and divide the capacity C = " + std::to_string(shape.capacity));
  if (o.slots != 1 && o.slots != 2)
    throw InputError("expert parallel reference: slots must be 1 or 2, got " + std::to_string(o.slots));
  if (x.size() != static_cast<std::size_t>(o.ep_size) || dy.size() != x.size())
    throw InputError("expert parallel reference: one batch of x and of dY per rank (" +
                     std::to_string(o.ep_size) + "), got " + std::to_string(x.size()) + " and " +
                     std::to_string(dy.size()));
}

}  // namespace

ExpertParallelResult run_expert_parallel(const MoeLayerShape& shape, const MoeLayerParams& params,
                                         const std::vector<Matrix>& x, const std::vector<Matrix>& dy,
                                         const ExpertParallelOptions& options) {
  check_options(shape, x, dy, options);
  const Partition part(shape, options);
  const int R = part.ranks(), El = part.local_experts(), n = options.num_chunks;
  const auto ranks = static_cast<std::size_t>(R);
  const auto nn = static_cast<std::size_t>(n);
  const MemoryStrategy strategy = options.strategy;
  const bool reuse = strategy != MemoryStrategy::kNone;
  const std::int64_t M = shape.d_model, F = shape.fc1_out();
  const auto slots = static_cast<std::size_t>(options.slots);

  ExpertParallelResult res;
  ExecutionCounts& counts = res.counts;
  std::vector<Routing> routing;
  std::vector<Matrix> t_o;
  for (std::size_t r = 0; r < ranks; ++r) {
    routing.push_back(route(shape, params.gate, x[r]));
    t_o.emplace_back(shape.dispatch_rows(), M);
  }
  const auto dispatch_chunk = [&](int c) {
    std::vector<Matrix> send;
    for (std::size_t r = 0; r < ranks; ++r) send.push_back(part.take_chunk(encode(shape, routing[r], x[r]), c));
    ++counts.all_to_alls;
    return part.all_to_all(send);
  };

  // Slot pools per expert-side rank (strategy none: one buffer per chunk, never overwritten).
  const std::size_t di_count = reuse ? std::min(slots, 2 * nn) : nn;
  const std::size_t m_count = reuse ? 1 : nn;
  const std::size_t do_count = reuse ? std::min(slots, nn) : nn;
  std::vector<Pool> di_pool, m_pool, do_pool;
  std::vector<std::vector<Matrix>> host_di(ranks), host_m(ranks);  // pinned host, per chunk
  for (std::size_t q = 0; q < ranks; ++q) {
    di_pool.push_back(make_pool(di_count, part.exchange_rows(), M));
    m_pool.push_back(make_pool(m_count, part.exchange_rows(), F));
    do_pool.push_back(make_pool(do_count, part.exchange_rows(), M));
  }

  // Forward, chunk by chunk (position g = chunk c).
  for (int c = 0; c < n; ++c) {
    const auto g = static_cast<std::size_t>(c);
    std::vector<Matrix> recv = dispatch_chunk(c);
    std::vector<Matrix> send_back;
    for (std::size_t q = 0; q < ranks; ++q) {
      Matrix& di = di_pool[q].at(g);
      di = std::move(recv[q]);
      if (offloads_di(strategy)) host_di[q].push_back(di);
      Matrix& m = m_pool[q].at(g);
      Matrix& out = do_pool[q].at(g);
      for (int el = 0; el < El; ++el) {
        Matrix h, a, o;
        detail::expert_forward_rows(shape, params, static_cast<int>(q) * El + el, part.gather_expert(di, el), h,
                                    a, o);
        part.scatter_expert(h, el, m);
        part.scatter_expert(o, el, out);
      }
      if (offloads_m(strategy)) host_m[q].push_back(m);
      send_back.push_back(out);
    }
    if (offloads_di(strategy)) ++counts.d2h_copies;
    if (offloads_m(strategy)) ++counts.d2h_copies;
    ++counts.all_to_alls;
    const std::vector<Matrix> combined = part.all_to_all(send_back);
    for (std::size_t r = 0; r < ranks; ++r) part.put_chunk(combined[r], c, t_o[r]);
  }
  // The shared experts: every rank runs them on its own tokens (data parallel).
  std::vector<Matrix> shared_h(ranks);
  for (std::size_t r = 0; r < ranks; ++r) {
    res.y.push_back(detail::decode(shape, routing[r], t_o[r]));
    if (shape.shared_d_ffn > 0) detail::shared_forward(shape, params, x[r], shared_h[r], res.y.back());
  }

  // Backward.
  res.grads = zero_gradients(shape);
  MoeGradients& grads = res.grads;
  std::vector<Matrix> dout(ranks), ddispatched;
  std::vector<std::vector<double>> dscores(ranks);
  for (std::size_t r = 0; r < ranks; ++r) {
    detail::decode_backward(shape, routing[r], t_o[r], dy[r], dout[r], dscores[r]);
    ddispatched.emplace_back(shape.dispatch_rows(), M);
  }
  for (int c = 0; c < n; ++c) {
    // Backward position g continues the forward's slot sequence at n + g.
    const std::size_t q_pos = nn + static_cast<std::size_t>(c);
    std::vector<Matrix> send;
    for (std::size_t r = 0; r < ranks; ++r) send.push_back(part.take_chunk(dout[r], c));
    ++counts.all_to_alls;
    const std::vector<Matrix> ddo = part.all_to_all(send);
    // Restore T_DI first: the recomputation of T_M reads it.
    if (strategy == MemoryStrategy::kS2 || strategy == MemoryStrategy::kS4) {
      std::vector<Matrix> again = dispatch_chunk(c);
      ++counts.redispatches;
      for (std::size_t q = 0; q < ranks; ++q) di_pool[q].at(q_pos) = std::move(again[q]);
    }
    std::vector<Matrix> send_back;
    for (std::size_t q = 0; q < ranks; ++q) {
      if (offloads_di(strategy)) di_pool[q].at(q_pos) = host_di[q][static_cast<std::size_t>(c)];
      if (offloads_m(strategy)) m_pool[q].at(q_pos) = host_m[q][static_cast<std::size_t>(c)];
      const Matrix& di = di_pool[q].at(q_pos);
      Matrix& m = m_pool[q].at(q_pos);
      if (recomputes(strategy))
        for (int el = 0; el < El; ++el)
          part.scatter_expert(detail::fc1_rows(params, static_cast<int>(q) * El + el, part.gather_expert(di, el)),
                              el, m);
      Matrix ddi(part.exchange_rows(), M);
      for (int el = 0; el < El; ++el) {
        const auto e = static_cast<std::size_t>(static_cast<int>(q) * El + el);
        const Matrix din = detail::expert_backward_rows(
            shape, params, static_cast<int>(e), part.gather_expert(di, el), part.gather_expert(m, el),
            part.gather_expert(ddo[q], el), grads.dw1[e], grads.db1[e], grads.dw2[e], grads.db2[e]);
        part.scatter_expert(din, el, ddi);
      }
      send_back.push_back(std::move(ddi));
    }
    if (offloads_di(strategy)) ++counts.h2d_copies;
    if (offloads_m(strategy)) ++counts.h2d_copies;
    if (recomputes(strategy)) ++counts.fc1_recomputes;
    ++counts.all_to_alls;
    const std::vector<Matrix> back = part.all_to_all(send_back);
    for (std::size_t r = 0; r < ranks; ++r) part.put_chunk(back[r], c, ddispatched[r]);
  }
  for (std::size_t r = 0; r < ranks; ++r) {
    Matrix dx(shape.tokens, M);
    detail::router_and_encode_backward(shape, params, x[r], routing[r], dscores[r], ddispatched[r], dx,
                                       grads.dgate);
    if (shape.shared_d_ffn > 0) {
      const Matrix dx_shared = detail::shared_backward(shape, params, x[r], shared_h[r], dy[r], grads);
      for (std::size_t i = 0; i < dx.values.size(); ++i) dx.values[i] += dx_shared.values[i];
    }
    res.dx.push_back(std::move(dx));
  }
  return res;
}

}  // namespace moesim::runtime::reference
