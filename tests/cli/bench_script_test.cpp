// scripts/bench.sh, which `make bench` runs (issue 32): it must run what CMake builds, where
// CMake puts it (BUILD/bench/bench_*), and fail when it found nothing to run.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/test_support.h"

namespace ember::cli {
namespace {

const std::string kScript = std::string(EMBER_SOURCE_DIR) + "/scripts/bench.sh";

// A stand-in benchmark that leaves a mark, so the test does not time real kernels.
void fake_bench(const std::string& path, const std::string& mark) {
  std::ofstream(path) << "#!/bin/sh\necho ran > " << mark << "\n";
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
}

// Checked failing before the fix: the script globbed BUILD/bench_* and exited 0 having run
// neither benchmark.
TEST(BenchScript, RunsEveryBenchmarkUnderBuildBench) {
  const std::string build = test::temp_dir("bench_sh");
  std::filesystem::create_directories(build + "/bench");
  fake_bench(build + "/bench/bench_a", build + "/a.ran");
  fake_bench(build + "/bench/bench_b", build + "/b.ran");
  std::string out;
  EXPECT_EQ(test::run_command("bash " + kScript + " " + build, &out), 0) << out;
  EXPECT_TRUE(std::filesystem::exists(build + "/a.ran")) << out;
  EXPECT_TRUE(std::filesystem::exists(build + "/b.ran")) << out;
  EXPECT_NE(out.find("2 benchmarks ran"), std::string::npos) << out;
}

TEST(BenchScript, FailsWhenNoneRan) {
  const std::string build = test::temp_dir("bench_sh_empty");
  std::string out;
  EXPECT_NE(test::run_command("bash " + kScript + " " + build, &out), 0) << out;
  EXPECT_NE(out.find("found none"), std::string::npos) << out;
}

TEST(BenchScript, FailsWhenABenchmarkFails) {
  const std::string build = test::temp_dir("bench_sh_fail");
  std::filesystem::create_directories(build + "/bench");
  std::ofstream(build + "/bench/bench_bad") << "#!/bin/sh\nexit 3\n";
  std::filesystem::permissions(build + "/bench/bench_bad", std::filesystem::perms::owner_all);
  EXPECT_NE(test::run_command("bash " + kScript + " " + build), 0);
}

}  // namespace
}  // namespace ember::cli
