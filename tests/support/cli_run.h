#pragma once
// Running the `ember` binary from a test and reading what it printed, for the CLI tests that
// check exit codes and parse the JSON report a command prints.
#include <nlohmann/json.hpp>
#include <string>

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

}  // namespace ember::test
