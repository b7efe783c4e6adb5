// `ember bench`: llama-bench's CSV and JSON layouts with its column names (structure, not
// speed), the Markdown table's test names, and refusals by flag.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/cli_run.h"

namespace ember {
namespace {

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

}  // namespace
}  // namespace ember
