// KL divergence of two logit rows, against cases computed by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "util/kl.h"

namespace ember {
namespace {

// target logits (0, log 3): p = (1/4, 3/4); other logits (0, 0): q = (1/2, 1/2).
// KL(p || q) = 1/4 log(1/2) + 3/4 log(3/2) = 0.13081204...
TEST(Kl, TwoTokenCaseByHand) {
  const float t[2] = {0.0f, float(std::log(3.0))};
  const float o[2] = {0.0f, 0.0f};
  const double want = 0.25 * std::log(0.5) + 0.75 * std::log(1.5);
  EXPECT_NEAR(want, 0.1308120359, 1e-9);
  // log 3 rounds to f32; the f64 computation keeps that rounding (|error| ~ 1e-8).
  EXPECT_NEAR(*kl_divergence(t, o, 2), want, 2e-8);
  // Not symmetric: KL(q || p) = 1/2 log 2 + 1/2 log(2/3) = 0.1438410...
  EXPECT_NEAR(*kl_divergence(o, t, 2), 0.5 * std::log(2.0) + 0.5 * std::log(2.0 / 3.0), 2e-8);
}

TEST(Kl, IdenticalAndShiftedRowsAreZero) {
  const float a[4] = {1.5f, -2.0f, 0.25f, 3.0f};
  const float b[4] = {11.5f, 8.0f, 10.25f, 13.0f};  // a + 10: the same distribution
  EXPECT_EQ(*kl_divergence(a, a, 4), 0.0);
  EXPECT_NEAR(*kl_divergence(a, b, 4), 0.0, 1e-15);
}

TEST(Kl, LargeLogitsDoNotOverflowAndNonFiniteIsAbsent) {
  const float a[2] = {1000.0f, 0.0f};  // p = (1, e^-1000 -> 0)
  const float b[2] = {0.0f, 0.0f};
  EXPECT_NEAR(*kl_divergence(a, b, 2), std::log(2.0), 1e-12);
  const float n[2] = {std::numeric_limits<float>::quiet_NaN(), 0.0f};
  EXPECT_FALSE(kl_divergence(n, b, 2).has_value());
  EXPECT_FALSE(kl_divergence(b, n, 2).has_value());
}

}  // namespace
}  // namespace ember
