// llama-bench's value syntax for `ember bench` (perf/bench_flags.h), issue 32: ranges were
// refused ("-p 64-256+64"), and -pg did not exist.
#include <gtest/gtest.h>

#include "perf/bench_flags.h"
#include "support/test_support.h"

namespace ember::perf {
namespace {

using V = std::vector<int>;

TEST(BenchFlags, ListsAndRangesAsLlamaBench) {
  EXPECT_EQ(parse_bench_counts("512", "-p"), V({512}));
  EXPECT_EQ(parse_bench_counts("4,6,4", "-p"), V({4, 6, 4}));  // duplicates kept
  EXPECT_EQ(parse_bench_counts("64-256+64", "-p"), V({64, 128, 192, 256}));
  EXPECT_EQ(parse_bench_counts("64-250+64", "-p"), V({64, 128, 192}));
  EXPECT_EQ(parse_bench_counts("1-16*2", "-t"), V({1, 2, 4, 8, 16}));
  EXPECT_EQ(parse_bench_counts("3-5", "-n"), V({3, 4, 5}));
  EXPECT_EQ(parse_bench_counts("0,8-16+8", "-d"), V({0, 8, 16}));
}

TEST(BenchFlags, RefusesWhatLlamaBenchWouldMisread) {
  for (const char* bad : {"", "a", "-1", "4-2", "1-4+0", "1-4*1", "1-", "1,,2", "1-4/2", "4+4", "99999999999"}) {
    SCOPED_TRACE(bad);
    EXPECT_NE(test::error_of([&] { parse_bench_counts(bad, "-p"); })
                  .find("bench: -p: expected N, FIRST-LAST, FIRST-LAST+STEP or FIRST-LAST*FACTOR"),
              std::string::npos);
  }
  EXPECT_NE(test::error_of([] { parse_bench_counts("1-100000", "-n"); }).find("at most 4096 counts"),
            std::string::npos);
}

TEST(BenchFlags, PromptThenGeneration) {
  EXPECT_EQ(parse_bench_pg("64,16"), std::make_pair(64, 16));
  EXPECT_EQ(parse_bench_pg("0,16"), std::make_pair(0, 16));
  for (const char* bad : {"64", "0,0", "64,16,2", "64;16", "-1,4"}) {
    SCOPED_TRACE(bad);
    EXPECT_NE(test::error_of([&] { parse_bench_pg(bad); }).find("bench: -pg: expected PP,TG"), std::string::npos);
  }
}

}  // namespace
}  // namespace ember::perf
