// `ember kv compare` / `kv perturb` through the CLI on hand-built snapshot directories (no
// model): exit codes, refusals naming the coordinate, receipts, outputs.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "analysis/compare_load.h"
#include "kv/kv_test_util.h"
#include "support/cli_run.h"
#include "support/test_support.h"
#include "util/atomic_file.h"
#include "util/sha256.h"

namespace ember::analysis {
namespace {

using nlohmann::json;

using test::CliRun;
using test::parse_report;
using test::q;
using test::run_ember;

// Writes a snapshot (geometry 3 layers x 2 KV heads x 8 dim x P positions) and returns its dir.
std::string write(const kv::VerifiedState& s, const std::string& tag) {
  const std::string dir = test::temp_dir("cmp-cli") + "/" + tag;
  kv::write_state_dir(s, dir, false);
  return dir;
}
std::string write(kv::KvState s, const std::string& tag) { return write(kv::seal(std::move(s), tag), tag); }

TEST(CompareCli, SelfComparisonPassesWithZeroDifferences) {
  const std::string a = write(test::make_snapshot(3, 2, 8, 5, 1), "a");
  const std::string b = write(test::make_snapshot(3, 2, 8, 5, 1), "b");
  CliRun r = run_ember("kv compare --json --r2 --max-abs 0 --min-cosine 1 --max-mse 0 --min-r2 1 " + q(a) +
                       " " + q(b));
  ASSERT_EQ(r.rc, 0) << r.out;
  const json rep = parse_report(r);
  EXPECT_EQ(rep["result"], "pass");
  EXPECT_TRUE(rep["summary"]["identical"].get<bool>());
  EXPECT_EQ(rep["heads"].size(), 6u);
  EXPECT_EQ(rep["left"]["snapshot_id"], rep["right"]["snapshot_id"]);
  EXPECT_EQ(rep["left"]["kind"], "native");
  EXPECT_TRUE(rep["diagnostics"].is_null());
  // The table is the default and says the same.
  r = run_ember("kv compare " + q(a) + " " + q(b));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("K/V identical"), std::string::npos) << r.out;
  // Same bytes for any thread count (a count above the cores present is clamped, with a
  // notice on stderr that is not part of the report).
  auto report_at = [&](int threads) {
    std::string out = run_ember("kv compare --json --r2 " + q(a) + " " + q(b) + " --threads " +
                                std::to_string(threads)).out;
    if (out.rfind("ember: --threads ", 0) == 0) out.erase(0, out.find('\n') + 1);
    return out;
  };
  EXPECT_EQ(report_at(1), report_at(3));
}

TEST(CompareCli, RefusesMisalignedStatesNamingTheCoordinate) {
  const kv::VerifiedState base = test::make_snapshot(3, 2, 8, 5, 1);
  const std::string a = write(base, "a");
  auto refused = [&](kv::KvState other, const std::string& coordinate) {
    const CliRun r = run_ember("kv compare " + q(a) + " " + q(write(std::move(other), "x")));
    EXPECT_EQ(r.rc, 2) << r.out;
    EXPECT_NE(r.out.find("coordinate " + coordinate), std::string::npos) << r.out;
  };
  refused(test::make_state(4, 2, 8, 5, 1), "geometry.layers");
  refused(test::make_state(3, 2, 16, 5, 1), "geometry.head_dim");
  refused(test::make_state(3, 2, 8, 6, 1), "positions");
  {
    kv::KvState s = test::make_state(3, 2, 8, 5, 1);
    s.manifest.prefix.tokens[2] = (s.manifest.prefix.tokens[2] + 1) % 512;
    refused(std::move(s), "prefix_tokens[2]");
  }
  {
    kv::KvState s = test::make_state(3, 2, 8, 5, 1);
    s.manifest.tokenizer.identity = std::string(64, 'e');
    refused(std::move(s), "tokenizer");
  }
  {
    kv::KvState s = test::make_state(3, 2, 8, 5, 1);
    s.manifest.rope.theta = 10000.0f;
    refused(std::move(s), "representation.rope.theta");
  }
  {
    kv::KvState s = test::make_state(3, 2, 8, 5, 1);
    s.manifest.rope.layout = "normal";
    refused(std::move(s), "representation.rope.layout");
  }
}

TEST(CompareCli, AnotherModelOfTheSameShapeIsComparedAndLabelled) {
  const kv::KvState base = test::make_state(3, 2, 8, 5, 1);
  kv::KvState other = test::make_state(3, 2, 8, 5, 2);  // other contents and model
  other.manifest.prefix = base.manifest.prefix;
  other.manifest.model.architecture = base.manifest.model.architecture;
  other.manifest.numerics.engine_fingerprint = "canonical-v1;weights=F32;test";
  const std::string right = write(std::move(other), "b");
  const CliRun r = run_ember("kv compare --json --r2 " + q(write(test::make_snapshot(3, 2, 8, 5, 1), "a")) + " " +
                             q(right));
  ASSERT_EQ(r.rc, 0) << r.out;
  const json rep = parse_report(r);
  EXPECT_TRUE(rep["crossing"]["crosses_models"].get<bool>());
  EXPECT_EQ(rep["crossing"]["label"], "quantization-boundary");
  EXPECT_EQ(rep["left"]["model_identity"], base.manifest.model.identity);
  EXPECT_EQ(rep["right"]["model_identity"], test::make_state(3, 2, 8, 5, 2).manifest.model.identity);
  EXPECT_EQ(rep["right"]["weights"], "F32");
  EXPECT_FALSE(rep["summary"]["identical"].get<bool>());
}

TEST(CompareCli, PerturbWritesOnlyAReceiptThatCompareAppliesToItsSource) {
  const kv::VerifiedState base = test::make_snapshot(3, 2, 8, 5, 1);
  const std::string a = write(base, "a");
  const std::string rdir = test::temp_dir("receipts");
  const std::string receipt = rdir + "/zero.json";
  CliRun p = run_ember("kv perturb --snapshot " + q(a) + " --layer 1 --head 1 --part kv --zero --receipt " +
                       q(receipt));
  ASSERT_EQ(p.rc, 0) << p.out;
  size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(rdir)) entries += e.is_regular_file() ? 1 : 100;
  EXPECT_EQ(entries, 1u);  // the receipt and nothing else
  const json rec = json::parse(read_file(receipt));
  EXPECT_EQ(rec["source"]["snapshot_id"], compared_from_state(kv::open_state(a)).identity.snapshot_id);
  // The receipt's keys_sha256 is the SHA-256 of the K rows as keys.f16le holds them (a version 2
  // manifest's payload.keys.sha256 is over its block digests instead).
  EXPECT_EQ(rec["source"]["keys_sha256"], sha256_file_hex(a + "/keys.f16le"));
  EXPECT_EQ(rec["affected_elements"]["k"], 40);

