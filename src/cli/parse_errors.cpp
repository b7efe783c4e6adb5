#include "cli/parse_errors.h"

#include <algorithm>
#include <cstdio>

#include "util/error.h"
#include "util/printable.h"

namespace ember::cli {
namespace {

// Optimal string alignment distance: Levenshtein plus adjacent transpositions ("modle").
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

std::string strip_dashes(const std::string& s) { return s.substr(std::min(s.find_first_not_of('-'), s.size())); }

std::vector<std::string> command_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands(std::function<bool(const CLI::App*)>{}))
    if (!sub->get_name().empty()) names.push_back(sub->get_name());
  return names;
}

std::vector<std::string> flag_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* o : app.get_options()) {
    for (const std::string& n : o->get_lnames()) names.push_back("--" + n);
    for (const std::string& n : o->get_snames()) names.push_back("-" + n);
  }
  return names;
}

// "ember kv verify": the root's name is whatever argv[0] was.
std::string command_path(const CLI::App& app) {
  std::string path;
  for (const CLI::App* a = &app; a->get_parent() != nullptr; a = a->get_parent())
    path = " " + a->get_name() + path;
  return "ember" + path;
}

std::string unknown(const char* what, const std::string& typed, const std::vector<std::string>& candidates,
                    const std::string& where) {
  const std::string near = closest_name(typed, candidates);
  std::string msg = std::string("unknown ") + what + " '" + typed + "'";
  if (where != "ember") msg += " for '" + where + "'";
  if (!near.empty()) return msg + "; did you mean '" + near + "'?";
  return msg + "; see '" + where + " --help'";
}

const CLI::App* find_command(const CLI::App& app, const std::string& name) {
  for (const CLI::App* sub : app.get_subcommands(std::function<bool(const CLI::App*)>{}))
    if (sub->check_name(name)) return sub;
  return nullptr;
}

const CLI::App& deepest_parsed(const CLI::App& root) {
  const CLI::App* leaf = &root;
  while (!leaf->get_subcommands().empty()) leaf = leaf->get_subcommands().front();
  return *leaf;
}

// The message for an argument CLI11 could not place in the deepest command parsed, when a
// typo explains it; "" otherwise.
std::string typo_message(const CLI::App& root) {
  const CLI::App* leaf = &deepest_parsed(root);
  for (const std::string& arg : leaf->remaining()) {
    if (arg.size() > 1 && arg[0] == '-') {
      const std::string name = arg.substr(0, arg.find('='));
      return unknown("flag", name, flag_names(*leaf), command_path(*leaf));
    }
    // A word where a command was required: a mistyped command, not an extra argument.
    if (leaf->get_require_subcommand_min() > 0)
      return unknown("command", arg, command_names(*leaf), command_path(*leaf));
  }
  return "";
}

bool has_flag(const CLI::App& app, const std::string& name) { return app.get_option_no_throw(name) != nullptr; }

// Flags renamed so that a name means one thing on every command (docs/cli-run.md, "One meaning
// per flag name"): the old spelling, the option that replaced it, and how to write that one.
struct Renamed {
  const char* old_name;
  const char* new_name;
  const char* usage;
};
constexpr Renamed kRenamed[] = {{"--out", "--output", "-o/--output PATH"}, {"--report", "--html", "--html FILE"}};

// The message for an old spelling of a renamed flag in the deepest command parsed; "" when
// there is none. `args` is the command line as parsed. `--json FILE` was a report path on
// the commands that now write it with --json-out: the FILE is what CLI11 could not place (or
// it came as --json=FILE), since --json there is a flag or no flag at all.
std::string renamed_flag_message(const CLI::App& root, const std::vector<std::string>& args) {
  const CLI::App& leaf = deepest_parsed(root);
  if (&leaf == &root) return "";
  const std::string where = command_path(leaf).substr(std::string("ember ").size());
  const std::vector<std::string> extra = leaf.remaining();
  auto unplaced = [&](const std::string& a) { return std::find(extra.begin(), extra.end(), a) != extra.end(); };
  const bool json_flag = has_flag(leaf, "--json");
  if (has_flag(leaf, "--json-out"))
    for (size_t i = 1; i < args.size(); ++i) {
      if (args[i].rfind("--json=", 0) == 0 ||
          (args[i] == "--json" && json_flag && i + 1 < args.size() && args[i + 1][0] != '-' && unplaced(args[i + 1])))
        return where + ": --json takes no file here: write the report with --json-out FILE";
      if (args[i] == "--json" && !json_flag)
        return where + ": --json is not a flag here: write the JSON report with --json-out FILE";
    }
  for (const std::string& arg : extra) {
    const std::string name = arg.substr(0, arg.find('='));
    for (const Renamed& r : kRenamed)
      if (name == r.old_name && has_flag(leaf, r.new_name)) return where + ": " + name + " is now " + r.usage;
  }
  return "";
}

}  // namespace

std::string closest_name(const std::string& typed, const std::vector<std::string>& candidates) {
  const std::string t = strip_dashes(typed);
  std::string best;
  size_t best_d = 3;  // more than 2 edits is a different word
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(t, strip_dashes(c));
    if (d < best_d && 2 * d < t.size()) best = c, best_d = d;
  }
  return best;
}

std::vector<std::string> expand_help_command(const CLI::App& app, std::vector<std::string> args) {
  if (args.size() < 2 || args[1] != "help") return args;
  std::vector<std::string> out{args[0]};
  const CLI::App* at = &app;
  for (size_t i = 2; i < args.size(); ++i) {
    const CLI::App* sub = find_command(*at, args[i]);
    if (sub == nullptr) throw Error(unknown("command", printable(args[i]), command_names(*at), command_path(*at)));
    out.push_back(args[i]);
    at = sub;
  }
  out.push_back("--help");
  return out;
}

int report_parse_error(CLI::App& app, const CLI::ParseError& e, const std::vector<std::string>& args) {
  if (e.get_exit_code() == 0) return app.exit(e);  // --help, --help-all, --version
  std::string msg = renamed_flag_message(app, args);
  if (msg.empty()) msg = typo_message(app);
  // A validator's message (cli/limits.h) already says expected and found; others ("FILE is
  // required", "Could not convert") point to the command's help.
  if (msg.empty() && dynamic_cast<const CLI::ValidationError*>(&e) != nullptr) msg = e.what();
  if (msg.empty()) msg = std::string(e.what()) + "; see '" + command_path(deepest_parsed(app)) + " --help'";
  std::fprintf(stderr, "ember: %s\n", printable(msg).c_str());
  return 2;
}

}  // namespace ember::cli
