// The K/V metric core of `kv compare`: definitions, direction of R², exactness, thread
// independence, thresholds and the failure order.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "analysis/compare_fixtures.h"
#include "analysis/compare_metrics.h"
#include "analysis/compare_thresholds.h"
#include "util/f16.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace ember::analysis {
namespace {

std::vector<uint16_t> halves(std::initializer_list<float> xs) {
  std::vector<uint16_t> out;
  for (float x : xs) out.push_back(f32_to_f16(x));
  return out;
}

TEST(CompareMetrics, F16ValueIsExactForEveryFiniteHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    if ((h & 0x7c00u) == 0x7c00u) continue;  // Inf/NaN: never used
    const double want = double(f16_to_f32(uint16_t(h)));
    const double got = f16_value(uint16_t(h));
    ASSERT_EQ(std::memcmp(&want, &got, sizeof want), 0) << "half bits " << h;
  }
}

TEST(CompareMetrics, SelfComparisonIsExact) {
  const model::KvCache c = testing::synthetic_cache(3, 2, 8, 5, 1);
  const KvMetrics m = compare_caches(c, c, true);
  ASSERT_EQ(m.heads.size(), 6u);
  EXPECT_TRUE(m.identical());
  for (const HeadMetrics& h : m.heads) {
    for (const PartMetrics* p : {&h.k, &h.v}) {
      EXPECT_EQ(p->elements, 40u);
      EXPECT_EQ(p->mismatches, 0u);
      ASSERT_TRUE(p->cosine && p->mse && p->r2 && p->max_abs);
      EXPECT_EQ(*p->cosine, 1.0);  // exactly
      EXPECT_EQ(*p->mse, 0.0);
      EXPECT_EQ(*p->r2, 1.0);
      EXPECT_EQ(*p->max_abs, 0.0);
    }
  }
}

TEST(CompareMetrics, OrthogonalVectors) {
  const auto l = halves({1, 0}), r = halves({0, 1});
  const PartMetrics m = part_metrics(l.data(), r.data(), 2, false);
  EXPECT_EQ(*m.cosine, 0.0);
  EXPECT_EQ(*m.mse, 1.0);
  EXPECT_EQ(*m.max_abs, 1.0);
  EXPECT_EQ(m.mismatches, 2u);
  EXPECT_FALSE(m.r2.has_value());  // not requested
}

TEST(CompareMetrics, R2IsRightExplainedByLeftAndNotSymmetric) {
  // RIGHT = 2 * LEFT. SS(R-L) = 1+4+9+16 = 30; SS(R - mean R) = 9+1+1+9 = 20: 1 - 30/20.
  const auto a = halves({1, 2, 3, 4}), b = halves({2, 4, 6, 8});
  EXPECT_DOUBLE_EQ(*part_metrics(a.data(), b.data(), 4, true).r2, -0.5);
  // Swapped: SS(R - mean R) over {1,2,3,4} = 5, so 1 - 30/5.
  EXPECT_DOUBLE_EQ(*part_metrics(b.data(), a.data(), 4, true).r2, -5.0);
  // Cosine is symmetric and scale-free: 1 for parallel vectors.
  EXPECT_NEAR(*part_metrics(a.data(), b.data(), 4, false).cosine, 1.0, 1e-15);
}

TEST(CompareMetrics, R2UndefinedForConstantRightThatDiffers) {
  const auto a = halves({1, 2}), z = halves({0, 0});
  const PartMetrics m = part_metrics(a.data(), z.data(), 2, true);
  EXPECT_FALSE(m.r2.has_value());
  EXPECT_EQ(*m.cosine, 0.0);  // one side is zero
  const PartMetrics both_zero = part_metrics(z.data(), z.data(), 2, true);
  EXPECT_EQ(*both_zero.cosine, 1.0);
  EXPECT_EQ(*both_zero.r2, 1.0);
}

TEST(CompareMetrics, SignedZeroIsABitMismatchButNoError) {
  const std::vector<uint16_t> a{0x0000, 0x3c00}, b{0x8000, 0x3c00};
  const PartMetrics m = part_metrics(a.data(), b.data(), 2, false);
  EXPECT_EQ(m.mismatches, 1u);
  EXPECT_EQ(*m.mse, 0.0);
  EXPECT_EQ(*m.max_abs, 0.0);
}

TEST(CompareMetrics, NonFiniteElementsLeaveMetricsAbsent) {
  const std::vector<uint16_t> a{0x3c00, 0x7e00}, b{0x3c00, 0x3c00};
  const PartMetrics m = part_metrics(a.data(), b.data(), 2, true);
  EXPECT_EQ(m.non_finite, 1u);
  EXPECT_FALSE(m.cosine || m.mse || m.r2 || m.max_abs);
  Thresholds t;
  t.max_abs = 1.0;
  KvMetrics km;
  km.n_layers = 1;
  km.n_kv_heads = 1;
  km.heads.push_back(HeadMetrics{m, m});
  const auto f = find_failures(km, t);
  ASSERT_EQ(f.size(), 2u);  // an absent value never passes
  EXPECT_FALSE(f[0].value.has_value());
}

