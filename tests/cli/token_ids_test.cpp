// The one token id list parser (src/cli/token_ids.h): the parser itself on each kind of bad
// input, then every command that takes ids through the `ember` binary, which must reject the
// same text with exit 2 and the same one-line message.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cli/token_ids.h"
#include "support/test_support.h"
#include "util/error.h"

namespace ember::cli {
namespace {

// The message of the Error that parse_token_ids throws, or "" when it accepts the text.
std::string rejection(const std::string& text) {
  try {
    parse_token_ids("--prompt-ids", text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TokenIds, ParsesACommaSeparatedList) {
  EXPECT_EQ(parse_token_ids("--prompt-ids", "1,403,407"), (std::vector<int32_t>{1, 403, 407}));
  EXPECT_EQ(parse_token_ids("--prompt-ids", "0"), (std::vector<int32_t>{0}));
  EXPECT_EQ(parse_token_ids("--prompt-ids", "007,10"), (std::vector<int32_t>{7, 10}));
  EXPECT_EQ(parse_token_ids("--prompt-ids", "2147483647"), (std::vector<int32_t>{INT32_MAX}));
}

TEST(TokenIds, RejectsEachKindOfBadListNamingOptionItemExpectedAndFound) {
  struct Case {
    std::string text, item, found;
  };
  const std::vector<Case> cases = {
      {"", "list", "found an empty list"},
      {"1,2,", "item 2", "found an empty item"},
      {",1", "item 0", "found an empty item"},
      {"1,,2", "item 1", "found an empty item"},
      {"1,x", "item 1", "found 'x'"},
      {"1, 2", "item 1", "found ' 2'"},
      {"+1", "item 0", "found '+1'"},
      {"-1", "item 0", "found '-1'"},
      {"3.5", "item 0", "found '3.5'"},
      {"2147483648", "item 0", "found '2147483648'"},
      {"5,99999999999999999999999", "item 1", "found '99999999999999999999999'"},
  };
  for (const Case& c : cases) {
    const std::string msg = rejection(c.text);
    ASSERT_FALSE(msg.empty()) << "accepted '" << c.text << "'";
    EXPECT_EQ(msg.rfind("--prompt-ids: " + c.item + ": expected ", 0), 0u) << msg;
    EXPECT_NE(msg.find(c.found), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  // Overflow and non-digits say which rule the item broke.
  EXPECT_NE(rejection("2147483648").find("at most 2147483647"), std::string::npos);
  EXPECT_NE(rejection("1,x").find("decimal digits"), std::string::npos);
  // A pasted megabyte stays a short line.
  const std::string huge(1 << 20, '9');
  EXPECT_LT(rejection(huge).size(), 200u);
}

// The line `ember: <option>: ...` of a command's output ("" if there is none).
std::string error_line(const std::string& out, const std::string& option) {
  const std::string head = "ember: " + option + ": ";
  const size_t b = out.find(head);
  if (b == std::string::npos) return "";
  return out.substr(b + 7, out.find('\n', b) - b - 7);
}

TEST(TokenIdsCli, RunExportAndDetokenizeRejectTheSameBadListWithExitTwo) {
  const std::string model = test::shared_path("models/stories260K.gguf");
  const std::string dir = test::temp_dir("token-ids");
  const std::string run = test::ember_binary() + " run --quiet --threads 1 -n 1 --model " + model;
  const std::string exp = test::ember_binary() + " kv export --threads 1 --model " + model;
  const std::string detok = test::ember_binary() + " detokenize --model " + model;
  std::string out;
  // The same valid list is accepted by all three.
  ASSERT_EQ(test::run_command(run + " --prompt-ids 1,403,407", &out), 0) << out;
  ASSERT_EQ(test::run_command(exp + " --prompt-ids 1,403,407 --output " + dir + "/ok", &out), 0) << out;
  ASSERT_EQ(test::run_command(detok + " --ids 1,403,407", &out), 0) << out;
  EXPECT_EQ(out, "Once upon");
  int n = 0;
  for (const std::string bad : {"1,403,", "", "1,,403", "1,x", "2147483648"}) {
    SCOPED_TRACE("'" + bad + "'");
    const std::string ids = " '" + bad + "'";
    std::string run_out, exp_out, detok_out;
    EXPECT_EQ(test::run_command(run + " --prompt-ids" + ids, &run_out), 2) << run_out;
    EXPECT_EQ(test::run_command(exp + " --prompt-ids" + ids + " --output " + dir + "/bad" + std::to_string(n++),
                                &exp_out), 2) << exp_out;
    EXPECT_EQ(test::run_command(detok + " --ids" + ids, &detok_out), 2) << detok_out;
    const std::string line = error_line(run_out, "--prompt-ids");
    EXPECT_NE(line.find("expected"), std::string::npos) << run_out;
    EXPECT_EQ(error_line(exp_out, "--prompt-ids"), line) << exp_out;
    // detokenize names its own option; the rest of the line is the same.
    EXPECT_EQ(error_line(detok_out, "--ids"), "--ids" + line.substr(std::string("--prompt-ids").size()))
        << detok_out;
  }
}

}  // namespace
}  // namespace ember::cli
