// Non-matmul kernels of the canonical-v1 contract: accuracy of exp_f32 against libm, and the
// SIMD twins against the scalar reference bit for bit on every path this CPU supports.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "support/test_support.h"
#include "ops/activations.h"
#include "ops/dot.h"
#include "ops/norm.h"
#include "ops/vec.h"
#include "util/f16.h"
#include "util/simd.h"

namespace ember::ops {
namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Distance in representable floats (same sign assumed: exp is positive).
int64_t ulp_distance(float a, float b) { return std::llabs(int64_t(bits(a)) - int64_t(bits(b))); }

// Restores the SIMD choice after a test that forces paths.
struct SimdGuard {
  ~SimdGuard() { set_simd_override(detect_simd()); }
};

std::vector<float> edge_and_random(size_t n, float lo, float hi, uint32_t seed) {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, 88.72f, 88.73f, -87.3f, -87.4f, -100.0f,
                          -103.9f, -104.0f, 1e-8f, -1e-8f, 0.5f * float(M_LN2), -0.5f * float(M_LN2),
                          INFINITY, -INFINITY, std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::denorm_min(), 3.4e38f, -3.4e38f};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  while (v.size() < n) v.push_back(d(rng));
  return v;
}

TEST(Exp, WithinTwoUlpOfLibmOverTheWholeRange) {
  int64_t worst = 0;
  float worst_x = 0;
  for (float x = -103.0f; x < 88.7f; x = std::nextafter(x, INFINITY) + 0.000731f) {
    const float want = float(std::exp(double(x)));
    const int64_t d = ulp_distance(exp_f32(x), want);
    if (d > worst) worst = d, worst_x = x;
  }
  // Subnormal results have fewer bits, so a one-ulp slip is the same absolute error.
  EXPECT_LE(worst, 2) << "at x = " << worst_x;
}

TEST(Exp, SpecialValues) {
  EXPECT_EQ(exp_f32(0.0f), 1.0f);
  EXPECT_EQ(exp_f32(-INFINITY), 0.0f);
  EXPECT_EQ(exp_f32(INFINITY), INFINITY);
  EXPECT_EQ(exp_f32(89.0f), INFINITY);
  EXPECT_EQ(exp_f32(-105.0f), 0.0f);
  EXPECT_TRUE(std::isnan(exp_f32(NAN)));
  EXPECT_GT(exp_f32(-100.0f), 0.0f);  // subnormal, not flushed
  EXPECT_NEAR(exp_f32(1.0f), 2.7182817f, 3e-7f);
}

TEST(Exp, EveryPathIsBitIdenticalToScalar) {
  SimdGuard guard;
  const std::vector<float> x = edge_and_random(4099, -110.0f, 95.0f, 7);
  std::vector<float> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = exp_f32(x[i]);
  for (SimdLevel level : test::simd_levels_under_test()) {
    set_simd_override(level);
    for (size_t n : {size_t(1), size_t(15), size_t(16), size_t(17), x.size()}) {
      std::vector<float> got(n);
      exp_row(x.data(), int64_t(n), got.data());
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(bits(got[i]), bits(want[i])) << simd_name(level) << " x=" << x[i];
    }
  }
}

// Runs of arguments all inside [-86, 88], where the vector twins scale by one multiply, and
// sorted sweeps across both ends of that range and of exp_f32's own (-103.97, 88.72), so that
// vectors hold lanes on both sides: every path gives the scalar bits.
TEST(Exp, EveryPathIsBitIdenticalToScalarInAndAcrossTheFastRange) {
  SimdGuard guard;
  std::vector<float> x;
  for (float v = -86.0f; v <= 88.0f; v += 0.0137f) x.push_back(v);
  for (float v = -86.2f; v <= -85.8f; v = std::nextafter(v, INFINITY) + 1e-4f) x.push_back(v);
  for (float v = 87.8f; v <= 88.8f; v = std::nextafter(v, INFINITY) + 1e-4f) x.push_back(v);
  for (float v = -104.1f; v <= -103.8f; v = std::nextafter(v, INFINITY) + 1e-4f) x.push_back(v);
  std::vector<float> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = exp_f32(x[i]);
  for (SimdLevel level : test::simd_levels_under_test()) {
    set_simd_override(level);
    std::vector<float> got(x.size());
    exp_row(x.data(), int64_t(x.size()), got.data());
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_EQ(bits(got[i]), bits(want[i])) << simd_name(level) << " x=" << x[i];
  }
}

