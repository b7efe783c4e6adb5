#pragma once
// Closed-form linear maps between two representations, solved in f64 (Eigen).
//
// For rows x (d_in,) and targets y (d_out,), a map is  y_hat = x @ W + b  with
//   W (d_in, d_out), b (d_out,)  (b == 0 unless the map is affine).
// The fit minimizes  sum_rows ||x W + b - y||^2 + lambda * ||W - W0||_F^2  where W0 = 0 (plain
// ridge) or W0 = I (the "L2 anchor toward identity", only when d_in == d_out). The bias of an
// affine map is never penalized. There is exactly one declared lambda and no search.
//
// Determinism: the normal equations are accumulated row by row in a fixed loop order in f64
// (no threading, no FMA contraction: -ffp-contract=off is global), and solved by one LDLT on a
// single thread, so the same rows in the same order give the same bits on every run.
#include <cstdint>
#include <string>
#include <vector>

namespace ember::map {

struct FitOptions {
  double lambda = 1e-3;          // > 0; the one declared penalty
  bool affine = false;           // add an unpenalized bias column
  bool anchor_identity = false;  // penalize ||W - I||^2 instead of ||W||^2 (needs d_in == d_out)
};

// y (d_out,) = x (d_in,) @ W (d_in, d_out) + b (d_out,). Plain data.
struct LinearMap {
  int d_in = 0;
  int d_out = 0;
  std::vector<double> w;  // (d_in, d_out) row-major: w[i * d_out + j]
  std::vector<double> b;  // (d_out,); all zero when not affine

  static LinearMap identity(int d);
  bool is_identity() const;
  // f64 accumulation in index order, each output rounded once to f32.
  void apply(const float* x, float* y) const;
  void apply(const double* x, double* y) const;
};

// Sufficient statistics of one least-squares problem, accumulated in f64:
//   G (d_in+1, d_in+1) = Xa^T Xa (symmetric: only its upper triangle is kept, packed row by
//   row), C (d_in+1, d_out) = Xa^T Y with Xa = [X | 1], and yy (d_out) = the column sums of
//   Y*Y. The last row/column of G (the ones column) is used only by affine fits; C's last row
//   is the column sums of Y and G's last entry the row count, which, with yy, is what R² needs.
// Memory is O(d^2) whatever the number of rows. Every entry receives its products in row
// order, one addition at a time (no reassociation, no FMA), so the bits depend only on the rows
// and their order: add() over a block of rows equals add() row by row, on every SIMD path.
class NormalEquations {
 public:
  NormalEquations() = default;
  NormalEquations(int d_in, int d_out);
  // x (n, d_in), y (n, d_out), row-major f32.
  void add(const float* x, const float* y, int64_t n);
  int64_t rows() const { return rows_; }
  int d_in() const { return d_in_; }
  int d_out() const { return d_out_; }
  // Solves the penalized problem. Error (naming `where`) if there are no rows, lambda <= 0 or
  // not finite, the anchor is asked for with d_in != d_out, or the solve is not finite.
  LinearMap solve(const FitOptions& options, const std::string& where) const;
  // Sum over the rows of ||x W + b - y||^2, from the statistics (a quadratic form in [W; b]):
  // sum_j (w_j^T G w_j - 2 w_j^T c_j + yy_j), clamped at 0 against rounding.
  double ss_res(const LinearMap& map) const;
  // R^2 of `map` over the rows accumulated, as R2Accumulator defines it (SS_tot about the
  // per-dimension mean), computed from the statistics; NaN with no rows or SS_tot == 0.
  double r2(const LinearMap& map) const;

  // The raw statistics (the calibration format's payload): G's packed upper triangle
  // ((d_in+1)(d_in+2)/2 entries, row i holding columns i..d_in), C row-major, yy.
  static size_t g_size(int d_in) { return size_t(d_in + 1) * size_t(d_in + 2) / 2; }
  std::vector<double>& g() { return g_; }
  std::vector<double>& c() { return c_; }
  std::vector<double>& yy() { return yy_; }
  const std::vector<double>& g() const { return g_; }
  const std::vector<double>& c() const { return c_; }
  const std::vector<double>& yy() const { return yy_; }
  void set_rows(int64_t n) { rows_ = n; }

 private:
  int d_in_ = 0, d_out_ = 0;
  int64_t rows_ = 0;
  std::vector<double> g_;   // packed upper triangle of (d_in+1, d_in+1)
  std::vector<double> c_;   // (d_in+1, d_out)
  std::vector<double> yy_;  // (d_out)
};

// R^2 = 1 - SS_res / SS_tot over all output dimensions together, where SS_tot is taken about
// the per-dimension mean of the y rows seen (so the constant predictor scores 0 and a perfect
// map scores 1). Accumulated in f64; NaN when SS_tot == 0.
class R2Accumulator {
 public:
  explicit R2Accumulator(int d_out) : sum_(size_t(d_out), 0.0), sum_sq_(size_t(d_out), 0.0) {}
  // Adds rows of predictions y_hat (n, d_out) against truths y (n, d_out).
  void add(const float* y_hat, const float* y, int64_t n);
  int64_t rows() const { return rows_; }
  double ss_res() const { return ss_res_; }
  double r2() const;

 private:
  std::vector<double> sum_, sum_sq_;
  double ss_res_ = 0;
  int64_t rows_ = 0;
};

}  // namespace ember::map
