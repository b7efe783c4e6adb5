// `ember kv matrix` as users run it: a small matrix (stories260K + one tiny synthetic qwen2,
// English and Arabic, two thread/SIMD variants) in which every cell passes and the control is
// detected, its JSON fields and HTML; a corrupted model file reported as failing cells with a
// non-zero exit; refusals of a bad variant spec (by field) and of outputs that exist.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/cli_run.h"
#include "support/test_support.h"

namespace ember::test {
namespace {

namespace fs = std::filesystem;

std::string slurp(const std::string& path) {
  const std::vector<uint8_t> b = read_bytes(path);
  return std::string(b.begin(), b.end());
}

CliRun run_command_env(const std::string& env, const std::string& args) {
  CliRun r;
  r.rc = run_command(env + " " + ember_binary() + " " + args, &r.out);
  return r;
}

size_t count_of(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t i = s.find(what); i != std::string::npos; i = s.find(what, i + 1)) ++n;
  return n;
}

std::string prompts_file(const std::string& dir) {
  const std::string p = dir + "/prompts.jsonl";
  std::ofstream(p) << "{\"id\": \"english\", \"text\": \"Once upon a time, a little fox found a red ball.\"}\n"
                      "{\"id\": \"arabic\", \"text\": \"كان يا ما كان، في قديم الزمان\"}\n";
  return p;
}

std::string synth_qwen2(const std::string& dir) {
  const std::string out = dir + "/qwen2-q8_0.gguf";
  const CliRun r = run_ember("model synth --arch qwen2 --layers 2 --hidden 64 --heads 4 --kv-heads 2 --ffn 128 "
                             "--vocab 320 --qkv-bias --tied --type q8_0 --seed 5 -o " + out);
  EXPECT_EQ(r.rc, 0) << r.out;
  return out;
}

TEST(MatrixCli, SmallMatrixPassesWithJsonAndHtml) {
  const std::string dir = temp_dir("matrix-cli");
  const std::string stories = shared_path("models/stories260K.gguf");
  const std::string synth = synth_qwen2(dir);
  const CliRun r = run_ember("kv matrix --model " + stories + " --model " + synth + " --prompts " +
                             prompts_file(dir) + " --variants 't1;t2-1-2,simd=scalar/default/scalar' -n 4 -o " +
                             dir + "/out --keep --json-out " + dir + "/m.json --html " + dir + "/m.html");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("kv matrix: 8 passed, 0 failed, 0 errors, 0 skipped (8 cells = 2 models x 2 prompts x 2 "
                       "variants, N=4"),
            std::string::npos)
      << r.out;
  expect_report_stamp(slurp(dir + "/m.html"), {stories, synth, prompts_file(dir)});
  const nlohmann::json j = nlohmann::json::parse(slurp(dir + "/m.json"));
  EXPECT_EQ(j["kind"], "ember.kv-matrix");
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["steps"], 4);
  EXPECT_EQ(j["summary"]["cells"], 8);
  EXPECT_EQ(j["summary"]["ok"], true);
  ASSERT_EQ(j["variants"].size(), 2u);
  EXPECT_EQ(j["variants"][1]["threads"], nlohmann::json::parse("[2, 1, 2]"));
  EXPECT_EQ(j["variants"][1]["simd"], nlohmann::json::parse(R"(["scalar", "default", "scalar"])"));
  ASSERT_EQ(j["cells"].size(), 8u);
  for (const auto& c : j["cells"]) {
    EXPECT_EQ(c["status"], "pass") << c.dump();
    EXPECT_EQ(c["gate"]["pass"], true);
    EXPECT_EQ(c["gate"]["verdict"]["differing_values"], 0);
    EXPECT_EQ(c["gate"]["resume"]["position"], c["prompt_tokens"]);
    EXPECT_EQ(c["gate"]["native_first_token"], c["gate"]["resume"]["token"]);
    EXPECT_EQ(c["self_compare"]["exact"], true);
    EXPECT_EQ(c["self_compare"]["mismatches"], 0);
    EXPECT_EQ(c["control"]["detected"], true);
    EXPECT_EQ(c["control"]["compare"]["mismatches_elsewhere"], 0);
    EXPECT_GT(c["control"]["diagnostics"]["logits_max_abs_step0"].get<double>(), 0.0);
    for (const char* f : {"model", "model_name", "architecture", "weights", "model_identity", "prompt",
                          "prompt_tokens", "variant", "threads", "simd", "reason", "dir", "observed_seconds"})
      EXPECT_TRUE(c.contains(f)) << f;
    // --keep: the cell's snapshot, logits and control receipt stay.
    const std::string cell = c["dir"];
    EXPECT_TRUE(fs::exists(cell + "/snapshot/manifest.json")) << cell;
    EXPECT_EQ(fs::file_size(cell + "/native.f32"), size_t(4) * 4 * (c["architecture"] == "qwen2" ? 320 : 512));
    EXPECT_TRUE(fs::exists(cell + "/control-receipt.json"));
  }
  EXPECT_EQ(j["cells"][4]["architecture"], "qwen2");
  EXPECT_EQ(j["cells"][4]["weights"], "q8_0");
  EXPECT_EQ(j["cells"][2]["prompt"], "arabic");
  EXPECT_EQ(j["cells"][1]["simd"]["export"], j["cpu"]["default_simd"]);
  const std::string html = slurp(dir + "/m.html");
  EXPECT_NE(html.find("<h1>Exact-replay matrix</h1>"), std::string::npos);
  EXPECT_EQ(html.find("class=\"fail\""), std::string::npos);
  EXPECT_EQ(count_of(html, "<td class=\"pass\" title="), 8u);  // the grid: one coloured cell per cell
  std::string check;
  ASSERT_EQ(run_command("/usr/bin/python3 " + std::string(EMBER_SOURCE_DIR) + "/tests/analysis/report_html_check.py " +
                            q(dir + "/m.html"), &check), 0);
  EXPECT_EQ(nlohmann::json::parse(check)["problems"], nlohmann::json::array()) << check;  // balanced, no scripts
  // Nothing is overwritten without --force: the reports and the non-empty --output.
  const CliRun again = run_ember("kv matrix --model " + stories + " --prompts " + prompts_file(dir) +
                                 " --variants t1 -n 4 -o " + dir + "/out2 --json-out " + dir + "/m.json");
  EXPECT_EQ(again.rc, 2) << again.out;
  EXPECT_NE(again.out.find("m.json"), std::string::npos) << again.out;
  const CliRun reuse = run_ember("kv matrix --model " + stories + " --prompts " + prompts_file(dir) +
                                 " --variants t1 -n 4 -o " + dir + "/out");
  EXPECT_EQ(reuse.rc, 2) << reuse.out;
  EXPECT_NE(reuse.out.find("--output: expected a directory that does not exist or is empty (or --force)"),
            std::string::npos)
      << reuse.out;
}

