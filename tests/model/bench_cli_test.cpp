// `ember bench`: llama-bench's CSV and JSON layouts with its column names (structure, not
// speed), the Markdown table's test names, and refusals by flag.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "support/cli_run.h"
#include "util/atomic_file.h"

namespace ember {
namespace {

// `ember ARGS REDIRECTS` in a subshell, so that REDIRECTS (2>FILE, 2>/dev/null) decide where
// stderr goes; run_ember would send it to the output too.
test::CliRun run_redirected(const std::string& args, const std::string& redirects) {
  test::CliRun r;
  r.rc = test::run_command("(" + test::ember_binary() + " " + args + " " + redirects + ")", &r.out);
  return r;
}

std::string model_arg() { return " -m " + test::q(test::shared_path("models/stories260K.gguf")); }

// Splits one CSV line of quoted fields (llama-bench quotes every value, "" escapes ").
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') cur += '"', ++i;
      else if (c == '"') quoted = false;
      else cur += c;
    } else if (c == '"') quoted = true;
    else if (c == ',') out.push_back(cur), cur.clear();
    else cur += c;
  }
  out.push_back(cur);
  return out;
}

// The columns llama-bench and ember share, by llama-bench's names.
const std::vector<std::string> kShared = {
    "cpu_info", "backends", "model_filename", "model_type", "model_size", "model_n_params",
    "n_threads", "type_k", "type_v", "n_prompt", "n_gen", "n_depth", "test_time",
    "avg_ns", "stddev_ns", "avg_ts", "stddev_ts"};

TEST(BenchCli, CsvHasLlamaBenchColumnsAndOneRowPerTest) {
  const test::CliRun r = test::run_ember("bench" + model_arg() + " -p 4,6 -n 2 -t 1 -r 2 -o csv");
  ASSERT_EQ(r.rc, 0) << r.out;
  std::istringstream in(r.out);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 4u) << r.out;  // header, pp4, pp6, tg2
  const std::vector<std::string> header = csv_fields(lines[0]);
  for (const std::string& f : kShared)
    EXPECT_NE(std::find(header.begin(), header.end(), f), header.end()) << f;
  EXPECT_NE(std::find(header.begin(), header.end(), "simd"), header.end());
  auto col = [&](const std::vector<std::string>& row, const std::string& name) {
    return row.at(size_t(std::find(header.begin(), header.end(), name) - header.begin()));
  };
  const int expect[3][2] = {{4, 0}, {6, 0}, {0, 2}};
  for (int i = 0; i < 3; ++i) {
    const std::vector<std::string> row = csv_fields(lines[size_t(i + 1)]);
    ASSERT_EQ(row.size(), header.size()) << lines[size_t(i + 1)];
    EXPECT_EQ(col(row, "n_prompt"), std::to_string(expect[i][0]));
    EXPECT_EQ(col(row, "n_gen"), std::to_string(expect[i][1]));
    EXPECT_EQ(col(row, "n_threads"), "1");
    EXPECT_EQ(col(row, "n_depth"), "0");
    EXPECT_EQ(col(row, "model_type"), "llama 293K F32");
    EXPECT_EQ(col(row, "model_n_params"), "292800");
    EXPECT_GT(std::stod(col(row, "avg_ts")), 0.0);
    EXPECT_GT(std::stoull(col(row, "avg_ns")), 0u);
  }
}

TEST(BenchCli, JsonIsAnArrayOfTestObjectsWithSamples) {
  const test::CliRun r = test::run_ember("bench" + model_arg() + " -p 5 -n 3 -d 4 -t 1 -r 3 -o json");
  ASSERT_EQ(r.rc, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 2u);
  for (const nlohmann::json& t : j) {
    for (const std::string& f : kShared) EXPECT_TRUE(t.contains(f)) << f;
    EXPECT_TRUE(t["model_size"].is_number_unsigned());
    EXPECT_TRUE(t["avg_ts"].is_number());
    EXPECT_TRUE(t["model_filename"].is_string());
    EXPECT_EQ(t["n_depth"], 4);
    ASSERT_EQ(t["samples_ns"].size(), 3u);
    ASSERT_EQ(t["samples_ts"].size(), 3u);
  }
  EXPECT_EQ(j[0]["n_prompt"], 5);
  EXPECT_EQ(j[1]["n_gen"], 3);
  // JSONL: the same objects, one a line.
  const test::CliRun l = test::run_ember("bench" + model_arg() + " -p 5 -n 0 -t 1 -r 1 -o jsonl");
  ASSERT_EQ(l.rc, 0) << l.out;
  const nlohmann::json o = nlohmann::json::parse(l.out);
  EXPECT_EQ(o["n_prompt"], 5);
  EXPECT_EQ(o["samples_ns"].size(), 1u);
}

