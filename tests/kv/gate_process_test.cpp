// kv::run_gate_processes (kv/gate_process.h), the library behind `ember kv validate-replay`:
// the three command lines, a pass on a real model with the built ember binary, a failed process
// recorded in the receipt, and the refusals before anything runs. The CLI's own cases (chat
// prompts, the SIMD matrix, kill -9) are replay_gate_cli_test.cpp's.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "kv/gate_process.h"
#include "support/test_support.h"
#include "util/atomic_file.h"

namespace ember::kv {
namespace {

bool has_pair(const std::vector<std::string>& argv, const std::string& flag, const std::string& value) {
  for (size_t i = 0; i + 1 < argv.size(); ++i)
    if (argv[i] == flag && argv[i + 1] == value) return true;
  return false;
}

GatePlan plan_in(const std::string& out) {
  GatePlan p;
  p.executable = test::ember_binary();
  p.model = test::shared_path("models/stories260K.gguf");
  p.prompt = "Once upon a time";
  p.prompt_flags = {"--prompt", p.prompt};
  p.out = out;
  p.n = 4;
  return p;
}

TEST(GateProcess, ThreeCommandLinesWithTheirOwnThreadsAndPaths) {
  GatePlan p = plan_in("/tmp/x");
  p.arch = "llama";
  p.threads = 2;
  p.replay_threads = 3;
  p.export_simd = "scalar";
  const std::vector<GateStep> s = gate_steps(p);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].role, "native");
  EXPECT_TRUE(has_pair(s[0].argv, "--dump-logits", "/tmp/x/native.f32"));
  EXPECT_TRUE(has_pair(s[0].argv, "-n", "4"));
  EXPECT_TRUE(has_pair(s[0].argv, "--threads", "2"));
  EXPECT_FALSE(has_pair(s[0].argv, "--arch", "llama"));  // `ember run` has no --arch
  EXPECT_EQ(s[1].simd, "scalar");
  EXPECT_TRUE(has_pair(s[1].argv, "--output", "/tmp/x/snapshot"));
  EXPECT_TRUE(has_pair(s[1].argv, "--prompt", "Once upon a time"));
  EXPECT_TRUE(has_pair(s[1].argv, "--arch", "llama"));
  EXPECT_EQ(s[2].threads, 3);
  EXPECT_TRUE(has_pair(s[2].argv, "-n", "3"));  // n - 1 rows after the boundary
  EXPECT_TRUE(has_pair(s[2].argv, "--threads", "3"));
  EXPECT_TRUE(has_pair(s[2].argv, "--logits-out", "/tmp/x/replay.f32"));
}

TEST(GateProcess, PassesOnARealModelAndWritesTheReceipt) {
  const std::string out = test::temp_dir("gate-pass") + "/run";
  const GateOutcome g = run_gate_processes(plan_in(out));
  EXPECT_TRUE(g.pass) << g.summary;
  EXPECT_EQ(g.summary.rfind("pass: native[4,", 0), 0u) << g.summary;
  const nlohmann::json r = nlohmann::json::parse(read_file(g.receipt_path));
  EXPECT_EQ(r["kind"], "ember.replay-gate");
  EXPECT_EQ(r["processes"].size(), 3u);
  EXPECT_EQ(r["processes"][2]["exit_code"], 0);
  EXPECT_EQ(r["files"]["replay"]["rows"], 3);
}

TEST(GateProcess, AFailedProcessStopsTheGateAndIsRecorded) {
  const std::string out = test::temp_dir("gate-fail") + "/run";
  GatePlan p = plan_in(out);
  p.executable = "/bin/false";
  const GateOutcome g = run_gate_processes(p);
  EXPECT_FALSE(g.pass);
  EXPECT_EQ(g.summary.rfind("error: native process exited with 1", 0), 0u) << g.summary;
  const nlohmann::json r = nlohmann::json::parse(read_file(g.receipt_path));
  EXPECT_EQ(r["result"], "error");
  EXPECT_EQ(r["processes"][0]["exit_code"], 1);
  EXPECT_EQ(r["processes"][1]["exit_code"], -1);  // never ran
}

TEST(GateProcess, RefusesBeforeRunning) {
  const std::string out = test::temp_dir("gate-refuse");
  GatePlan p = plan_in(out);
  p.n = 1;
  EXPECT_NE(test::error_of([&] { run_gate_processes(p); }).find("-n: expected >= 2"), std::string::npos);
  write_file_atomic(out + "/left-over", "x", true);
  p.n = 4;
  EXPECT_NE(test::error_of([&] { run_gate_processes(p); }).find("not empty"), std::string::npos);
}

// Issue 32: a SIMD path no x86 build has was passed to the replay's process, which refused it
// after the run and the export had taken their time, and the gate reported a failed check.
// /bin/false as the executable: had a process been started, the outcome would be an error
// summary instead of an Error, and `out` would hold logs.
TEST(GateProcess, RefusesAnUnknownSimdPathBeforeRunning) {
  const std::string out = test::temp_dir("gate-simd") + "/run";
  GatePlan p = plan_in(out);
  p.executable = "/bin/false";
  p.replay_simd = "neon";
  EXPECT_EQ(test::error_of([&] { run_gate_processes(p); }),
            "validate-replay: --replay-simd: expected scalar, avx2, avxvnni, avxvnni-evex, avx512 or avx512vnni, found 'neon'");
  EXPECT_FALSE(std::filesystem::exists(out));
  p.replay_simd = "";
  p.native_simd = "AVX2";
  EXPECT_NE(test::error_of([&] { run_gate_processes(p); }).find("--native-simd"), std::string::npos);
}

}  // namespace
}  // namespace ember::kv
