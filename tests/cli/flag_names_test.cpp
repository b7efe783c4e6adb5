// One meaning per flag name on every command (issue 32; docs/cli-run.md, "One meaning per flag
// name"): `-m/--model`, `-o/--output PATH` (bench's `-o FORMAT` the one exception, as llama-bench has it),
// `--json` prints JSON on stdout and takes no value, `--json-out FILE` writes it, `--html FILE`
// writes an HTML report. The whole command tree is walked (cli/app.cpp), so a command added
// later is held to the same names. The renamed flags are then driven through the binary: the
// new spellings work, the old ones (`--json FILE`, `--out`, `--report`) are refused with one
// line naming the flag that replaced them and exit 2.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "support/cli_run.h"

namespace ember::test::flag_names_test {
namespace {

std::string read_file(const std::string& path) {
  const std::vector<uint8_t> b = read_bytes(path);
  return std::string(b.begin(), b.end());
}
bool path_exists(const std::string& path) { return std::filesystem::exists(path); }

struct Command {
  std::string path;  // "kv matrix"
  const CLI::App* app;
};

// Every command of the tree, parents included, in the order they were added.
std::vector<Command> all_commands(const CLI::App& root) {
  std::vector<Command> out;
  std::function<void(const CLI::App&, const std::string&)> walk = [&](const CLI::App& a, const std::string& path) {
    for (const CLI::App* sub : a.get_subcommands(std::function<bool(const CLI::App*)>{})) {
      const std::string p = path.empty() ? sub->get_name() : path + " " + sub->get_name();
      out.push_back({p, sub});
      walk(*sub, p);
    }
  };
  walk(root, "");
  return out;
}

bool has_name(const CLI::Option& o, const std::string& name) { return o.check_name(name); }
bool takes_value(const CLI::Option& o) { return o.get_items_expected_max() > 0; }

TEST(FlagNames, EveryCommandUsesOneMeaningPerName) {
  CLI::App app;
  cli::build_app(app);
  const std::vector<Command> commands = all_commands(app);
  ASSERT_GT(commands.size(), 40u);  // the walk reached the leaves (kv export, store get, ...)
  int outputs = 0, json_flags = 0, json_outs = 0, htmls = 0;
  for (const Command& c : commands) {
    for (const CLI::Option* o : c.app->get_options()) {
      const std::string where = "ember " + c.path + " " + o->get_name();
      const std::string help = o->get_description();
      if (has_name(*o, "--json")) {
        ++json_flags;
        EXPECT_FALSE(takes_value(*o)) << where << ": --json prints JSON on stdout; a file is --json-out FILE";
      }
      if (has_name(*o, "--json-out")) {
        ++json_outs;
        EXPECT_TRUE(takes_value(*o)) << where;
      }
      const bool short_o = has_name(*o, "-o"), long_output = has_name(*o, "--output");
      if (short_o || long_output) {
        EXPECT_TRUE(takes_value(*o)) << where;
        if (c.path == "bench") {
          // llama-bench's -o FORMAT, the one documented exception.
          EXPECT_NE(help.find("csv"), std::string::npos) << where << ": " << help;
        } else {
          ++outputs;
          EXPECT_TRUE(short_o && long_output) << where << ": a path output is -o,--output";
        }
      }
      // llama.cpp's -m: the model on every command that takes one (bench included).
      if (has_name(*o, "-m") || has_name(*o, "--model")) {
        EXPECT_TRUE(has_name(*o, "-m") && has_name(*o, "--model")) << where << ": a model is -m,--model";
      }
      for (const char* retired : {"--out", "--report"}) {
        EXPECT_FALSE(has_name(*o, retired)) << where << ": " << retired << " was renamed (-o/--output, --html)";
      }
      if (help.find("HTML") != std::string::npos && takes_value(*o)) {
        ++htmls;
        EXPECT_TRUE(has_name(*o, "--html")) << where << ": an HTML output is --html FILE (" << help << ")";
      }
    }
  }
  // The walk saw each kind it checks (a broken walk passes vacuously otherwise).
  EXPECT_GE(outputs, 15);
  EXPECT_GT(json_flags, 15);
  EXPECT_GE(json_outs, 6);
  EXPECT_GE(htmls, 4);
}

// The old spellings, each refused before anything runs, naming the flag that replaced it.
TEST(FlagNames, OldSpellingsAreRefusedNamingTheNewFlag) {
  const std::string m = q(shared_path("models/stories260K.gguf"));
  const std::string dir = temp_dir("flag-names-old");
  const std::string out = q(dir + "/out");
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"kv matrix -m " + m + " --prompts p.txt -n 3 -o " + out + " --json m.json",
       "kv matrix: --json takes no file here: write the report with --json-out FILE"},
      {"kv matrix -m " + m + " --prompts p.txt -n 3 -o " + out + " --json=m.json",
       "kv matrix: --json takes no file here: write the report with --json-out FILE"},
      {"kv matrix -m " + m + " --prompts p.txt -n 3 --out " + out, "kv matrix: --out is now -o/--output PATH"},
      {"kv validate-replay -m " + m + " -p hi -n 3 --out " + out, "kv validate-replay: --out is now -o/--output PATH"},
      {"kv compare a b --report r.html", "kv compare: --report is now --html FILE"},
      {"kv compare a b --json r.json", "kv compare: --json takes no file here: write the report with --json-out FILE"},
      {"study kv-quant -m " + m + " --prompts p.txt --json r.json",
       "study kv-quant: --json takes no file here: write the report with --json-out FILE"},
      {"study sweep --source " + m + " --target " + m + " --prompts p.txt --json r.json",
       "study sweep: --json takes no file here: write the report with --json-out FILE"},
      {"study recompute-anchor --json r.json",
       "study recompute-anchor: --json takes no file here: write the report with --json-out FILE"},
      {"map hybrid --source " + m + " --target " + m + " -p hi --json h.json",
       "map hybrid: --json is not a flag here: write the JSON report with --json-out FILE"},
  };
  for (const Case& c : cases) {
    const CliRun r = run_ember(c.args);
    EXPECT_EQ(r.rc, 2) << c.args << "\n" << r.out;
    EXPECT_EQ(r.out, "ember: " + c.message + "\n") << c.args;
  }
  EXPECT_FALSE(path_exists(dir + "/out"));
}