TEST(MatrixCli, CorruptedModelFailsWithNonZeroExit) {
  const std::string dir = temp_dir("matrix-cli-bad");
  const std::string stories = shared_path("models/stories260K.gguf");
  // The model list file: the good model, then a truncated copy of it.
  const std::string bad = dir + "/truncated.gguf";
  {
    const std::string bytes = slurp(stories);
    std::ofstream(bad, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  }
  std::ofstream(dir + "/models.txt") << "# good, then truncated\n" << stories << "\n\ntruncated.gguf\n";
  const CliRun r = run_command_env("EMBER_PROGRESS=1", "kv matrix --models " + dir + "/models.txt --prompts " + prompts_file(dir) +
                             " --variants t1 -n 4 -o " + dir + "/out --json-out " + dir + "/m.json");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("kv matrix: 2 passed, 0 failed, 1 errors"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("error: truncated / * / *: " + bad), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 error cells (truncated/*/*)"), std::string::npos) << r.out;
  // EMBER_PROGRESS=1: the status line counts every cell, the failed model's included.
  EXPECT_NE(r.out.find("\rkv matrix  4/4 cells"), std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(slurp(dir + "/m.json"));
  EXPECT_EQ(j["summary"]["ok"], false);
  EXPECT_EQ(j["cells"][2]["status"], "error");
  EXPECT_TRUE(j["cells"][2]["gate"].is_null());
  // Without --keep the cells are gone.
  EXPECT_FALSE(fs::exists(dir + "/out/cells"));
}

TEST(MatrixCli, BadVariantSpecRefusedByField) {
  const std::string dir = temp_dir("matrix-cli-spec");
  const CliRun r = run_ember("kv matrix --model " + shared_path("models/stories260K.gguf") + " --prompts " +
                             prompts_file(dir) + " --variants 't1;simd=avx3' -n 4 -o " + dir + "/out");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("--variants: variant 2 simd: expected simd=P[/P[/P]]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("found 'simd=avx3'"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir + "/out"));  // refused before anything was created
}

}  // namespace
}  // namespace ember::test