  CliRun r = run_ember("kv compare --json --max-abs 0 " + q(a) + " " + q(a) + " --perturb " + q(receipt));
  EXPECT_EQ(r.rc, 1) << r.out;
  const json rep = parse_report(r);
  EXPECT_EQ(rep["right"]["kind"], "perturbed");
  EXPECT_TRUE(rep["right"]["snapshot_id"].is_null());
  EXPECT_EQ(rep["perturbation"]["receipt_sha256"], sha256_hex(read_file(receipt)));
  EXPECT_EQ(rep["first_exceedance"]["layer"], 1);
  EXPECT_EQ(rep["first_exceedance"]["head"], 1);
  for (const json& h : rep["heads"]) {
    const bool hit = h["layer"] == 1 && h["head"] == 1;
    EXPECT_EQ(h["k"]["mismatches"].get<int>() > 0, hit) << h.dump();
    EXPECT_EQ(h["v"]["mismatches"].get<int>() > 0, hit) << h.dump();
  }
  // Not a snapshot: verify refuses it; and it applies to its source only.
  EXPECT_NE(run_ember("kv verify " + q(receipt)).rc, 0);
  const std::string other = write(test::make_snapshot(3, 2, 8, 5, 7), "other");
  r = run_ember("kv compare " + q(other) + " " + q(other) + " --perturb " + q(receipt));
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("perturbation receipt: source.snapshot_id"), std::string::npos) << r.out;
  // A receipt whose claims do not hold on its source, or that is not canonical, is refused.
  auto refused_edit = [&](const std::string& from, const std::string& to) {
    std::string text = read_file(receipt);
    ASSERT_NE(text.find(from), std::string::npos) << from;
    text.replace(text.find(from), from.size(), to);
    const std::string edited = rdir + "/edited-" + std::to_string(text.size()) + ".json";
    write_file_atomic(edited, text, true);
    const CliRun e = run_ember("kv compare " + q(a) + " " + q(a) + " --perturb " + q(edited));
    EXPECT_EQ(e.rc, 2) << e.out;
  };
  refused_edit("\"changed_elements\": {\n    \"k\": 40", "\"changed_elements\": {\n    \"k\": 39");
  refused_edit("\"writes_cache\": false", "\"writes_cache\":  false");
  refused_edit("\"part\": \"kv\"", "\"part\": \"k\"");
}

