// Foreign is foreign on every importer and in every container: a cache another runtime wrote as
// safetensors (here ember's own rows, exported and re-imported, so any difference would be the
// label's alone) is an ember.kv-foreign state, refused by `kv replay` without --allow-foreign,
// replayed with it, labelled cross-engine by `kv compare`; packed as a .kvc it keeps its kind
// and replays with --allow-foreign too.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/cli_run.h"
#include "support/test_support.h"

namespace ember::test {
namespace {

TEST(ForeignKinds, SafetensorsImportIsForeignInReplayCompareAndKvc) {
  const std::string model = shared_path("models/stories260K.gguf");
  const std::string dir = temp_dir("foreign-kinds");
  const std::string snap = dir + "/snap", st = dir + "/c.safetensors", f = dir + "/f";
  const std::string ids = "1,403,407,261,378,267,301";
  ASSERT_EQ(run_ember("kv export --model " + q(model) + " --prompt-ids " + ids + " --output " + q(snap)).rc, 0);
  ASSERT_EQ(run_ember("kv export-safetensors " + q(snap) + " --output " + q(st)).rc, 0);
  CliRun r = run_ember("kv import-safetensors " + q(st) + " --model " + q(model) + " --engine torch --prompt-ids " +
                       ids + " --output " + q(f));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("computed by torch: a foreign state"), std::string::npos) << r.out;
  const std::vector<uint8_t> text = read_bytes(f + "/manifest.json");
  const nlohmann::json m = nlohmann::json::parse(std::string(text.begin(), text.end()));
  EXPECT_EQ(m["format"], "ember.kv-foreign");
  EXPECT_EQ(m["numerics"]["contract"], "foreign");
  EXPECT_EQ(m["foreign"]["engine"], "torch");
  EXPECT_EQ(m["foreign"]["format"], "safetensors-mlx");
  EXPECT_EQ(m["foreign"]["conversion"], "exact");

  // kv replay: refused by kind without the flag (before any decode), continued with it.
  r = run_ember("kv replay --snapshot " + q(f) + " --model " + q(model) + " -n 3");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("ember.kv-foreign"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--allow-foreign"), std::string::npos) << r.out;
  r = run_ember("kv replay --allow-foreign --snapshot " + q(f) + " --model " + q(model) + " -n 3 --ignore-eos");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("engine torch"), std::string::npos) << r.out;

  // kv compare: the pair crosses engines even on the same model and identical K/V.
  r = run_ember("kv compare --json " + q(snap) + " " + q(f));
  ASSERT_EQ(r.rc, 0) << r.out;
  const nlohmann::json c = parse_report(r);
  EXPECT_EQ(c["right"]["kind"], "foreign");
  EXPECT_TRUE(c["crossing"]["crosses_engines"].get<bool>());
  EXPECT_EQ(c["crossing"]["label"], "cross-engine");

  // A foreign .kvc keeps its kind, and replays with --allow-foreign like the directory.
  ASSERT_EQ(run_ember("kvc pack " + q(f) + " " + q(f + ".kvc")).rc, 0);
  r = run_ember("kv replay --snapshot " + q(f + ".kvc") + " --model " + q(model) + " -n 3");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("found \"foreign\""), std::string::npos) << r.out;
  r = run_ember("kv replay --allow-foreign --snapshot " + q(f + ".kvc") + " --model " + q(model) + " -n 3");
  EXPECT_EQ(r.rc, 0) << r.out;
}

}  // namespace
}  // namespace ember::test
