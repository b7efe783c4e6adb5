// llama.cpp's command-line habits on every command (issue 32): -m/-p/-f/-t short flags, "-"
// for standard input, `kv replay SNAPSHOT` positional; and the store's first-hour edges: a
// state too short to be a prefix hit says so, a name comes back by name with --model, times
// print as ISO-8601.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "support/cli_run.h"

namespace ember::test::llamacpp_habits_test {
namespace {

const std::string kModel = "models/stories260K.gguf";

std::string quiet_run(const std::string& args) {
  const CliRun r = run_ember(args + " 2>/dev/null");
  EXPECT_EQ(r.rc, 0) << args << "\n" << r.out;
  return r.out;
}

TEST(LlamaCppHabits, ShortFlagsMeanTheLongOnes) {
  const std::string m = q(shared_path(kModel));
  const std::string long_form = quiet_run("run --model " + m + " --prompt 'Once upon a time' -n 12 --threads 2 --quiet");
  const std::string short_form = quiet_run("run -m " + m + " -p 'Once upon a time' -n 12 -t 2 --quiet");
  EXPECT_FALSE(long_form.empty());
  EXPECT_EQ(short_form, long_form);
}

TEST(LlamaCppHabits, DashReadsThePromptFileFromStandardInput) {
  const std::string m = q(shared_path(kModel));
  const std::string dir = temp_dir("habits-stdin");
  std::ofstream(dir + "/p.txt") << "Once upon a time";
  const std::string from_file = quiet_run("run -m " + m + " -f " + q(dir + "/p.txt") + " -n 12 --quiet");
  const std::string from_stdin = quiet_run("run -m " + m + " -f - -n 12 --quiet < " + q(dir + "/p.txt"));
  EXPECT_FALSE(from_file.empty());
  EXPECT_EQ(from_stdin, from_file);
}

TEST(LlamaCppHabits, KvReplayTakesTheSnapshotPositionally) {
  const std::string m = q(shared_path(kModel));
  const std::string dir = temp_dir("habits-replay");
  quiet_run("kv export -m " + m + " -p 'Once upon a time' -o " + q(dir + "/snap"));
  const std::string by_flag = quiet_run("kv replay --snapshot " + q(dir + "/snap") + " -m " + m + " -n 8");
  const std::string positional = quiet_run("kv replay " + q(dir + "/snap") + " -m " + m + " -n 8");
  EXPECT_FALSE(by_flag.empty());
  EXPECT_EQ(positional, by_flag);
}

TEST(StoreFirstHour, ShortStateSaysItCanNeverBeAPrefixHitAndComesBackByName) {
  const std::string m = q(shared_path(kModel));
  const std::string dir = temp_dir("habits-store");
  quiet_run("kv export -m " + m + " -p 'Once upon a time' -o " + q(dir + "/snap"));  // 5 positions
  const CliRun put = run_ember("store put " + q("dir:" + dir + "/store") + " " + q(dir + "/snap") + " --name intro");
  ASSERT_EQ(put.rc, 0) << put.out;
  EXPECT_NE(put.out.find("shorter than one 16-token prefix block"), std::string::npos) << put.out;

  // A bare NAME without --model is refused naming the forms it takes; with --model it resolves.
  const CliRun bare = run_ember("store get " + q("dir:" + dir + "/store") + " intro -o " + q(dir + "/got"));
  EXPECT_EQ(bare.rc, 2) << bare.out;
  EXPECT_NE(bare.out.find("NAME with --model"), std::string::npos) << bare.out;
  const CliRun named =
      run_ember("store get " + q("dir:" + dir + "/store") + " intro -m " + m + " -o " + q(dir + "/got"));
  ASSERT_EQ(named.rc, 0) << named.out;
  EXPECT_EQ(read_bytes(dir + "/got/keys.f16le"), read_bytes(dir + "/snap/keys.f16le"));

  const CliRun ls = run_ember("store ls " + q("dir:" + dir + "/store"));
  ASSERT_EQ(ls.rc, 0) << ls.out;
  EXPECT_TRUE(std::regex_search(ls.out, std::regex("stored_at 20[0-9]{2}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-5][0-9]Z")))
      << ls.out;
}

TEST(MachineReadable, KvExportJsonNamesWhatKvVerifyJsonChecks) {
  const std::string m = q(shared_path(kModel));
  const std::string dir = temp_dir("habits-json");
  const CliRun ex = run_ember("kv export -m " + m + " -p 'Once upon a time' -o " + q(dir + "/snap") + " --json");
  ASSERT_EQ(ex.rc, 0) << ex.out;
  const nlohmann::json e = parse_report(ex);
  const CliRun ve = run_ember("kv verify " + q(dir + "/snap") + " --json");
  ASSERT_EQ(ve.rc, 0) << ve.out;
  const nlohmann::json v = parse_report(ve);
  EXPECT_EQ(e["output"], dir + "/snap");
  EXPECT_EQ(e["positions"], 5);
  EXPECT_EQ(e["seal"].get<std::string>().size(), 64u);
  for (const char* key : {"seal", "positions", "resume", "model_identity", "prefix_sha256", "payload", "signer"})
    EXPECT_EQ(e[key], v[key]) << key;
}

}  // namespace
}  // namespace ember::test::llamacpp_habits_test