TEST(Silu, EveryPathIsBitIdenticalToScalarAndCorrect) {
  SimdGuard guard;
  const std::vector<float> g = edge_and_random(1027, -30.0f, 30.0f, 9);
  const std::vector<float> u = edge_and_random(1027, -3.0f, 3.0f, 10);
  set_simd_override(SimdLevel::scalar);
  std::vector<float> want(g.size());
  silu_mul_row(g.data(), u.data(), int64_t(g.size()), want.data());
  for (size_t i = 30; i < g.size(); ++i) {  // random part: close to the f64 definition
    const double ref = double(g[i]) / (1.0 + std::exp(-double(g[i]))) * double(u[i]);
    EXPECT_NEAR(want[i], ref, 1e-6 * (1.0 + std::fabs(ref)));
  }
  for (SimdLevel level : test::simd_levels_under_test()) {
    set_simd_override(level);
    std::vector<float> got(g.size());
    silu_mul_row(g.data(), u.data(), int64_t(g.size()), got.data());
    for (size_t i = 0; i < g.size(); ++i)
      ASSERT_EQ(bits(got[i]), bits(want[i])) << simd_name(level) << " g=" << g[i];
  }
}

TEST(Softmax, NormalizedStableAndPathIndependent) {
  SimdGuard guard;
  std::vector<float> s = edge_and_random(300, -50.0f, 50.0f, 3);
  s.erase(s.begin(), s.begin() + 21);  // finite values only
  s[5] = 1000.0f;                      // a huge score: max subtraction keeps it finite
  set_simd_override(SimdLevel::scalar);
  std::vector<float> want = s;
  softmax_row(want.data(), int64_t(want.size()));
  double sum = 0;
  for (float p : want) sum += p;
  EXPECT_NEAR(sum, 1.0, 1e-5);
  EXPECT_EQ(want[5], 1.0f);
  for (SimdLevel level : test::simd_levels_under_test()) {
    set_simd_override(level);
    std::vector<float> got = s;
    softmax_row(got.data(), int64_t(got.size()));
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(bits(got[i]), bits(want[i]));
  }
}

// Several rows at once (lengths 1 to 300, ten rows: a group of 8 and one of 2, the first
// row shortest, so the shared prefix is one element) give each row the bits of its own
// softmax_row, on every path; a NaN at the start of a row stays that row's.
TEST(Softmax, RowsGiveEachRowItsOwnBits) {
  SimdGuard guard;
  const std::vector<float> base = edge_and_random(330, -40.0f, 40.0f, 13);
  const int64_t lens[10] = {1, 300, 299, 7, 64, 250, 128, 3, 200, 201};
  for (SimdLevel level : test::simd_levels_under_test()) {
    set_simd_override(level);
    std::vector<std::vector<float>> got(10), want(10);
    float* rows[10];
    for (int r = 0; r < 10; ++r) {
      want[size_t(r)].assign(base.begin() + 21 + r, base.begin() + 21 + r + lens[r]);
      if (r == 3) want[size_t(r)][0] = std::nanf("");
      got[size_t(r)] = want[size_t(r)];
      rows[r] = got[size_t(r)].data();
      softmax_row(want[size_t(r)].data(), lens[r]);
    }
    softmax_rows(rows, lens, 10);
    for (int r = 0; r < 10; ++r)
      for (int64_t i = 0; i < lens[r]; ++i) {
        const float g = got[size_t(r)][size_t(i)], w = want[size_t(r)][size_t(i)];
        if (std::isnan(w)) {
          ASSERT_TRUE(std::isnan(g)) << simd_name(level) << " row " << r;
          continue;
        }
        ASSERT_EQ(bits(g), bits(w)) << simd_name(level) << " row " << r << " element " << i;
      }
  }
}

