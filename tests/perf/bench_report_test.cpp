// perf/bench_report.h without an engine: a record built by hand goes through each of
// llama-bench's layouts (the CLI test tests/model/bench_cli_test.cpp runs the real thing).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "perf/bench_report.h"
#include "support/test_support.h"

namespace ember::perf {
namespace {

BenchRecord record() {
  BenchRecord r;
  r.model = {"m.gguf", "llama 1M Q8_0", 2u << 20, 1000000};
  r.test.n_prompt = 4;
  r.test.threads = 2;
  r.simd = "avx2";
  r.test_time = "2026-12-04T19:00:00Z";
  r.samples_ns = {1000000, 3000000};  // 4 tokens in 1 ms and 3 ms: 4000 and 1333.3 tok/s
  return r;
}

TEST(BenchReport, StatisticsOfTheSamples) {
  const BenchRecord r = record();
  EXPECT_EQ(r.avg_ns(), 2000000u);
  EXPECT_DOUBLE_EQ(r.samples_ts()[0], 4000.0);
  EXPECT_NEAR(r.avg_ts(), (4000.0 + 4000.0 / 3) / 2, 1e-9);
  EXPECT_GT(r.stddev_ts(), 0);
  BenchRecord one = r;
  one.samples_ns = {1000000};
  EXPECT_EQ(one.stddev_ts(), 0);
}

TEST(BenchReport, JsonCarriesEveryFieldAndTheSamples) {
  const std::string text = bench_header(BenchFormat::json) + bench_record(BenchFormat::json, record(), true) +
                           bench_footer(BenchFormat::json);
  const nlohmann::json j = nlohmann::json::parse(text);
  ASSERT_EQ(j.size(), 1u);
  for (const std::string& f : bench_fields()) EXPECT_TRUE(j[0].contains(f)) << f;
  EXPECT_EQ(j[0]["n_prompt"], 4);
  EXPECT_EQ(j[0]["simd"], "avx2");
  EXPECT_EQ(j[0]["samples_ns"].size(), 2u);
  const nlohmann::json l = nlohmann::json::parse(bench_record(BenchFormat::jsonl, record(), true));
  EXPECT_EQ(l["model_type"], "llama 1M Q8_0");
}

TEST(BenchReport, CsvAndMarkdownShapes) {
  const std::string header = bench_header(BenchFormat::csv);
  EXPECT_EQ(std::count(header.begin(), header.end(), ','), std::ptrdiff_t(bench_fields().size() - 1));
  const std::string md = bench_record(BenchFormat::md, record(), true);
  EXPECT_NE(md.find(" pp4 |"), std::string::npos) << md;  // right-aligned, as llama-bench
  EXPECT_NE(md.find("2.00 MiB"), std::string::npos) << md;
  EXPECT_NE(test::error_of([] { parse_bench_format("xml"); }).find("-o: expected md, csv, json, jsonl or sql"),
            std::string::npos);
}

TEST(BenchReport, CpuInfoIsOneLine) {
  const std::string cpu = bench_cpu_info();
  EXPECT_FALSE(cpu.empty());
  EXPECT_EQ(cpu.find('\n'), std::string::npos);
}

}  // namespace
}  // namespace ember::perf
