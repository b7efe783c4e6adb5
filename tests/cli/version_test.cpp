// `ember --version` names the binary exactly (issue 32): the commit and commit count it was
// built from and the SIMD path it runs on. Checked failing before: it printed "ember 0.1.0".
#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>
#include <string>

#include "support/test_support.h"
#include "util/build_info.h"

namespace ember::cli {
namespace {

TEST(Version, NamesTheCommitAndTheSimdPath) {
  std::string out;
  ASSERT_EQ(test::run_command(test::ember_binary() + " --version", &out), 0) << out;
  EXPECT_TRUE(std::regex_match(out, std::regex("ember [0-9.]+ \\(build [0-9]+, commit ([0-9a-f]{7,}|unknown)\\)\n"
                                               "simd: (scalar|avx2|avxvnni|avxvnni-evex|avx512|avx512vnni) \\(this CPU supports up to "
                                               "(scalar|avx2|avxvnni|avx512|avx512vnni)\\)\n")))
      << out;
  EXPECT_NE(out.find(std::string("commit ") + build_commit() + ")"), std::string::npos) << out;
  // The path in use, not only the best one: EMBER_SIMD forces it.
  ASSERT_EQ(test::run_command("EMBER_SIMD=scalar " + test::ember_binary() + " --version", &out), 0) << out;
  EXPECT_NE(out.find("\nsimd: scalar ("), std::string::npos) << out;
}

}  // namespace
}  // namespace ember::cli
