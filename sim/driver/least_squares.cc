#include "sim/driver/least_squares.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "sim/core/error.h"

namespace moesim {

namespace {

// The fit's residuals and the parameters' standard errors (AllToAllLine). w, sx, sxx: the sums of
// the weights, weighted x and weighted x^2 of the normal equations.
void add_residuals(AllToAllLine& line, double slope, const std::vector<AllToAllPoint>& points, int ranks, double w,
                   double sx, double sxx) {
  // With weights 1 / t^2 a point's weighted residual is its relative one: one sum serves both the
  // residual variance and the rms.
  double sum_sq = 0;
  for (const AllToAllPoint& p : points) {
    const double x = static_cast<double>(ranks - 1) * static_cast<double>(p.bytes_per_peer);
    const double relative = (line.latency_ns + slope * x - p.time_ns) / p.time_ns;  // = sqrt(w_i) r_i
    sum_sq += relative * relative;
    if (std::abs(relative) > std::abs(line.worst_relative_residual)) line.worst_relative_residual = relative;
  }
  const auto n = static_cast<double>(points.size());
  line.rms_relative_residual = std::sqrt(sum_sq / n);
  const int free = line.latency_clamped ? 1 : 2;  // fitted parameters
  if (points.size() <= static_cast<std::size_t>(free)) return;
  const double variance = sum_sq / (n - free);
  double slope_variance = 0;
  if (line.latency_clamped) {
    slope_variance = variance / sxx;
  } else {
    const double det = w * sxx - sx * sx;
    slope_variance = variance * w / det;
    line.latency_stderr_ns = std::sqrt(variance * sxx / det);
  }
  line.bandwidth_stderr = 1e9 * std::sqrt(slope_variance) / (slope * slope);
}

}  // namespace

AllToAllLine fit_all_to_all(const std::vector<AllToAllPoint>& points, int ranks) {
  if (ranks < 2) throw InputError("an all-to-all calibration needs at least 2 ranks, got " + std::to_string(ranks));
  std::set<std::int64_t> sizes;
  for (const AllToAllPoint& p : points) {
    if (p.bytes_per_peer <= 0 || !(p.time_ns > 0))
      throw InputError("an all-to-all point needs positive bytes and time, got " + std::to_string(p.bytes_per_peer) +
                       " bytes in " + std::to_string(p.time_ns) + " ns");
    sizes.insert(p.bytes_per_peer);
  }
  if (sizes.size() < 2)
    throw InputError("an all-to-all calibration needs at least two message sizes, got " + std::to_string(sizes.size()));
  // t = L + s x with x = (ranks - 1) b, s = 1 / bandwidth (ns per byte), weights 1 / t^2.
  double w = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const AllToAllPoint& p : points) {
    const double x = static_cast<double>(ranks - 1) * static_cast<double>(p.bytes_per_peer);
    const double wi = 1.0 / (p.time_ns * p.time_ns);
    w += wi;
    sx += wi * x;
    sy += wi * p.time_ns;
    sxx += wi * x * x;
    sxy += wi * x * p.time_ns;
  }
  AllToAllLine line;
  double slope = (w * sxy - sx * sy) / (w * sxx - sx * sx);
  line.latency_ns = (sy - slope * sx) / w;
  if (line.latency_ns < 0) {  // through the origin instead
    slope = sxy / sxx;
    line.latency_ns = 0;
    line.latency_clamped = true;
  }
  // Times that grow by less than 0.01% over the sizes are flat: their slope is rounding.
  double x_max = 0, t_max = 0;
  for (const AllToAllPoint& p : points) {
    x_max = std::max(x_max, static_cast<double>(ranks - 1) * static_cast<double>(p.bytes_per_peer));
    t_max = std::max(t_max, p.time_ns);
  }
  if (!(slope > 0) || slope * x_max < 1e-4 * t_max)
    throw InputError("the all-to-all times do not grow with the message size, so no bandwidth fits them");
  line.bandwidth = 1e9 / slope;
  add_residuals(line, slope, points, ranks, w, sx, sxx);
  return line;
}

