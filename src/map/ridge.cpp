#include "map/ridge.h"

#include <Eigen/Dense>
#include <cmath>
#include <algorithm>
#include <limits>

#include "util/error.h"
#include "util/simd.h"

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
    : d_in_(d_in), d_out_(d_out), g_(g_size(d_in), 0.0), c_(size_t(d_in + 1) * d_out, 0.0),
      yy_(size_t(d_out), 0.0) {
  EMBER_CHECK(d_in > 0 && d_out > 0);
}

namespace {

// One chunk of m rows: xa (m, da) with the ones column, y (m, d_out), both f64. For each row i
// of G and C, the chunk's rows are added in order, so every entry sees its products in row
// order exactly as a row-by-row loop would give them, while row i of G and C stays in cache.
// The loops over j are independent entries: vectorizing them changes no bit (no FMA is formed:
// -ffp-contract=off), so the three compilations below give the same results.
inline __attribute__((always_inline)) void accumulate_body(const double* __restrict xa, const double* __restrict y,
                                                           int m, int da, int d_out, double* __restrict g,
                                                           double* __restrict c, double* __restrict yy) {
  size_t off = 0;
  for (int i = 0; i < da; ++i) {
    double* __restrict grow = g + off;
    double* __restrict crow = c + size_t(i) * d_out;
    const int len = da - i;
    int r = 0;
    // Four rows per pass over the entries: each entry still adds row r, r+1, r+2, r+3 in order
    // (the same bits as one row at a time), with one load and store per entry instead of four.
    for (; r + 4 <= m; r += 4) {
      const double* __restrict x0 = xa + size_t(r) * da;
      const double* __restrict x1 = x0 + da;
      const double* __restrict x2 = x1 + da;
      const double* __restrict x3 = x2 + da;
      const double a0 = x0[i], a1 = x1[i], a2 = x2[i], a3 = x3[i];
      for (int j = 0; j < len; ++j) {
        double g_ = grow[j];
        g_ += a0 * x0[i + j];
        g_ += a1 * x1[i + j];
        g_ += a2 * x2[i + j];
        g_ += a3 * x3[i + j];
        grow[j] = g_;
      }
      const double* __restrict y0 = y + size_t(r) * d_out;
      const double* __restrict y1 = y0 + d_out;
      const double* __restrict y2 = y1 + d_out;
      const double* __restrict y3 = y2 + d_out;
      for (int j = 0; j < d_out; ++j) {
        double c_ = crow[j];
        c_ += a0 * y0[j];
        c_ += a1 * y1[j];
        c_ += a2 * y2[j];
        c_ += a3 * y3[j];
        crow[j] = c_;
      }
    }
    for (; r < m; ++r) {
      const double* __restrict xr = xa + size_t(r) * da;
      const double xi = xr[i];
      const double* __restrict xs = xr + i;
      for (int j = 0; j < len; ++j) grow[j] += xi * xs[j];
      const double* __restrict yr = y + size_t(r) * d_out;
      for (int j = 0; j < d_out; ++j) crow[j] += xi * yr[j];
    }
    off += size_t(len);
  }
  for (int r = 0; r < m; ++r) {
    const double* __restrict yr = y + size_t(r) * d_out;
    for (int j = 0; j < d_out; ++j) yy[j] += yr[j] * yr[j];
  }
}

using AccumulateFn = void (*)(const double*, const double*, int, int, int, double*, double*, double*);

void accumulate_scalar(const double* xa, const double* y, int m, int da, int d_out, double* g, double* c,
                       double* yy) {
  accumulate_body(xa, y, m, da, d_out, g, c, yy);
}
__attribute__((target("avx2"))) void accumulate_avx2(const double* xa, const double* y, int m, int da, int d_out,
                                                     double* g, double* c, double* yy) {
  accumulate_body(xa, y, m, da, d_out, g, c, yy);
}
__attribute__((target("avx512f"))) void accumulate_avx512(const double* xa, const double* y, int m, int da,
                                                          int d_out, double* g, double* c, double* yy) {
  accumulate_body(xa, y, m, da, d_out, g, c, yy);
}

AccumulateFn accumulate_fn() {
  switch (simd_base(active_simd())) {
    case SimdLevel::scalar: return accumulate_scalar;
    case SimdLevel::avx512: return accumulate_avx512;
    default: return accumulate_avx2;  // avx2, avxvnni, avxvnni-evex: ymm registers
  }
}

constexpr int kChunkRows = 32;

}  // namespace

