// The f64 closed-form fits: recovery of known maps, the identity anchor, the unpenalized bias,
// determinism, and the refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "map/ridge.h"
#include "map/split.h"
#include "util/error.h"
#include "util/simd.h"

namespace ember::map {
namespace {

std::vector<float> random_rows(Rng& rng, int n, int d, double scale = 1.0) {
  std::vector<float> x(size_t(n) * d);
  for (auto& v : x) v = float(rng.normal() * scale);
  return x;
}

// y = x @ a + b computed in f64, rounded to f32.
std::vector<float> apply_known(const std::vector<float>& x, int n, int d_in, int d_out,
                               const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<float> y(size_t(n) * d_out);
  for (int r = 0; r < n; ++r)
    for (int j = 0; j < d_out; ++j) {
      double s = b.empty() ? 0.0 : b[size_t(j)];
      for (int i = 0; i < d_in; ++i) s += double(x[size_t(r) * d_in + i]) * a[size_t(i) * d_out + j];
      y[size_t(r) * d_out + j] = float(s);
    }
  return y;
}

double r2_of(const LinearMap& m, const std::vector<float>& x, const std::vector<float>& y, int n) {
  R2Accumulator acc(m.d_out);
  std::vector<float> pred(size_t(m.d_out));
  for (int r = 0; r < n; ++r) {
    m.apply(x.data() + size_t(r) * m.d_in, pred.data());
    acc.add(pred.data(), y.data() + size_t(r) * m.d_out, 1);
  }
  return acc.r2();
}

TEST(Ridge, SourceEqualsTargetRecoversIdentity) {
  Rng rng(1);
  const int n = 400, d = 8;
  const auto x = random_rows(rng, n, d);
  NormalEquations ne(d, d);
  ne.add(x.data(), x.data(), n);
  for (bool affine : {false, true}) {
    FitOptions o;
    o.lambda = 1e-6;
    o.affine = affine;
    const LinearMap m = ne.solve(o, "test");
    for (int i = 0; i < d; ++i)
      for (int j = 0; j < d; ++j) EXPECT_NEAR(m.w[size_t(i) * d + j], i == j ? 1.0 : 0.0, 1e-7);
    for (double b : m.b) EXPECT_NEAR(b, 0.0, 1e-7);
    EXPECT_GT(r2_of(m, x, x, n), 1.0 - 1e-10);
  }
}

TEST(Ridge, RecoversKnownRandomAffineMap) {
  Rng rng(2);
  const int n = 600, di = 6, dout = 10;
  const auto x = random_rows(rng, n, di);
  std::vector<double> a(size_t(di) * dout), b(static_cast<size_t>(dout));
  for (auto& v : a) v = rng.normal();
  for (auto& v : b) v = 3.0 * rng.normal();
  const auto y = apply_known(x, n, di, dout, a, b);
  NormalEquations ne(di, dout);
  ne.add(x.data(), y.data(), n);
  FitOptions o;
  o.lambda = 1e-8;
  o.affine = true;
  const LinearMap m = ne.solve(o, "test");
  // f32 rounding of y is the only noise: relative 6e-8.
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(m.w[i], a[i], 1e-5);
  for (size_t j = 0; j < b.size(); ++j) EXPECT_NEAR(m.b[j], b[j], 1e-5);
  EXPECT_GT(r2_of(m, x, y, n), 1.0 - 1e-10);
  // Without the bias column the same data cannot be fitted: R² drops visibly.
  o.affine = false;
  EXPECT_LT(r2_of(ne.solve(o, "test"), x, y, n), 0.9);
}

TEST(Ridge, PenaltyPullsTowardZeroOrIdentityButNeverTheBias) {
  Rng rng(3);
  const int n = 200, d = 5;
  const auto x = random_rows(rng, n, d);
  std::vector<double> a(size_t(d) * d);
  for (auto& v : a) v = rng.normal();
  std::vector<double> b(static_cast<size_t>(d), 7.0);
  const auto y = apply_known(x, n, d, d, a, b);
  NormalEquations ne(d, d);
  ne.add(x.data(), y.data(), n);
  FitOptions o;
  o.lambda = 1e12;
  o.affine = true;
  LinearMap zero = ne.solve(o, "test");
  o.anchor_identity = true;
  LinearMap ident = ne.solve(o, "test");
  double mean_y0 = 0;
  for (int r = 0; r < n; ++r) mean_y0 += y[size_t(r) * d] / n;
  double mean_x0 = 0;
  for (int r = 0; r < n; ++r) mean_x0 += x[size_t(r) * d] / n;
  for (int i = 0; i < d; ++i)
    for (int j = 0; j < d; ++j) {
      EXPECT_NEAR(zero.w[size_t(i) * d + j], 0.0, 1e-6);
      EXPECT_NEAR(ident.w[size_t(i) * d + j], i == j ? 1.0 : 0.0, 1e-6);
    }
  // The bias is unpenalized: with W pinned at 0 it is the mean of y; with W pinned at I it is
  // mean(y - x).
  EXPECT_NEAR(zero.b[0], mean_y0, 1e-6);
  EXPECT_NEAR(ident.b[0], mean_y0 - mean_x0, 1e-6);
}

TEST(Ridge, DeterministicBits) {
  Rng rng(4);
  const int n = 300, d = 12;
  const auto x = random_rows(rng, n, d);
  const auto y = random_rows(rng, n, d);
  FitOptions o;
  o.lambda = 0.5;
  o.affine = true;
  o.anchor_identity = true;
  NormalEquations a(d, d), b(d, d);
  a.add(x.data(), y.data(), n);
  b.add(x.data(), y.data(), 100);
  b.add(x.data() + 100 * d, y.data() + 100 * d, n - 100);  // streamed in two pieces
  const LinearMap ma = a.solve(o, "a"), mb = b.solve(o, "b");
  ASSERT_EQ(ma.w.size(), mb.w.size());
  EXPECT_EQ(std::memcmp(ma.w.data(), mb.w.data(), ma.w.size() * sizeof(double)), 0);
  EXPECT_EQ(std::memcmp(ma.b.data(), mb.b.data(), ma.b.size() * sizeof(double)), 0);
}

// The blocked accumulation kernel (32-row chunks, 4 rows per pass) gives every entry of G, C
// and yy its products in row order: a block of 75 rows equals 75 one-row adds bit for bit
// (remainder paths included), and so does every SIMD path; the statistics' own entries are
// what they name (G's ones entry = rows, C's ones row = column sums, yy = column sums of y*y).
TEST(Ridge, BlockedAccumulationEqualsRowByRowOnEverySimdPath) {
  Rng rng(11);
  const int n = 75, di = 9, dout = 6;
  const auto x = random_rows(rng, n, di), y = random_rows(rng, n, dout);
  set_simd_override(SimdLevel::scalar);
  NormalEquations rows(di, dout);
  for (int r = 0; r < n; ++r) rows.add(x.data() + size_t(r) * di, y.data() + size_t(r) * dout, 1);
  for (SimdLevel level : supported_simd_levels()) {
    set_simd_override(level);
    NormalEquations block(di, dout);
    block.add(x.data(), y.data(), n);
    EXPECT_EQ(block.g(), rows.g()) << simd_name(level);
    EXPECT_EQ(block.c(), rows.c()) << simd_name(level);
    EXPECT_EQ(block.yy(), rows.yy()) << simd_name(level);
  }
  set_simd_override(detect_simd());
  EXPECT_EQ(rows.g().size(), NormalEquations::g_size(di));
  EXPECT_EQ(rows.g().back(), double(n));
  double sum = 0, sq = 0, g00 = 0;
  for (int r = 0; r < n; ++r) {
    sum += y[size_t(r) * dout + 2];
    sq += double(y[size_t(r) * dout + 2]) * y[size_t(r) * dout + 2];
    g00 += double(x[size_t(r) * di]) * x[size_t(r) * di];
  }
  EXPECT_EQ(rows.c()[size_t(di) * dout + 2], sum);
  EXPECT_EQ(rows.yy()[2], sq);
  EXPECT_EQ(rows.g()[0], g00);
}

TEST(Ridge, Refusals) {
  NormalEquations empty(3, 3);
  FitOptions o;
  EXPECT_THROW(empty.solve(o, "t"), Error);
  Rng rng(5);
  const auto x = random_rows(rng, 10, 3);
  const auto y = random_rows(rng, 10, 4);
  NormalEquations ne(3, 4);
  ne.add(x.data(), y.data(), 10);
  o.lambda = 0;
  EXPECT_THROW(ne.solve(o, "t"), Error);
  o.lambda = std::nan("");
  EXPECT_THROW(ne.solve(o, "t"), Error);
  o.lambda = 1;
  o.anchor_identity = true;  // 3 -> 4 has no identity
  try {
    ne.solve(o, "t");
    FAIL() << "anchor accepted for mismatched dims";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("anchor_identity"), std::string::npos);
  }
}

TEST(Ridge, R2OfConstantPredictorIsZero) {
  std::vector<float> y = {1, 2, 3, 4};
  std::vector<float> mean = {2.5f, 2.5f, 2.5f, 2.5f};
  R2Accumulator acc(1);
  acc.add(mean.data(), y.data(), 4);
  EXPECT_NEAR(acc.r2(), 0.0, 1e-12);
  R2Accumulator none(1);
  EXPECT_TRUE(std::isnan(none.r2()));
}

}  // namespace
}  // namespace ember::map