TEST(FlagNames, RenamedFlagsWork) {
  const std::string m = q(shared_path("models/stories260K.gguf"));
  const std::string dir = temp_dir("flag-names-new");
  // kv matrix: -o DIR, --json on stdout, --json-out FILE and --html FILE.
  std::ofstream(dir + "/p.txt") << "Once upon a time\n";
  const std::string matrix = "kv matrix -m " + m + " --prompts " + q(dir + "/p.txt") + " --variants t1 -n 3 --force -o " +
                             q(dir + "/cells");
  const CliRun table = run_ember(matrix + " --json-out " + q(dir + "/m.json") + " --html " + q(dir + "/m.html"));
  ASSERT_EQ(table.rc, 0) << table.out;
  EXPECT_NE(table.out.find("kv matrix: 1 passed"), std::string::npos) << table.out;
  const nlohmann::json written = nlohmann::json::parse(read_file(dir + "/m.json"));
  EXPECT_EQ(written["kind"], "ember.kv-matrix");
  EXPECT_NE(read_file(dir + "/m.html").find("<html"), std::string::npos);
  const CliRun printed = run_ember(matrix + " --json 2>/dev/null");
  ASSERT_EQ(printed.rc, 0) << printed.out;
  const nlohmann::json shown = nlohmann::json::parse(printed.out);
  EXPECT_EQ(shown["kind"], "ember.kv-matrix");
  EXPECT_EQ(shown["cells"].size(), written["cells"].size());

  // kv export, then kv compare's --html FILE.
  ASSERT_EQ(run_ember("kv export -m " + m + " -p 'Once upon a time' -o " + q(dir + "/snap") + " 2>/dev/null").rc, 0);
  const CliRun cmp = run_ember("kv compare " + q(dir + "/snap") + " " + q(dir + "/snap") + " --html " + q(dir + "/c.html"));
  ASSERT_EQ(cmp.rc, 0) << cmp.out;
  EXPECT_NE(read_file(dir + "/c.html").find("<html"), std::string::npos);

  // kv validate-replay -o DIR.
  const CliRun gate = run_ember("kv validate-replay -m " + m + " -p 'Once upon a time' -n 3 -t 1 -o " + q(dir + "/gate"));
  ASSERT_EQ(gate.rc, 0) << gate.out;
  EXPECT_TRUE(path_exists(dir + "/gate/receipt.json"));

  // study kv-quant --budget writes no study report: a report flag there is refused, not ignored.
  const CliRun budget = run_ember("study kv-quant -m " + m + " --prompts " + q(dir + "/p.txt") + " --budget 'kl<=0.1' --json");
  EXPECT_EQ(budget.rc, 2) << budget.out;
  EXPECT_EQ(budget.out, "ember: study kv-quant: --json: expected no --budget (a budget run prints its table and writes "
                        "--certificate), found --budget\n");
}

}  // namespace
}  // namespace ember::test::flag_names_test