// The exponentials and sums of softmax_exp_rows are softmax_row's steps, spelled out here as
// its contract states them (the max by `x > m ? x : m` from the first element, exp_f32 of the
// difference, a sequential sum from +0), on every path: rows longer than a block of sums (512)
// and of odd lengths, the max in a vector's tail, at the start and in the middle, a NaN in the
// middle (ignored by the max, not by the sum) and at the start (the whole row NaN), -inf
// scores (weight 0), a zero max with both signs of zero, and a group of 8 rows plus one.
// Then each e / sum is softmax_row's bit.
TEST(Softmax, ExpRowsAreTheContractsStepsOnEveryPath) {
  SimdGuard guard;
  const int64_t lens[9] = {1300, 1301, 517, 9, 1, 1299, 1024, 700, 33};
  std::vector<std::vector<float>> base(9);
  for (int r = 0; r < 9; ++r) {
    std::mt19937 rng(uint32_t(40 + r));
    std::uniform_real_distribution<float> d(-30.0f, 12.0f);
    for (int64_t i = 0; i < lens[r]; ++i) base[size_t(r)].push_back(d(rng));
  }
  base[0][1299] = 40.0f;                                     // max in the last vector's tail
  base[1][0] = 50.0f;                                        // max first
  base[2][300] = std::numeric_limits<float>::quiet_NaN();    // NaN in the middle
  base[2][301] = 60.0f;
  base[3][0] = std::numeric_limits<float>::quiet_NaN();      // NaN first: all NaN
  for (float& x : base[5]) x = x > 0.0f ? -x : x;            // all <= 0 ...
  base[5][100] = 0.0f, base[5][900] = -0.0f, base[5][7] = -0.0f;  // ... max a zero of either sign
  base[6][17] = -INFINITY, base[6][1000] = -INFINITY;
  auto reference = [](std::vector<float> s, float* sum) {
    float m = s[0];
    for (float x : s) m = x > m ? x : m;
    float acc = 0.0f;
    for (float& x : s) x = exp_f32(x - m), acc += x;
    *sum = acc;
    return s;
  };
  auto same = [](float a, float b) { return std::isnan(a) ? std::isnan(b) : bits(a) == bits(b); };
  for (SimdLevel level : test::simd_levels_under_test()) {
    set_simd_override(level);
    std::vector<std::vector<float>> got = base;
    float* rows[9];
    for (int r = 0; r < 9; ++r) rows[r] = got[size_t(r)].data();
    float sums[9];
    softmax_exp_rows(rows, lens, 9, sums);
    for (int r = 0; r < 9; ++r) {
      float want_sum;
      const std::vector<float> want = reference(base[size_t(r)], &want_sum);
      ASSERT_TRUE(same(sums[r], want_sum)) << simd_name(level) << " row " << r;
      std::vector<float> soft = base[size_t(r)];
      softmax_row(soft.data(), lens[r]);
      for (int64_t i = 0; i < lens[r]; ++i) {
        ASSERT_TRUE(same(got[size_t(r)][size_t(i)], want[size_t(i)]))
            << simd_name(level) << " row " << r << " element " << i;
        ASSERT_TRUE(same(got[size_t(r)][size_t(i)] / sums[r], soft[size_t(i)]))
            << simd_name(level) << " row " << r << " element " << i;
      }
    }
    EXPECT_TRUE(std::isnan(sums[3])) << simd_name(level);
    EXPECT_FALSE(std::isnan(sums[0])) << simd_name(level);
  }
}

// divide_round_f16_row: x / d rounded to f16 and back, on every path, for quotients that are
// normal, subnormal and overflowing in f16, zero, and NaN, at lengths with and without a tail.
TEST(Vec, DivideRoundF16IsTheQuotientRoundedToF16) {
  SimdGuard guard;
  const std::vector<float> x = edge_and_random(1003, -70000.0f, 70000.0f, 6);
  for (float d : {1.0f, 3.0f, 7e4f, 1e-3f, 1e9f}) {
    for (SimdLevel level : test::simd_levels_under_test()) {
      set_simd_override(level);
      for (int64_t n : {int64_t(1003), int64_t(8), int64_t(5)}) {
        std::vector<float> got(static_cast<size_t>(n));
        divide_round_f16_row(x.data(), d, n, got.data());
        for (int64_t i = 0; i < n; ++i) {
          const float want = f16_to_f32(f32_to_f16(x[size_t(i)] / d));
          if (std::isnan(want)) {
            ASSERT_TRUE(std::isnan(got[size_t(i)])) << simd_name(level);
            continue;
          }
          ASSERT_EQ(bits(got[size_t(i)]), bits(want)) << simd_name(level) << " x=" << x[size_t(i)] << " d=" << d;
        }
      }
    }
  }
}

