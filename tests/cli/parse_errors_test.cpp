// What a mistyped command line prints (issue 32): "ember: " on every line, the closest command
// or flag when a typo explains the failure, `ember help CMD`, and exit 2 for bad usage.
// Checked failing before: `ember modle inspect x` said "A subcommand is required" without the
// prefix, `--jsn` and `--promt` named no alternative, and `ember help model` was refused.
#include <gtest/gtest.h>

#include <string>

#include "cli/parse_errors.h"
#include "support/test_support.h"

namespace ember::cli {
namespace {

// Runs `ember ARGS`; returns the exit status, and what it printed in `out`.
int ember(const std::string& args, std::string* out) {
  return test::run_command(test::ember_binary() + " " + args, out);
}

TEST(ParseErrors, ClosestNameIsAPlausibleTypoOrNothing) {
  const std::vector<std::string> commands{"model", "kv", "run", "bench"};
  EXPECT_EQ(closest_name("modle", commands), "model");   // a transposition is one edit
  EXPECT_EQ(closest_name("mdel", commands), "model");
  EXPECT_EQ(closest_name("kvv", commands), "kv");
  EXPECT_EQ(closest_name("zebra", commands), "");
  EXPECT_EQ(closest_name("x", commands), "");            // one letter is no evidence
  EXPECT_EQ(closest_name("--jsn", {"--json", "-j", "--help"}), "--json");
}

TEST(ParseErrors, UnknownCommandNamesTheClosest) {
  std::string out;
  EXPECT_EQ(ember("modle inspect x", &out), 2);
  EXPECT_EQ(out, "ember: unknown command 'modle'; did you mean 'model'?\n");
  EXPECT_EQ(ember("kv verfy x", &out), 2);
  EXPECT_EQ(out, "ember: unknown command 'verfy' for 'ember kv'; did you mean 'verify'?\n");
  EXPECT_EQ(ember("qqqqqq", &out), 2);
  EXPECT_EQ(out, "ember: unknown command 'qqqqqq'; see 'ember --help'\n");
}

TEST(ParseErrors, UnknownFlagNamesTheClosest) {
  std::string out;
  EXPECT_EQ(ember("model inspect x --jsn", &out), 2);
  EXPECT_EQ(out, "ember: unknown flag '--jsn' for 'ember model inspect'; did you mean '--json'?\n");
  // The typo, not the "--model is required" it causes, is what the user needs to hear.
  EXPECT_EQ(ember("run --promt hi", &out), 2);
  EXPECT_EQ(out, "ember: unknown flag '--promt' for 'ember run'; did you mean '--prompt'?\n");
  EXPECT_EQ(ember("run --promt=hi", &out), 2);
  EXPECT_NE(out.find("unknown flag '--promt' "), std::string::npos) << out;
}

TEST(ParseErrors, OtherParseErrorsArePrefixedAndExit2) {
  std::string out;
  EXPECT_EQ(ember("model inspect", &out), 2);
  EXPECT_EQ(out, "ember: FILE is required; see 'ember model inspect --help'\n");
  EXPECT_EQ(ember("model", &out), 2);
  EXPECT_EQ(out.rfind("ember: ", 0), 0u) << out;
}

TEST(ParseErrors, HelpCommand) {
  std::string help, direct;
  EXPECT_EQ(ember("help model inspect", &help), 0) << help;
  EXPECT_EQ(ember("model inspect --help", &direct), 0);
  EXPECT_EQ(help, direct);
  EXPECT_EQ(ember("help", &help), 0);
  EXPECT_NE(help.find("Subcommands:"), std::string::npos) << help;
  EXPECT_EQ(ember("help modl", &help), 2);
  EXPECT_EQ(help, "ember: unknown command 'modl'; did you mean 'model'?\n");
}

}  // namespace
}  // namespace ember::cli