namespace {

using Matrix = std::vector<std::vector<double>>;

// x with a x = b (Gaussian elimination, partial pivoting); false when a is singular.
bool solve(Matrix a, std::vector<double> b, std::vector<double>& x) {
  const std::size_t n = b.size();
  for (std::size_t c = 0; c < n; ++c) {
    std::size_t pivot = c;
    for (std::size_t r = c + 1; r < n; ++r)
      if (std::abs(a[r][c]) > std::abs(a[pivot][c])) pivot = r;
    if (!(std::abs(a[pivot][c]) > 1e-300)) return false;
    std::swap(a[c], a[pivot]);
    std::swap(b[c], b[pivot]);
    for (std::size_t r = c + 1; r < n; ++r) {
      const double f = a[r][c] / a[c][c];
      for (std::size_t k = c; k < n; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  x.assign(n, 0);
  for (std::size_t c = n; c-- > 0;) {
    double v = b[c];
    for (std::size_t k = c + 1; k < n; ++k) v -= a[c][k] * x[k];
    x[c] = v / a[c][c];
  }
  return true;
}

struct Evaluation {
  std::vector<double> model, r;  // r: relative residuals
  double cost = 0;               // sum of r^2
};

Evaluation evaluate(const TimesOf& model, const std::vector<double>& measured, const std::vector<double>& theta) {
  Evaluation e;
  e.model = model(theta);
  MOESIM_CHECK(e.model.size() == measured.size(), "a fitted model must give one time per measured point");
  for (std::size_t i = 0; i < measured.size(); ++i) {
    e.r.push_back((e.model[i] - measured[i]) / measured[i]);
    e.cost += e.r.back() * e.r.back();
  }
  return e;
}

// d r_i / d theta_j by forward differences (backwards at the upper bound); see the header.
Matrix jacobian(const TimesOf& model, const std::vector<double>& measured, const std::vector<double>& theta,
                const Evaluation& at, const std::vector<FitParameter>& bounds) {
  Matrix j(measured.size(), std::vector<double>(theta.size(), 0));
  for (std::size_t c = 0; c < theta.size(); ++c) {
    double h = 0.01 * std::max(std::abs(theta[c]), 0.1);
    if (theta[c] + h > bounds[c].upper) h = -h;
    std::vector<double> moved = theta;
    moved[c] += h;
    const std::vector<double> t = model(moved);
    for (std::size_t i = 0; i < measured.size(); ++i) j[i][c] = (t[i] - at.model[i]) / (h * measured[i]);
  }
  return j;
}

// The parameters free to move: not on a bound that the cost's gradient pushes them beyond.
std::vector<std::size_t> free_parameters(const Matrix& j, const Evaluation& at, const std::vector<double>& theta,
                                         const std::vector<FitParameter>& bounds) {
  std::vector<std::size_t> out;
  for (std::size_t c = 0; c < theta.size(); ++c) {
    double gradient = 0;
    for (std::size_t i = 0; i < at.r.size(); ++i) gradient += j[i][c] * at.r[i];
    const bool pushed_below = theta[c] <= bounds[c].lower && gradient > 0;
    const bool pushed_above = theta[c] >= bounds[c].upper && gradient < 0;
    if (!pushed_below && !pushed_above) out.push_back(c);
  }
  return out;
}

// J_a^T J_a and -J_a^T r over the free parameters `a`.
void normal_equations(const Matrix& j, const Evaluation& at, const std::vector<std::size_t>& a, Matrix& jtj,
                      std::vector<double>& rhs) {
  jtj.assign(a.size(), std::vector<double>(a.size(), 0));
  rhs.assign(a.size(), 0);
  for (std::size_t i = 0; i < at.r.size(); ++i)
    for (std::size_t x = 0; x < a.size(); ++x) {
      rhs[x] -= j[i][a[x]] * at.r[i];
      for (std::size_t y = 0; y < a.size(); ++y) jtj[x][y] += j[i][a[x]] * j[i][a[y]];
    }
}

// Each free parameter's standard error: residual variance over N - free, times the diagonal of
// (J^T J)^-1; infinite where J^T J is singular (the points do not determine the parameter).
void add_standard_errors(RelativeFit& fit, const Matrix& j, const Evaluation& at, const std::vector<std::size_t>& a) {
  const std::size_t n = at.r.size();
  if (a.empty() || n <= a.size()) return;
  Matrix jtj;
  std::vector<double> unused;
  normal_equations(j, at, a, jtj, unused);
  const double variance = at.cost / static_cast<double>(n - a.size());
  for (std::size_t x = 0; x < a.size(); ++x) {
    std::vector<double> unit(a.size(), 0), column;
    unit[x] = 1;
    fit.parameters[a[x]].standard_error =
        solve(jtj, unit, column) ? std::sqrt(std::max(0.0, variance * column[x])) : std::numeric_limits<double>::infinity();
  }
}

}  // namespace

RelativeFit fit_relative(const TimesOf& model, const std::vector<double>& measured,
                         const std::vector<FitParameter>& parameters) {
  for (double t : measured)
    if (!(t > 0)) throw InputError("a fitted time must be positive, got " + std::to_string(t) + " ns");
  if (measured.size() < parameters.size())
    throw InputError("fitting " + std::to_string(parameters.size()) + " parameters needs at least as many points, got " +
                     std::to_string(measured.size()));
  std::vector<double> theta;
  for (const FitParameter& p : parameters) theta.push_back(std::clamp(p.initial, p.lower, p.upper));
  Evaluation at = evaluate(model, measured, theta);
  RelativeFit fit;
  double lambda = 1e-3;
  for (; fit.iterations < 200; ++fit.iterations) {
    const Matrix j = jacobian(model, measured, theta, at, parameters);
    const std::vector<std::size_t> a = free_parameters(j, at, theta, parameters);
    if (a.empty()) break;
    Matrix jtj;
    std::vector<double> rhs, step;
    normal_equations(j, at, a, jtj, rhs);
    bool improved = false;
    std::vector<double> next;
    while (!improved && lambda < 1e12) {
      Matrix damped = jtj;
      for (std::size_t x = 0; x < a.size(); ++x) damped[x][x] += lambda * (jtj[x][x] + 1e-12);
      if (solve(damped, rhs, step)) {
        next = theta;
        for (std::size_t x = 0; x < a.size(); ++x)
          next[a[x]] = std::clamp(theta[a[x]] + step[x], parameters[a[x]].lower, parameters[a[x]].upper);
        Evaluation e = evaluate(model, measured, next);
        if (e.cost < at.cost) {
          improved = true;
          at = std::move(e);
        }
      }
      lambda = improved ? std::max(lambda / 10, 1e-12) : lambda * 10;
    }
    if (!improved) break;
    double moved = 0;
    for (std::size_t c = 0; c < theta.size(); ++c)
      moved = std::max(moved, std::abs(next[c] - theta[c]) / std::max(std::abs(theta[c]), 1e-3));
    theta = next;
    if (moved < 1e-10) break;
  }
  const Matrix j = jacobian(model, measured, theta, at, parameters);
  const std::vector<std::size_t> a = free_parameters(j, at, theta, parameters);
  for (std::size_t c = 0; c < theta.size(); ++c) {
    const bool free = std::find(a.begin(), a.end(), c) != a.end();
    fit.parameters.push_back(FittedParameter{theta[c], 0, !free});
  }
  add_standard_errors(fit, j, at, a);
  fit.model = at.model;
  fit.relative_residual = at.r;
  for (double r : at.r)
    if (std::abs(r) > std::abs(fit.worst_relative_residual)) fit.worst_relative_residual = r;
  fit.rms_relative_residual = at.r.empty() ? 0 : std::sqrt(at.cost / static_cast<double>(at.r.size()));
  return fit;
}

}  // namespace moesim