TEST(Vec, TwinsAreBitIdentical) {
  SimdGuard guard;
  const std::vector<float> x = edge_and_random(1000, -70000.0f, 70000.0f, 4);
  std::vector<float> small = edge_and_random(1000, -1e-4f, 1e-4f, 5);  // f16 subnormals
  set_simd_override(SimdLevel::scalar);
  std::vector<float> y0 = small;
  axpy_f32(0.37f, x.data(), y0.data(), int64_t(x.size()));
  std::vector<uint16_t> h0(x.size()), hs0(x.size());
  f32_to_f16_row(x.data(), h0.data(), int64_t(x.size()));
  f32_to_f16_row(small.data(), hs0.data(), int64_t(x.size()));
  std::vector<float> back0(x.size());
  f16_to_f32_row(hs0.data(), back0.data(), int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(hs0[i], f32_to_f16(small[i]));
  for (SimdLevel level : test::simd_levels_under_test()) {
    set_simd_override(level);
    std::vector<float> y = small;
    axpy_f32(0.37f, x.data(), y.data(), int64_t(x.size()));
    std::vector<uint16_t> h(x.size()), hs(x.size());
    f32_to_f16_row(x.data(), h.data(), int64_t(x.size()));
    f32_to_f16_row(small.data(), hs.data(), int64_t(x.size()));
    std::vector<float> back(x.size());
    f16_to_f32_row(hs.data(), back.data(), int64_t(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(bits(y[i]), bits(y0[i])) << simd_name(level);
      if (!std::isnan(x[i])) {
        ASSERT_EQ(h[i], h0[i]) << simd_name(level) << " x=" << x[i];
      }
      ASSERT_EQ(hs[i], hs0[i]) << simd_name(level);
      ASSERT_EQ(bits(back[i]), bits(back0[i])) << simd_name(level);
    }
  }
}

// The transposing conversion of a key block: every f16 pattern (subnormals, infinities, NaN
// included) lands, converted exactly, at (column, row), on every path, for 8 x 8 blocks and
// for the edges (19 rows, 21 columns), and nothing outside the block is written.
TEST(Vec, F16RowsToF32ColumnsTransposesExactly) {
  SimdGuard guard;
  const int64_t rows = 19, n = 21, ld = rows + 5;
  std::vector<uint16_t> src(size_t(rows * n));
  for (size_t i = 0; i < src.size(); ++i) src[i] = uint16_t(i * 2654435761u >> 7);
  src[0] = 0x7C00;  // +inf
  src[1] = 0x0001;  // smallest subnormal
  src[2] = 0x7E00;  // NaN
  for (SimdLevel level : test::simd_levels_under_test()) {
    set_simd_override(level);
    std::vector<float> dst(size_t(n * ld), -7.0f);
    f16_rows_to_f32_columns(src.data(), rows, n, dst.data(), ld);
    for (int64_t j = 0; j < n; ++j)
      for (int64_t c = 0; c < ld; ++c) {
        const float got = dst[size_t(j * ld + c)];
        if (c >= rows) {
          ASSERT_EQ(got, -7.0f) << simd_name(level) << " wrote past the rows";
          continue;
        }
        const float want = f16_to_f32(src[size_t(c * n + j)]);
        if (std::isnan(want)) {
          ASSERT_TRUE(std::isnan(got)) << simd_name(level);
        } else {
          ASSERT_EQ(bits(got), bits(want)) << simd_name(level) << " row " << c << " column " << j;
        }
      }
  }
}

// The row kernels attention uses over a block of keys give the bits of the one-row calls on
// the same path (edge values included), and the paths agree with scalar on finite data.
// axpy_rows_f32_shared: 1 to 13 outputs over one x (groups of 3 and 4 and their remainders),
// at widths that take each vector loop and tail (200 = 192 + 8), on every path: each output
// has the bits of its own scalar axpy_rows_f32 call; a NaN and an infinity in x stay where
// they land (NaN for NaN: its sign and payload are not canonical-v1's).
TEST(Vec, SharedRowsEqualEachOutputsOwnCall) {
  SimdGuard guard;
  const int64_t rows = 29;
  for (const int64_t n : {int64_t(64), int64_t(128), int64_t(200), int64_t(40), int64_t(7)}) {
    std::vector<float> x = edge_and_random(size_t(rows * n) + 32, -3.0f, 3.0f, 21);
    x.erase(x.begin(), x.begin() + 32);
    x.resize(size_t(rows * n));
    x[size_t(3 * n + 1)] = std::numeric_limits<float>::quiet_NaN();
    x[size_t(5 * n + n - 1)] = INFINITY;
    for (int count = 1; count <= 13; ++count) {
      const size_t nc = static_cast<size_t>(count);
      std::vector<std::vector<float>> w(nc), y_in(nc), want(nc);
      set_simd_override(SimdLevel::scalar);
      for (int k = 0; k < count; ++k) {
        w[size_t(k)] = edge_and_random(size_t(rows) + 32, -1.0f, 1.0f, uint32_t(100 + k));
        w[size_t(k)].erase(w[size_t(k)].begin(), w[size_t(k)].begin() + 32);
        y_in[size_t(k)] = edge_and_random(size_t(n) + 32, -1.0f, 1.0f, uint32_t(200 + k));
        y_in[size_t(k)].erase(y_in[size_t(k)].begin(), y_in[size_t(k)].begin() + 32);
        want[size_t(k)] = y_in[size_t(k)];
        axpy_rows_f32(w[size_t(k)].data(), x.data(), rows, n, want[size_t(k)].data());
      }
      for (SimdLevel level : test::simd_levels_under_test()) {
        set_simd_override(level);
        std::vector<std::vector<float>> got = y_in;
        std::vector<const float*> ws;
        std::vector<float*> ys;
        for (int k = 0; k < count; ++k) ws.push_back(w[size_t(k)].data()), ys.push_back(got[size_t(k)].data());
        axpy_rows_f32_shared(ws.data(), x.data(), rows, n, ys.data(), count);
        for (int k = 0; k < count; ++k)
          for (int64_t i = 0; i < n; ++i) {
            const float g = got[size_t(k)][size_t(i)], e = want[size_t(k)][size_t(i)];
            if (std::isnan(e)) {
              ASSERT_TRUE(std::isnan(g)) << simd_name(level);
              continue;
            }
            ASSERT_EQ(bits(g), bits(e)) << simd_name(level) << " n=" << n << " count=" << count
                                        << " output " << k << " column " << i;
          }
      }
    }
  }
}

TEST(Vec, RowKernelsEqualTheirOneRowCalls) {  // and dot_f32_keys
  SimdGuard guard;
  for (const bool edges : {true, false})
    for (const int64_t n : {int64_t(64), int64_t(128), int64_t(40), int64_t(7)}) {
      const int64_t rows = 37;
      auto data = [&](size_t count, float lo, float hi, uint32_t seed) {
        std::vector<float> v = edge_and_random(count + (edges ? 0 : 32), lo, hi, seed);
        if (!edges) v.erase(v.begin(), v.begin() + 32);  // drop the 21 edge values (and more)
        v.resize(count);
        return v;
      };
      const std::vector<float> x = data(size_t(rows * n), -3.0f, 3.0f, 9);
      const std::vector<float> w = data(size_t(rows), -1.0f, 1.0f, 10);
      const std::vector<float> q = data(size_t(n), -2.0f, 2.0f, 11);
      const std::vector<float> y_in = data(size_t(n), -1.0f, 1.0f, 12);
      auto one_row_calls = [&](std::vector<float>& y, std::vector<float>& sc) {
        y = y_in;
        sc.assign(static_cast<size_t>(rows), 0.0f);
        for (int64_t r = 0; r < rows; ++r) {
          axpy_f32(w[size_t(r)], x.data() + r * n, y.data(), n);
          sc[size_t(r)] = dot_f32(q.data(), x.data() + r * n, n) * 0.125f;
        }
      };
      set_simd_override(SimdLevel::scalar);
      std::vector<float> scalar_y, scalar_s;
      one_row_calls(scalar_y, scalar_s);
      for (SimdLevel level : test::simd_levels_under_test()) {
        set_simd_override(level);
        std::vector<float> want_y, want_s;
        one_row_calls(want_y, want_s);
        std::vector<float> y = y_in, s(static_cast<size_t>(rows));
        axpy_rows_f32(w.data(), x.data(), rows, n, y.data());
        dot_f32_rows(q.data(), x.data(), rows, n, 0.125f, s.data());
        // The same keys transposed (element j of key c at kt[j * ld + c]), 8 per vector
        // with a remainder of 5: the bits of the per-key dots.
        const int64_t ld = rows + 3;
        std::vector<float> kt(size_t(n * ld), 7.0f), sk(static_cast<size_t>(rows));
        for (int64_t c = 0; c < rows; ++c)
          for (int64_t j = 0; j < n; ++j) kt[size_t(j * ld + c)] = x[size_t(c * n + j)];
        dot_f32_keys(q.data(), 1, kt.data(), rows, n, ld, 0.125f, sk.data(), rows);
        // Seven queries at once (a group of four and one of three; 37 keys are tiles of 24
        // and 8 and a remainder of 5): each row the bits of its own call.
        constexpr int64_t kQ = 7;
        std::vector<float> q3(size_t(kQ * n)), sk3(size_t(kQ * (rows + 2)), -1.0f);
        for (int64_t i = 0; i < kQ * n; ++i) q3[size_t(i)] = q[size_t(i % n)] * float(1 + i / n);
        dot_f32_keys(q3.data(), kQ, kt.data(), rows, n, ld, 0.125f, sk3.data(), rows + 2);
        for (int64_t i = 0; i < kQ; ++i) {
          std::vector<float> one(static_cast<size_t>(rows));
          dot_f32_keys(q3.data() + i * n, 1, kt.data(), rows, n, ld, 0.125f, one.data(), rows);
          for (int64_t r = 0; r < rows; ++r) {
            const float got = sk3[size_t(i * (rows + 2) + r)];
            if (std::isnan(got) && std::isnan(one[size_t(r)])) continue;
            ASSERT_EQ(bits(got), bits(one[size_t(r)])) << simd_name(level) << " query " << i;
          }
          EXPECT_EQ(sk3[size_t(i * (rows + 2) + rows)], -1.0f) << "wrote past its keys";
        }
        // A NaN score stays NaN; its sign and payload are not part of canonical-v1 (x86 keeps
        // the first NaN operand's, and a compiler may swap a commutative op's operands: the
        // -O2 sanitizer build gives +NaN here where -O3 gives -NaN).
        for (int64_t r = 0; r < rows; ++r) {
          if (std::isnan(sk[size_t(r)]) && std::isnan(want_s[size_t(r)])) continue;
          ASSERT_EQ(bits(sk[size_t(r)]), bits(want_s[size_t(r)]))
              << simd_name(level) << " n=" << n << " key " << r << " (transposed)";
        }
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(bits(y[size_t(i)]), bits(want_y[size_t(i)])) << simd_name(level) << " n=" << n;
          if (!edges) {
            ASSERT_EQ(bits(y[size_t(i)]), bits(scalar_y[size_t(i)])) << simd_name(level);
          }
        }
        for (int64_t r = 0; r < rows; ++r) {
          ASSERT_EQ(bits(s[size_t(r)]), bits(want_s[size_t(r)])) << simd_name(level) << " n=" << n;
          if (!edges) {
            ASSERT_EQ(bits(s[size_t(r)]), bits(scalar_s[size_t(r)])) << simd_name(level);
          }
        }
      }
    }
}

TEST(RmsNorm, MatchesDefinitionAndIsPathIndependent) {
  SimdGuard guard;
  const std::vector<float> x = edge_and_random(600, -3.0f, 3.0f, 6);
  std::vector<float> xs(x.begin() + 21, x.end());
  std::vector<float> w(xs.size());
  for (size_t i = 0; i < w.size(); ++i) w[i] = 1.0f + 0.001f * float(i % 17);
  set_simd_override(SimdLevel::scalar);
  std::vector<float> want(xs.size());
  rmsnorm_row(xs.data(), w.data(), int64_t(xs.size()), 1e-5f, want.data());
  double ss = 0;
  for (float v : xs) ss += double(v) * v;
  const double s = 1.0 / std::sqrt(ss / double(xs.size()) + 1e-5);
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_NEAR(want[i], xs[i] * s * w[i], 1e-5);
  for (SimdLevel level : test::simd_levels_under_test()) {
    set_simd_override(level);
    std::vector<float> got(xs.size());
    rmsnorm_row(xs.data(), w.data(), int64_t(xs.size()), 1e-5f, got.data());
    for (size_t i = 0; i < xs.size(); ++i) ASSERT_EQ(bits(got[i]), bits(want[i]));
  }
}

}  // namespace
}  // namespace ember::ops
