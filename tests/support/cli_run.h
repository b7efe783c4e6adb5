#pragma once
// Running the `ember` binary from a test and reading what it printed, for the CLI tests that
// check exit codes and parse the JSON report a command prints.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "support/test_support.h"

namespace ember::test {

// One `ember ARGS` run: its exit status and its stdout and stderr together.
struct CliRun {
  int rc = -1;
  std::string out;
};

inline CliRun run_ember(const std::string& args) {
  CliRun r;
  r.rc = run_command(ember_binary() + " " + args, &r.out);
  return r;
}

// `s` single-quoted for the shell (test paths hold no quote).
inline std::string q(const std::string& s) { return "'" + s + "'"; }

// The JSON report on stdout; a failed check appends its one-line message (stderr) after it.
inline nlohmann::json parse_report(const CliRun& r) {
  const size_t b = r.out.find('{'), e = r.out.rfind('}');
  return nlohmann::json::parse(r.out.substr(b, e == std::string::npos ? e : e - b + 1));
}

// An HTML report names what it was made from, by which build and when (issue 32): one stamp
// paragraph holding every path in `inputs` and "made by ember V (build N, commit C) on DATE".
inline void expect_report_stamp(const std::string& html, const std::vector<std::string>& inputs) {
  std::smatch m;
  ASSERT_TRUE(std::regex_search(html, m, std::regex("<p class=\"stamp muted\">(.*)</p>"))) << html.substr(0, 2000);
  const std::string stamp = m[1];
  for (const std::string& path : inputs) EXPECT_NE(stamp.find("<code>" + path + "</code>"), std::string::npos) << stamp;
  EXPECT_TRUE(std::regex_search(stamp, std::regex("made by ember [0-9.]+ \\(build [0-9]+, commit ([0-9a-f]+|unknown)\\) "
                                                  "on [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$")))
      << stamp;
}

}  // namespace ember::test