TEST(BenchCli, MarkdownNamesTestsAsLlamaBench) {
  const test::CliRun r = test::run_ember("bench" + model_arg() + " -p 4 -n 2 -d 3 -t 1 -r 1");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("| model "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("pp4 @ d3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tg2 @ d3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" \xc2\xb1 "), std::string::npos) << r.out;
  // llama-bench's last line, the build the numbers came from (issue 32).
  const size_t build = r.out.rfind("\nbuild: ");
  ASSERT_NE(build, std::string::npos) << r.out;
  EXPECT_TRUE(std::regex_match(r.out.substr(build), std::regex("\nbuild: ([0-9a-f]+|unknown) \\([0-9]+\\)\n"))) << r.out;
}

TEST(BenchCli, RefusesBadFlagsByName) {
  test::CliRun r = test::run_ember("bench" + model_arg() + " -p 4 -n 0 -o xml");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.out.find("-o"), std::string::npos) << r.out;
  r = test::run_ember("bench" + model_arg() + " -p 4 -n 0 -r 0");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.out.find("-r"), std::string::npos) << r.out;
  // stories260K's context is 128 positions.
  r = test::run_ember("bench" + model_arg() + " -p 100 -n 0 -d 100 -r 1 -t 1");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.out.find("positions"), std::string::npos) << r.out;
  r = test::run_ember("bench -m /nonexistent.gguf -p 4 -n 0");
  EXPECT_EQ(r.rc, 2);
}

// Issue 32: llama-bench's own command line runs as written. Checked failing before: -ngl 99
// was read as `-n gl,99`, -pg as `-p g,...`, -mmp 0 opened a model named "mp", and ranges,
// -fa, -b/-ub, -ctk/-ctv, --progress, -v and -o sql were refused.
TEST(BenchCli, LlamaBenchCommandLine) {
  const std::string err = test::temp_dir("bench-llama") + "/stderr";
  const test::CliRun r = run_redirected(
      "bench" + model_arg() + " -p 4-8+4 -n 2 -pg 4,2 -ngl 99 -fa 1 -mmp 0 -b 512 -ub 128 -ctk f16 -ctv f16 " +
      "--progress -v -t 1 -r 1 -o csv", "2>" + test::q(err));
  ASSERT_EQ(r.rc, 0) << r.out;
  std::istringstream in(r.out);  // stdout alone: stderr went to `err`
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 5u) << r.out;  // header, pp4, pp8, tg2, pp4+tg2
  const std::vector<std::string> header = csv_fields(lines[0]);
  ASSERT_GE(header.size(), 2u);
  EXPECT_EQ(header[0], "build_commit");  // llama-bench's first two columns
  EXPECT_EQ(header[1], "build_number");
  const std::vector<std::string> pg = csv_fields(lines[4]);
  const auto col = [&](const std::string& name) {
    return pg.at(size_t(std::find(header.begin(), header.end(), name) - header.begin()));
  };
  EXPECT_EQ(col("n_prompt"), "4");
  EXPECT_EQ(col("n_gen"), "2");
  EXPECT_FALSE(col("build_commit").empty());
  const std::string log = read_file(err);
  // One note naming the flags that do not apply, and a progress line per test.
  EXPECT_EQ(log.find("ember: note: ignored -ngl, -fa, -mmp, -b, -ub: "), 0u) << log;
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 5) << log;
  EXPECT_NE(log.find("test 4/4: pp4+tg2, threads 1"), std::string::npos) << log;
  // -fa as a bare flag (llama-cli's habit), and Markdown's name of a -pg test.
  const test::CliRun md = test::run_ember("bench" + model_arg() + " -p 0 -n 0 -pg 4,2 -fa -t 1 -r 1");
  ASSERT_EQ(md.rc, 0) << md.out;
  EXPECT_NE(md.out.find(" pp4+tg2 |"), std::string::npos) << md.out;
}

TEST(BenchCli, SqlIsATableAndAnInsertPerTest) {
  const test::CliRun r = run_redirected("bench" + model_arg() + " -p 4 -n 2 -t 1 -r 1 -o sql", "2>/dev/null");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(r.out.rfind("CREATE TABLE IF NOT EXISTS test (\n  build_commit TEXT,\n  build_number INTEGER,\n", 0), 0u)
      << r.out;
  EXPECT_NE(r.out.find("  avg_ts REAL,\n"), std::string::npos) << r.out;
  size_t inserts = 0;
  for (size_t at = r.out.find("INSERT INTO test ("); at != std::string::npos; at = r.out.find("INSERT INTO", at + 1))
    ++inserts;
  EXPECT_EQ(inserts, 2u) << r.out;
}

// A quantized KV cache type is refused naming what ember measures; and nothing reaches stdout
// before the first result, so an error leaves no header behind (it did: the Markdown or CSV
// header was printed before the model was opened and the tests checked).
TEST(BenchCli, RefusalsLeaveStdoutEmpty) {
  test::CliRun r = run_redirected("bench" + model_arg() + " -p 4 -n 0 -ctk q8_0", "2>&1 >/dev/null");
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.out.rfind("ember: bench: -ctk: expected f16 (ember times an f16 KV cache;", 0), 0u) << r.out;
  for (const std::string& args : {std::string(" -p 100 -n 0 -d 100 -o csv"), std::string(" -p 4 -o csv -ctv q4_0"),
                                   std::string(" -p 4 -o csv -m /nonexistent.gguf"), std::string(" -p 4-2 -o csv")}) {
    SCOPED_TRACE(args);
    r = run_redirected("bench" + model_arg() + args, "2>/dev/null");
    EXPECT_EQ(r.rc, 2);
    EXPECT_EQ(r.out, "");
  }
}

TEST(BenchCli, HelpNoLongerSaysThreadsDoNotMatter) {
  const test::CliRun r = test::run_ember("bench --help");
  ASSERT_EQ(r.rc, 0);
  EXPECT_EQ(r.out.find("do not depend"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("speed depends on it"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace ember
