// Least squares in relative error, shared by the network calibrations (docs/calibration.md): each
// point weighted by 1 / t^2, so that a small message's microseconds count as much as a large one's
// milliseconds. Two fits:
//   - fit_all_to_all: the straight line t = latency + (ranks - 1) b / bandwidth of an all-to-all
//     (sim/driver/network_calibration.h), solved in closed form;
//   - fit_relative: any parameters of a model that computes the times itself (the all-reduce's
//     NCCL terms, sim/driver/all_reduce_calibration.h), by bounded Levenberg-Marquardt with a
//     numerical Jacobian.
// Both report each parameter's standard error (residual variance over N - free parameters, times
// the inverse of the normal matrix) and the residuals as fractions of the measured times.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/spec/all_to_all_point.h"

namespace moesim {

struct AllToAllLine {
  double latency_ns = 0;
  double bandwidth = 0;        // bytes/s each GPU sends to its peers
  bool latency_clamped = false;  // the free fit gave a negative latency; refitted through 0
  // How well the line holds the points: the standard error of each fitted parameter (weighted
  // least squares, residual variance over N - 2 degrees of freedom, bandwidth's by the delta
  // method; 0 with two points, which a line always passes through; the latency's 0 when clamped)
  // and the residuals as a fraction of the measured time, root mean square and worst.
  double latency_stderr_ns = 0;
  double bandwidth_stderr = 0;  // bytes/s
  double rms_relative_residual = 0;
  double worst_relative_residual = 0;  // signed: (line - measured) / measured
};

// Throws InputError for fewer than two distinct sizes, ranks < 2, or times that do not grow with
// the size.
AllToAllLine fit_all_to_all(const std::vector<AllToAllPoint>& points, int ranks);

// One parameter of fit_relative: its starting value and the interval it must stay in.
struct FitParameter {
  std::string name;
  double initial = 1;
  double lower = 0;
  double upper = 1;
};

struct FittedParameter {
  double value = 0;
  double standard_error = 0;     // 0 at a bound, or with no more points than free parameters
  bool at_bound = false;  // the best value lies on (or beyond) a bound and was held there
};

struct RelativeFit {
  std::vector<FittedParameter> parameters;
  std::vector<double> model;              // the model's times at the fitted parameters
  std::vector<double> relative_residual;  // (model - measured) / measured, per point
  double rms_relative_residual = 0;
  double worst_relative_residual = 0;     // signed
  int iterations = 0;
};

// The model's times for the points, given one value per parameter.
using TimesOf = std::function<std::vector<double>(const std::vector<double>& parameters)>;

// The parameters (within their bounds) whose model times are closest to `measured` in relative
// error. The Jacobian is taken by forward differences of 1% of a parameter (at least 1e-3): the
// models fitted here are piecewise linear in their parameters with whole-nanosecond times, so a
// small step would measure the rounding, and a large one stays exact within a piece. Throws
// InputError when a measured time is not positive or there are fewer points than parameters.
RelativeFit fit_relative(const TimesOf& model, const std::vector<double>& measured,
                         const std::vector<FitParameter>& parameters);

}  // namespace moesim
