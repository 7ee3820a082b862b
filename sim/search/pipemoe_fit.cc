// PipeMoE's linear model for `moesim plan`: its constants, from the hardware file's alpha_beta
// section or fitted to the simulator's own cost models, and its exact pick over a degree set.
#include <algorithm>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "sim/core/error.h"
#include "sim/cost/compute_cost.h"
#include "sim/build/moe_graph.h"
#include "sim/graph/task_graph.h"
#include "sim/net/alpha_beta.h"
#include "sim/search/planner.h"

namespace moesim::search {
namespace {

std::string fmt(double v, const char* format) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// Least-squares line y = a + b*x through the points; with one distinct x, the line through the
// origin.
std::pair<double, double> fit_line(const std::vector<double>& x, const std::vector<double>& y) {
  const auto n = static_cast<double>(x.size());
  double sx = 0, sy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sx += x[i];
    sy += y[i];
  }
  const double mx = sx / n, my = sy / n;
  double sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxy += (x[i] - mx) * (y[i] - my);
  }
  if (sxx == 0.0) return {0.0, mx > 0 ? my / mx : 0.0};
  const double b = sxy / sxx;
  return {my - b * mx, b};
}

}  // namespace

PipeMoeSetup pipemoe_setup(const ModelSpec& model, const ClusterSpec& cluster, const RunSpec& base) {
  RunSpec run = base;
  run.num_chunks = 1;
  run.strategy = MemoryStrategy::kNone;
  const LayerDims d1 = derive_layer_dims(model, cluster, run);
  // Per-rank bytes of one all-to-all and FLOP of FC1 + FC2 at degree r (the whole layer at r = 1).
  const auto chunk_sizes = [&](const LayerDims& d) {
    GemmWork fc1;
    fc1.batch = d.local_experts;
    fc1.m = d.rows_per_expert_chunk();  // the largest chunk
    fc1.k = d.d_model;
    fc1.n = d.fc1_out;
    fc1.dtype = d.gemm_dtype;
    fc1.element_bytes = d.element_bytes;
    GemmWork fc2 = fc1;
    fc2.k = d.d_ffn;
    fc2.n = d.d_model;
    return std::make_tuple(d.a2a_bytes_per_peer(), fc1, fc2);
  };
  const auto [peer1, fc1_1, fc2_1] = chunk_sizes(d1);
  PipeMoeSetup setup;
  PipeMoeParams& p = setup.params;
  p.dispatch_bytes = static_cast<double>(peer1) * d1.ep_size;
  p.expert_work = static_cast<double>(fc1_1.flops() + fc2_1.flops());
  if (cluster.alpha_beta) {
    const AlphaBetaCosts& ab = *cluster.alpha_beta;
    p.a2a_alpha_s = ab.a2a_alpha_s;
    p.a2a_beta_s_per_byte = ab.a2a_beta_s_per_byte;
    p.expert_alpha_s = 2.0 * ab.gemm_alpha_s;  // FC1 and FC2: two GEMMs per chunk
    p.expert_beta_s_per_unit = ab.gemm_beta_s_per_flop;
    setup.source = "alpha_beta section";
    return setup;
  }
  // Fit to the simulator's own models at every degree r = 1..16 the capacity allows.
  std::vector<int> group;
  for (int r = 0; r < d1.ep_size; ++r) group.push_back(r);
  TaskGraph probe(d1.ep_size, {0});
  const GroupId gid = probe.add_group(group);
  const AlphaBetaNetwork network(probe, cluster);
  const ComputeCostModel compute(cluster);
  std::vector<double> xa, ya, xe, ye;
  for (int r = 1; r <= std::min<std::int64_t>(kDefaultMaxChunks, d1.capacity); ++r) {
    run.num_chunks = r;
    const LayerDims d = derive_layer_dims(model, cluster, run);
    const auto [peer, fc1, fc2] = chunk_sizes(d);
    CollectiveWork a2a;
    a2a.group = gid;
    a2a.bytes_per_peer = peer;
    xa.push_back(static_cast<double>(peer) * d.ep_size);
    ya.push_back(static_cast<double>(network.isolated_duration(a2a, group)) / kNsPerS);
    xe.push_back(static_cast<double>(fc1.flops() + fc2.flops()));
    // On a loopback node every virtual rank runs its experts on the one GPU at the same time.
    ye.push_back(static_cast<double>(compute.gemm_duration(fc1) + compute.gemm_duration(fc2)) * cluster.ranks_per_device() /
                 kNsPerS);
  }
  std::tie(p.a2a_alpha_s, p.a2a_beta_s_per_byte) = fit_line(xa, ya);
  std::tie(p.expert_alpha_s, p.expert_beta_s_per_unit) = fit_line(xe, ye);
  setup.source = "fitted to the cost models at r = 1.." + std::to_string(xa.size());
  // A fitted intercept below 0 (a convex efficiency curve) has no meaning as a fixed cost: say so
  // and use the line through the origin's slope instead of hiding it.
  for (auto [alpha, beta, xs, ys, name] :
       {std::make_tuple(&p.a2a_alpha_s, &p.a2a_beta_s_per_byte, &xa, &ya, "a_a"),
        std::make_tuple(&p.expert_alpha_s, &p.expert_beta_s_per_unit, &xe, &ye, "a_e")}) {
    if (*alpha < 0) {
      setup.source += std::string("; ") + name + " fitted " + fmt(*alpha * 1e6, "%.3f") + " us < 0, refitted through 0";
      double sxy = 0, sxx = 0;
      for (std::size_t i = 0; i < xs->size(); ++i) {
        sxy += (*xs)[i] * (*ys)[i];
        sxx += (*xs)[i] * (*xs)[i];
      }
      *alpha = 0;
      *beta = sxx > 0 ? sxy / sxx : 0;
    }
  }
  return setup;
}

DegreePick pipemoe_pick(const PipeMoeParams& params, const std::vector<int>& degrees) {
  MOESIM_CHECK(!degrees.empty(), "pipemoe_pick over no degrees");
  const int r_max = *std::max_element(degrees.begin(), degrees.end());
  const PipeMoeChoice all = optimal_degree(params, r_max);
  DegreePick pick;
  bool first = true;
  for (int r : degrees) {
    const double t = all.time_by_degree_s[static_cast<std::size_t>(r - 1)];
    if (first || t < pick.time_s || (t == pick.time_s && r < pick.degree)) {
      pick.degree = r;
      pick.time_s = t;
      first = false;
    }
  }
  pick.regime = regime_at(params, pick.degree);
  return pick;
}

}  // namespace moesim::search
