// The recompute-anchor study at reduced size: its JSON and table, through the library and
// through the CLI.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "map/study_anchor.h"
#include "support/test_support.h"
#include "util/atomic_file.h"

namespace ember::map {
namespace {

TEST(AnchorStudy, ReducedSizeReportsEveryMethodAndTheHybridIsExact) {
  AnchorStudyOptions o;
  o.seeds = 2;
  o.fit_prompts = 32;
  o.eval_prompts = 6;
  o.work_dir = test::temp_dir("anchor-study");
  const AnchorStudyResult r = run_anchor_study(o);
  const nlohmann::json j = r.to_json();
  ASSERT_TRUE(j.contains("methods"));
  for (const char* m : kAnchorMethods) {
    ASSERT_TRUE(j["methods"].contains(m)) << m;
    EXPECT_EQ(j["methods"][m]["comparisons"].get<int>(), 12) << m;
    EXPECT_TRUE(j["methods"][m].contains("agreement"));
    EXPECT_TRUE(j["methods"][m].contains("mean_rel_logit_error"));
  }
  // The hybrid recomputes from the exact shared boundary: same bits as the full prefill.
  EXPECT_EQ(j["methods"]["hybrid"]["agreement"].get<double>(), 1.0);
  EXPECT_EQ(j["methods"]["hybrid"]["mean_rel_logit_error"].get<double>(), 0.0);
  // Reusing the source's changed layers unmapped is visibly wrong.
  EXPECT_GT(j["methods"]["identity"]["mean_rel_logit_error"].get<double>(), 1e-3);
  ASSERT_EQ(j["per_seed"].size(), 2u);
  EXPECT_EQ(j["per_seed"][0]["shared_layers"].get<int>(), 1);
  EXPECT_NE(j["per_seed"][0]["mapper_hashes"]["affine"], j["per_seed"][1]["mapper_hashes"]["affine"]);
  const std::string table = r.table();
  for (const char* m : kAnchorMethods) EXPECT_NE(table.find(m), std::string::npos);
  // Deterministic: the same options give the same report.
  o.work_dir = test::temp_dir("anchor-study-2");
  EXPECT_EQ(run_anchor_study(o).to_json().dump(), j.dump());
}

TEST(AnchorStudy, CliWritesTableAndJson) {
  const std::string dir = test::temp_dir("anchor-cli");
  std::string out;
  const int rc = test::run_command(test::ember_binary() +
                                       " study recompute-anchor --seeds 1 --fit-prompts 16 "
                                       "--eval-prompts 4 --json-out " + dir + "/r.json",
                                   &out);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("hybrid"), std::string::npos) << out;
  const auto j = nlohmann::json::parse(read_file(dir + "/r.json"));
  EXPECT_EQ(j["methods"]["hybrid"]["comparisons"].get<int>(), 4);
  // Never overwrites without --force.
  EXPECT_NE(test::run_command(test::ember_binary() + " study recompute-anchor --seeds 1 --fit-prompts 16 "
                                                     "--eval-prompts 4 --json-out " + dir + "/r.json", &out), 0);
}

}  // namespace
}  // namespace ember::map
