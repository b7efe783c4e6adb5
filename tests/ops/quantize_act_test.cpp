// The activation quantizers (ops/quantize_act.h): every SIMD path the CPU has gives the bits
// of the scalar reference, on random rows and on the edge cases of the recipe (NaN and
// infinities, zero blocks, ties of the rounding, clamping, ties of the largest magnitude).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "ops/quantize_act.h"
#include "support/test_support.h"

namespace ember {
namespace {

using ops::detail::quantize_q8_0_rows;
using ops::detail::quantize_q8_k_rows;

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// n rows of k values: random normals with, every few blocks, a block of edge values.
std::vector<float> rows_with_edges(int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> x(size_t(n * k));
  for (float& v : x) v = nd(rng);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto block = [&](int64_t i) { return x.data() + i * 32; };
  const int64_t nblocks = n * k / 32;
  for (int64_t i = 0; i < nblocks; i += 5) {
    float* b = block(i);
    switch ((i / 5) % 7) {
      case 0: std::fill(b, b + 32, 0.0f); break;                 // zero block
      case 1: b[3] = nan; b[17] = -nan; b[30] = nan; break;      // NaN ignored by the max
      case 2: b[9] = inf; break;                                 // amax = inf
      case 3: b[0] = -5.0f; b[31] = 5.0f; break;                 // equal magnitudes
      case 4:                                                    // rounding ties
        for (int j = 0; j < 32; ++j) b[j] = (float(j) - 15.5f) * 0.5f;
        b[0] = 127.0f;
        break;
      case 5: b[4] = 1e-42f; b[5] = -0.0f; break;                // subnormal, -0
      case 6: std::fill(b, b + 32, -0.0f); b[7] = nan; break;    // nothing but -0 and NaN
    }
  }
  return x;
}

TEST(QuantizeAct, Q8_0EveryPathGivesTheScalarBits) {
  for (int64_t k : {32, 96, 896}) {
    const int64_t n = 7, nb = k / 32;
    const std::vector<float> x = rows_with_edges(n, k, uint32_t(k));
    std::vector<int8_t> q0(size_t(n * k));
    std::vector<float> d0(size_t(n * nb));
    std::vector<int32_t> s0(size_t(n * nb));
    quantize_q8_0_rows(x.data(), n, k, q0.data(), d0.data(), s0.data(), SimdLevel::scalar);
    for (SimdLevel level : test::simd_levels_under_test()) {
      std::vector<int8_t> q(q0.size(), 99);
      std::vector<float> d(d0.size(), 99.0f);
      std::vector<int32_t> s(s0.size(), 99);
      quantize_q8_0_rows(x.data(), n, k, q.data(), d.data(), s.data(), level);
      EXPECT_EQ(q, q0) << simd_name(level) << " k=" << k;
      EXPECT_EQ(s, s0) << simd_name(level) << " k=" << k;
      for (size_t i = 0; i < d.size(); ++i)
        ASSERT_EQ(bits(d[i]), bits(d0[i])) << simd_name(level) << " k=" << k << " block " << i;
    }
  }
}

TEST(QuantizeAct, Q8_0RecipeOnKnownValues) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;  // amax 127: id = 1, q = round-half-even(x)
  x[1] = 2.5f;
  x[2] = -3.5f;
  x[3] = std::numeric_limits<float>::quiet_NaN();
  std::vector<int8_t> q(32);
  float d;
  int32_t s;
  quantize_q8_0_rows(x.data(), 1, 32, q.data(), &d, &s, SimdLevel::scalar);
  EXPECT_EQ(d, 1.0f);
  EXPECT_EQ(q[0], 127);
  EXPECT_EQ(q[1], 2);
  EXPECT_EQ(q[2], -4);
  EXPECT_EQ(q[3], 0);
  EXPECT_EQ(s, 127 + 2 - 4);
}

TEST(QuantizeAct, Q8_KEveryPathGivesTheScalarBits) {
  for (int64_t k : {256, 4864}) {
    const int64_t n = 5, nb = k / 256;
    std::vector<float> x = rows_with_edges(n, k, uint32_t(k) + 1);
    std::fill(x.begin() + k, x.begin() + k + 256, 0.0f);  // a whole zero super-block
    std::vector<int8_t> q0(size_t(n * k));
    std::vector<float> d0(size_t(n * nb));
    std::vector<int16_t> b0(size_t(n * k / 16));
    quantize_q8_k_rows(x.data(), n, k, q0.data(), d0.data(), b0.data(), SimdLevel::scalar);
    for (SimdLevel level : test::simd_levels_under_test()) {
      std::vector<int8_t> q(q0.size(), 99);
      std::vector<float> d(d0.size(), 99.0f);
      std::vector<int16_t> bs(b0.size(), 99);
      quantize_q8_k_rows(x.data(), n, k, q.data(), d.data(), bs.data(), level);
      EXPECT_EQ(q, q0) << simd_name(level) << " k=" << k;
      EXPECT_EQ(bs, b0) << simd_name(level) << " k=" << k;
      for (size_t i = 0; i < d.size(); ++i)
        ASSERT_EQ(bits(d[i]), bits(d0[i])) << simd_name(level) << " k=" << k << " block " << i;
    }
  }
}

TEST(QuantizeAct, Q8_KTakesTheFirstLargestMagnitudeWithItsSign) {
  std::vector<float> x(256, 1.0f);
  x[10] = -8.0f;  // first of the two largest magnitudes: max = -8, iscale = 127 / 8
  x[20] = 8.0f;
  std::vector<int8_t> q(256);
  float d;
  std::vector<int16_t> bs(16);
  for (SimdLevel level : test::simd_levels_under_test()) {
    quantize_q8_k_rows(x.data(), 1, 256, q.data(), &d, bs.data(), level);
    EXPECT_EQ(d, 1.0f / (-127.0f / -8.0f)) << simd_name(level);
    EXPECT_EQ(q[10], -127) << simd_name(level);
    EXPECT_EQ(q[20], 127) << simd_name(level);
  }
}

}  // namespace
}  // namespace ember
