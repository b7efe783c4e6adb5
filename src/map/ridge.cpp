#include "map/ridge.h"

#include <Eigen/Dense>
#include <cmath>
#include <limits>

#include "util/error.h"

namespace ember::map {

LinearMap LinearMap::identity(int d) {
  LinearMap m;
  m.d_in = m.d_out = d;
  m.w.assign(size_t(d) * d, 0.0);
  for (int i = 0; i < d; ++i) m.w[size_t(i) * d + i] = 1.0;
  m.b.assign(size_t(d), 0.0);
  return m;
}

bool LinearMap::is_identity() const {
  if (d_in != d_out) return false;
  for (int i = 0; i < d_in; ++i)
    for (int j = 0; j < d_out; ++j)
      if (w[size_t(i) * d_out + j] != (i == j ? 1.0 : 0.0)) return false;
  for (double v : b)
    if (v != 0.0) return false;
  return true;
}

void LinearMap::apply(const double* x, double* y) const {
  for (int j = 0; j < d_out; ++j) y[j] = b[size_t(j)];
  for (int i = 0; i < d_in; ++i) {
    const double xi = x[i];
    const double* row = w.data() + size_t(i) * d_out;
    for (int j = 0; j < d_out; ++j) y[j] += xi * row[j];
  }
}

void LinearMap::apply(const float* x, float* y) const {
  // Same arithmetic as the f64 overload (x widened exactly), without allocating per row.
  thread_local std::vector<double> acc;
  acc.assign(b.begin(), b.end());
  for (int i = 0; i < d_in; ++i) {
    const double xi = x[i];
    const double* row = w.data() + size_t(i) * d_out;
    for (int j = 0; j < d_out; ++j) acc[size_t(j)] += xi * row[j];
  }
  for (int j = 0; j < d_out; ++j) y[j] = float(acc[size_t(j)]);
}

NormalEquations::NormalEquations(int d_in, int d_out)
    : d_in_(d_in), d_out_(d_out),
      g_(size_t(d_in + 1) * (d_in + 1), 0.0), c_(size_t(d_in + 1) * d_out, 0.0) {
  EMBER_CHECK(d_in > 0 && d_out > 0);
}

void NormalEquations::add(const float* x, const float* y, int64_t n) {
  const int da = d_in_ + 1;
  std::vector<double> xa(static_cast<size_t>(da));
  for (int64_t r = 0; r < n; ++r) {
    const float* xr = x + r * d_in_;
    const float* yr = y + r * d_out_;
    for (int i = 0; i < d_in_; ++i) xa[size_t(i)] = xr[i];
    xa[size_t(d_in_)] = 1.0;
    for (int i = 0; i < da; ++i) {
      const double xi = xa[size_t(i)];
      double* grow = g_.data() + size_t(i) * da;
      for (int j = i; j < da; ++j) grow[j] += xi * xa[size_t(j)];
      double* crow = c_.data() + size_t(i) * d_out_;
      for (int j = 0; j < d_out_; ++j) crow[j] += xi * double(yr[j]);
    }
  }
  rows_ += n;
}

LinearMap NormalEquations::solve(const FitOptions& o, const std::string& where) const {
  if (rows_ <= 0) fail_field(where, "rows", "at least one calibration row", "0");
  if (!(o.lambda > 0.0) || !std::isfinite(o.lambda))
    fail_field(where, "lambda", "a finite value > 0", std::to_string(o.lambda));
  if (o.anchor_identity && d_in_ != d_out_)
    fail_field(where, "anchor_identity", "d_in == d_out (matching geometry)",
               std::to_string(d_in_) + " -> " + std::to_string(d_out_));
  const int da = d_in_ + 1;
  const int k = o.affine ? da : d_in_;  // unknowns per output column
  Eigen::MatrixXd a(k, k), rhs(k, d_out_);
  for (int i = 0; i < k; ++i) {
    for (int j = 0; j < k; ++j) {
      const int lo = i < j ? i : j, hi = i < j ? j : i;
      a(i, j) = g_[size_t(lo) * da + hi];
    }
    for (int j = 0; j < d_out_; ++j) rhs(i, j) = c_[size_t(i) * d_out_ + j];
  }
  // Penalty on the weight rows only (never the bias row): lambda * (W - W0).
  for (int i = 0; i < d_in_; ++i) {
    a(i, i) += o.lambda;
    if (o.anchor_identity) rhs(i, i) += o.lambda;
  }
  Eigen::LDLT<Eigen::MatrixXd> ldlt(a);
  if (ldlt.info() != Eigen::Success) fail(where, "ridge normal equations could not be factored");
  const Eigen::MatrixXd sol = ldlt.solve(rhs);
  LinearMap m;
  m.d_in = d_in_;
  m.d_out = d_out_;
  m.w.assign(size_t(d_in_) * d_out_, 0.0);
  m.b.assign(size_t(d_out_), 0.0);
  for (int i = 0; i < d_in_; ++i)
    for (int j = 0; j < d_out_; ++j) m.w[size_t(i) * d_out_ + j] = sol(i, j);
  if (o.affine)
    for (int j = 0; j < d_out_; ++j) m.b[size_t(j)] = sol(d_in_, j);
  for (double v : m.w)
    if (!std::isfinite(v)) fail(where, "ridge solution is not finite");
  for (double v : m.b)
    if (!std::isfinite(v)) fail(where, "ridge solution is not finite");
  return m;
}

void R2Accumulator::add(const float* y_hat, const float* y, int64_t n) {
  const size_t d = sum_.size();
  for (int64_t r = 0; r < n; ++r) {
    for (size_t j = 0; j < d; ++j) {
      const double t = y[size_t(r) * d + j];
      const double e = double(y_hat[size_t(r) * d + j]) - t;
      ss_res_ += e * e;
      sum_[j] += t;
      sum_sq_[j] += t * t;
    }
  }
  rows_ += n;
}

double R2Accumulator::r2() const {
  if (rows_ == 0) return std::numeric_limits<double>::quiet_NaN();
  double ss_tot = 0;
  for (size_t j = 0; j < sum_.size(); ++j) {
    const double mean = sum_[j] / double(rows_);
    ss_tot += sum_sq_[j] - double(rows_) * mean * mean;
  }
  if (!(ss_tot > 0)) return std::numeric_limits<double>::quiet_NaN();
  return 1.0 - ss_res_ / ss_tot;
}

}  // namespace ember::map