TEST(CompareCli, ScaleOneIsBitExactAndFlagsAreChecked) {
  const std::string a = write(test::make_snapshot(3, 2, 8, 5, 1), "a");
  const std::string dir = test::temp_dir("receipts");
  ASSERT_EQ(run_ember("kv perturb --snapshot " + q(a) + " --layer 0 --head 0 --part kv --scale 1.0 --receipt " +
                      q(dir + "/one.json")).rc, 0);
  const CliRun r = run_ember("kv compare --json --max-abs 0 " + q(a) + " " + q(a) + " --perturb " +
                             q(dir + "/one.json"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(parse_report(r)["summary"]["identical"].get<bool>());
  EXPECT_EQ(run_ember("kv perturb --snapshot " + q(a) + " --layer 0 --head 0 --part kv --scale 1.0 --receipt " +
                      q(dir + "/one.json")).rc, 2);  // exists, no --force
  EXPECT_EQ(run_ember("kv perturb --snapshot " + q(a) + " --layer 0 --head 0 --part kv --zero --scale 2 "
                      "--receipt " + q(dir + "/two.json")).rc, 2);
  EXPECT_EQ(run_ember("kv perturb --snapshot " + q(a) + " --layer 0 --head 0 --part kv --receipt " +
                      q(dir + "/two.json")).rc, 2);
  EXPECT_EQ(run_ember("kv perturb --snapshot " + q(a) + " --layer 3 --head 0 --part kv --zero --receipt " +
                      q(dir + "/two.json")).rc, 2);
  EXPECT_EQ(run_ember("kv perturb --snapshot " + q(a) + " --layer 0 --head 0 --part q --zero --receipt " +
                      q(dir + "/two.json")).rc, 2);
  EXPECT_FALSE(path_exists(dir + "/two.json"));
  EXPECT_EQ(run_ember("kv compare " + q(a) + " " + q(a) + " --min-cosine 2").rc, 2);
}

TEST(CompareCli, WritesJsonAndHtmlFilesWithoutOverwriting) {
  const std::string a = write(test::make_snapshot(3, 2, 8, 5, 1), "a");
  const std::string b = write(test::make_snapshot(3, 2, 8, 5, 1), "b");
  const std::string dir = test::temp_dir("outputs");
  ASSERT_EQ(run_ember("kv compare " + q(a) + " " + q(b) + " --json-out " + q(dir + "/r.json") +
                      " --html " + q(dir + "/r.html")).rc, 0);
  EXPECT_EQ(json::parse(read_file(dir + "/r.json"))["result"], "pass");
  std::string out;
  ASSERT_EQ(test::run_command("/usr/bin/python3 " + std::string(EMBER_SOURCE_DIR) +
                                  "/tests/analysis/report_html_check.py " + q(dir + "/r.html"), &out), 0);
  const json c = json::parse(out);
  EXPECT_TRUE(c["problems"].empty()) << out;
  EXPECT_EQ(c["unique_cells"]["k.cosine"], 6);
  test::expect_report_stamp(read_file(dir + "/r.html"), {a, b});
  EXPECT_EQ(run_ember("kv compare " + q(a) + " " + q(b) + " --html " + q(dir + "/r.html")).rc, 2);
  EXPECT_EQ(run_ember("kv compare " + q(a) + " " + q(b) + " --html " + q(dir + "/r.html") + " --force").rc, 0);
}

}  // namespace
}  // namespace ember::analysis