TEST(CompareMetrics, MseAndMaxAbsExactForSmallDifferences) {
  // One element differs by one f16 ulp at 1.0 (2^-10): MSE = 2^-20 / n exactly.
  const model::KvCache a = testing::synthetic_cache(1, 1, 4, 4, 3);
  model::KvCache b = a.copy();
  b.k_row(0, 0, 2)[1] = a.k_row(0, 0, 2)[1] ^ 1u;  // one ulp away (same sign, same binade)
  const KvMetrics m = compare_caches(a, b, false);
  const double ulp = std::fabs(double(f16_to_f32(b.k_row(0, 0, 2)[1])) -
                               double(f16_to_f32(a.k_row(0, 0, 2)[1])));
  EXPECT_EQ(*m.at(0, 0).k.max_abs, ulp);
  EXPECT_EQ(*m.at(0, 0).k.mse, ulp * ulp / 16.0);
  EXPECT_EQ(m.at(0, 0).k.mismatches, 1u);
  EXPECT_EQ(m.at(0, 0).v.mismatches, 0u);
}

TEST(CompareMetrics, IndependentOfThreadCount) {
  const model::KvCache a = testing::synthetic_cache(4, 3, 16, 9, 5);
  const model::KvCache b = testing::synthetic_cache(4, 3, 16, 9, 6);
  const KvMetrics one = compare_caches(a, b, true);
  for (int threads : {2, 3, 5}) {
    ThreadPool pool(threads);
    const KvMetrics many = compare_caches(a, b, true, &pool);
    ASSERT_EQ(many.heads.size(), one.heads.size());
    for (size_t i = 0; i < one.heads.size(); ++i) {
      for (int part = 0; part < 2; ++part) {
        const PartMetrics& x = part ? one.heads[i].v : one.heads[i].k;
        const PartMetrics& y = part ? many.heads[i].v : many.heads[i].k;
        for (auto [p, q] : {std::pair{x.cosine, y.cosine}, {x.mse, y.mse}, {x.r2, y.r2},
                            {x.max_abs, y.max_abs}}) {
          ASSERT_TRUE(p && q);
          EXPECT_EQ(std::memcmp(&*p, &*q, sizeof(double)), 0) << "task " << i;
        }
      }
    }
  }
}

TEST(CompareMetrics, ALocalEditIsLocalized) {
  const model::KvCache a = testing::synthetic_cache(3, 4, 8, 6, 9);
  model::KvCache b = a.copy();
  b.v_row(2, 3, 4)[5] = f32_to_f16(f16_to_f32(b.v_row(2, 3, 4)[5]) + 1.0f);
  const KvMetrics m = compare_caches(a, b, false);
  for (int l = 0; l < 3; ++l) {
    for (int h = 0; h < 4; ++h) {
      const bool hit = l == 2 && h == 3;
      EXPECT_EQ(m.at(l, h).v.mismatches, hit ? 1u : 0u);
      EXPECT_EQ(m.at(l, h).k.mismatches, 0u);
    }
  }
}

TEST(CompareThresholds, FailuresAreLayerMajorInFixedMetricOrder) {
  const model::KvCache a = testing::synthetic_cache(2, 2, 8, 4, 11);
  const model::KvCache b = testing::synthetic_cache(2, 2, 8, 4, 12);  // differs everywhere
  Thresholds t;
  t.max_abs = 0.0;
  t.min_cosine = 0.999;
  const std::vector<Failure> f = find_failures(compare_caches(a, b, false), t);
  ASSERT_EQ(f.size(), 16u);  // 2 layers x 2 heads x 2 parts x 2 metrics
  EXPECT_EQ(f[0].layer, 0);
  EXPECT_EQ(f[0].head, 0);
  EXPECT_EQ(f[0].part, KvPart::k);
  EXPECT_EQ(f[0].metric, "cosine");
  EXPECT_EQ(f[1].metric, "max_abs");
  EXPECT_EQ(f[2].part, KvPart::v);
  EXPECT_EQ(f[4].head, 1);
  EXPECT_EQ(f[8].layer, 1);
  for (size_t i = 1; i < f.size(); ++i) {
    const auto key = [](const Failure& x) { return x.layer * 100 + x.head * 10 + int(x.part); };
    EXPECT_LE(key(f[i - 1]), key(f[i]));
  }
  EXPECT_EQ(f[0].threshold, 0.999);
}

TEST(CompareThresholds, PassWhenWithinAndRejectsNonsense) {
  const model::KvCache a = testing::synthetic_cache(2, 2, 8, 4, 11);
  Thresholds t;
  t.max_abs = 0.0;
  t.min_cosine = 1.0 - 1e-12;
  t.max_mse = 0.0;
  t.min_r2 = 1.0;
  EXPECT_TRUE(find_failures(compare_caches(a, a, true), t).empty());
  Thresholds bad;
  bad.min_cosine = 2.0;
  EXPECT_THROW(validate_thresholds(bad), Error);
  bad = Thresholds{};
  bad.max_abs = -1;
  EXPECT_THROW(validate_thresholds(bad), Error);
  bad = Thresholds{};
  bad.max_mse = std::nan("");
  EXPECT_THROW(validate_thresholds(bad), Error);
}

}  // namespace
}  // namespace ember::analysis
