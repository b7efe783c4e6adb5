// Canonical compare reports: same inputs give the same bytes, checked against golden files.
// To regenerate after an intended schema change: EMBER_UPDATE_GOLDEN=1 ember_kv_tests, then
// review the diff of tests/golden/ like any other change.
#include <gtest/gtest.h>

#include <cstdlib>

#include "analysis/compare.h"
#include "analysis/compare_fixtures.h"
#include "support/test_support.h"
#include "util/atomic_file.h"
#include "util/f16.h"
#include "util/thread_pool.h"

namespace ember::analysis {
namespace {

using testing::copy_state;
using testing::synthetic_state;

void check_golden(const std::string& name, const std::string& actual) {
  const std::string path = std::string(EMBER_SOURCE_DIR) + "/tests/golden/" + name;
  if (const char* u = std::getenv("EMBER_UPDATE_GOLDEN"); u && std::string(u) == "1") {
    write_file_atomic(path, actual, true);
  }
  ASSERT_TRUE(path_exists(path)) << "missing golden file " << path;
  const std::string golden = read_file(path);
  if (golden == actual) return;
  // Name the first differing line rather than dumping both documents.
  size_t line = 1, i = 0;
  while (i < golden.size() && i < actual.size() && golden[i] == actual[i]) line += golden[i++] == '\n';
  const auto line_at = [&](const std::string& s) {
    const size_t b = s.rfind('\n', i == 0 ? 0 : i - 1);
    const size_t start = b == std::string::npos ? 0 : b + 1;
    return s.substr(start, s.find('\n', start) - start);
  };
  ADD_FAILURE() << "report differs from " << path << " at line " << line << "\n  golden: "
                << line_at(golden) << "\n  actual: " << line_at(actual);
}

CompareReport self_report(ThreadPool* pool) {
  const ComparedState a = synthetic_state(2, 2, 4, 3, 1);
  CompareOptions o;
  o.r2 = true;
  o.thresholds.max_abs = 0.0;
  o.thresholds.min_cosine = 0.999;
  return compare_states(a, a, o, pool);
}

TEST(ReportGolden, SelfComparison) {
  const std::string doc = report_json(self_report(nullptr));
  check_golden("compare_self.json", doc);
  ThreadPool pool(3);
  EXPECT_EQ(report_json(self_report(&pool)), doc);  // thread count changes no byte
  EXPECT_EQ(doc.find("time"), std::string::npos);
  EXPECT_EQ(doc.find("host"), std::string::npos);
  EXPECT_EQ(doc.find("pid"), std::string::npos);
}

TEST(ReportGolden, ZeroedHeadWithThresholds) {
  const ComparedState src = synthetic_state(2, 2, 4, 3, 1);
  PerturbSpec s;
  s.layer = 1;
  s.head = 0;
  s.part = PerturbPart::kv;
  s.zero = true;
  const PerturbedState p = apply_perturbation(copy_state(src), make_receipt(src, s));
  CompareOptions o;
  o.r2 = true;
  o.thresholds.max_abs = 0.001;
  o.thresholds.min_cosine = 0.999;
  o.thresholds.max_mse = 1e-6;
  o.thresholds.min_r2 = 0.99;
  const CompareReport rep = compare_states(src, p, o);
  EXPECT_FALSE(rep.pass());
  ASSERT_FALSE(rep.failures.empty());
  EXPECT_EQ(rep.failures.front().layer, 1);
  EXPECT_EQ(rep.failures.front().head, 0);
  for (const Failure& f : rep.failures) EXPECT_TRUE(f.layer == 1 && f.head == 0);
  check_golden("compare_zeroed_head.json", report_json(rep));
}

TEST(ReportGolden, QuantizationBoundaryWithR2) {
  const ComparedState a = synthetic_state(2, 1, 4, 3, 1, "model-a", "F32");
  ComparedState b = copy_state(a);
  b.identity = synthetic_state(2, 1, 4, 3, 2, "model-b", "Q8_0").identity;
  // RIGHT = LEFT plus a small fixed pattern of f16 steps, as a quantized model would give.
  for (size_t i = 0; i < b.cache.k.size(); i += 3) {
    b.cache.k[i] = f32_to_f16(f16_to_f32(b.cache.k[i]) * 1.01f);
    b.cache.v[i] = f32_to_f16(f16_to_f32(b.cache.v[i]) * 0.98f);
  }
  CompareOptions o;
  o.r2 = true;
  o.thresholds.min_cosine = 0.9999;
  const CompareReport rep = compare_states(a, b, o);
  EXPECT_TRUE(rep.crossing.crosses_models);
  check_golden("compare_quantization_boundary.json", report_json(rep));
}

TEST(ReportTable, SaysWhatDiffers) {
  const CompareReport rep = self_report(nullptr);
  const std::string t = report_table(rep);
  EXPECT_NE(t.find("K/V identical"), std::string::npos) << t;
  EXPECT_NE(t.find("PASS"), std::string::npos);
  EXPECT_NE(t.find("same model"), std::string::npos);
}

}  // namespace
}  // namespace ember::analysis