void NormalEquations::add(const float* x, const float* y, int64_t n) {
  const int da = d_in_ + 1;
  const AccumulateFn fn = accumulate_fn();
  thread_local std::vector<double> xa, yd;
  for (int64_t r0 = 0; r0 < n; r0 += kChunkRows) {
    const int m = int(std::min<int64_t>(kChunkRows, n - r0));
    xa.resize(size_t(m) * da);
    yd.resize(size_t(m) * d_out_);
    for (int r = 0; r < m; ++r) {
      const float* xr = x + (r0 + r) * d_in_;
      double* dst = xa.data() + size_t(r) * da;
      for (int i = 0; i < d_in_; ++i) dst[i] = xr[i];
      dst[d_in_] = 1.0;
      const float* yr = y + (r0 + r) * d_out_;
      double* ydst = yd.data() + size_t(r) * d_out_;
      for (int j = 0; j < d_out_; ++j) ydst[j] = yr[j];
    }
    fn(xa.data(), yd.data(), m, da, d_out_, g_.data(), c_.data(), yy_.data());
  }
  rows_ += n;
}

namespace {

Eigen::MatrixXd full_gram(const std::vector<double>& g, int da, int k) {
  Eigen::MatrixXd a(k, k);
  size_t off = 0;
  for (int i = 0; i < da; ++i) {
    for (int j = i; j < da; ++j)
      if (i < k && j < k) a(i, j) = a(j, i) = g[off + size_t(j - i)];
    off += size_t(da - i);
  }
  return a;
}

}  // namespace

LinearMap NormalEquations::solve(const FitOptions& o, const std::string& where) const {
  if (rows_ <= 0) fail_field(where, "rows", "at least one calibration row", "0");
  if (!(o.lambda > 0.0) || !std::isfinite(o.lambda))
    fail_field(where, "lambda", "a finite value > 0", std::to_string(o.lambda));
  if (o.anchor_identity && d_in_ != d_out_)
    fail_field(where, "anchor_identity", "d_in == d_out (matching geometry)",
               std::to_string(d_in_) + " -> " + std::to_string(d_out_));
  const int da = d_in_ + 1;
  const int k = o.affine ? da : d_in_;  // unknowns per output column
  Eigen::MatrixXd a = full_gram(g_, da, k);
  Eigen::MatrixXd rhs(k, d_out_);
  for (int i = 0; i < k; ++i)
    for (int j = 0; j < d_out_; ++j) rhs(i, j) = c_[size_t(i) * d_out_ + j];
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

double NormalEquations::ss_res(const LinearMap& map) const {
  EMBER_CHECK(map.d_in == d_in_ && map.d_out == d_out_);
  const int da = d_in_ + 1;
  const Eigen::MatrixXd g = full_gram(g_, da, da);
  Eigen::MatrixXd w(da, d_out_);
  for (int i = 0; i < d_in_; ++i)
    for (int j = 0; j < d_out_; ++j) w(i, j) = map.w[size_t(i) * d_out_ + j];
  for (int j = 0; j < d_out_; ++j) w(d_in_, j) = map.b[size_t(j)];
  const Eigen::MatrixXd gw = g * w;
  double quad = 0, cross = 0, yy = 0;
  for (int j = 0; j < d_out_; ++j) {
    for (int i = 0; i < da; ++i) {
      quad += w(i, j) * gw(i, j);
      cross += w(i, j) * c_[size_t(i) * d_out_ + j];
    }
    yy += yy_[size_t(j)];
  }
  const double s = quad - 2.0 * cross + yy;
  return s > 0 ? s : 0.0;
}

double NormalEquations::r2(const LinearMap& map) const {
  if (rows_ == 0) return std::numeric_limits<double>::quiet_NaN();
  double ss_tot = 0;
  const double* sums = c_.data() + size_t(d_in_) * d_out_;  // the ones row: column sums of Y
  for (int j = 0; j < d_out_; ++j) {
    const double mean = sums[j] / double(rows_);
    ss_tot += yy_[size_t(j)] - double(rows_) * mean * mean;
  }
  if (!(ss_tot > 0)) return std::numeric_limits<double>::quiet_NaN();
  return 1.0 - ss_res(map) / ss_tot;
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
