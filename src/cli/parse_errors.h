#pragma once
// What a user sees when the command line does not parse: every message starts "ember: ", a
// mistyped command or flag names the closest one that exists ("did you mean"), and the exit
// status is 2 (bad usage). Also `ember help [CMD...]`, the spelling git and cargo users type.
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace ember::cli {

// The name among `candidates` closest to `typed` by edit distance (a transposition counts
// one), or "" when none is close enough to be a plausible typo (at most 2 edits, and fewer
// than half of the typed name's letters).
std::string closest_name(const std::string& typed, const std::vector<std::string>& candidates);

// `ember help [CMD [SUB]]` rewritten as `ember [CMD [SUB]] --help`; other command lines are
// returned as they are. args[0] is the program. Error for a name that is not a command there,
// naming the closest one.
std::vector<std::string> expand_help_command(const CLI::App& app, std::vector<std::string> args);

// Prints the parse failure `e` of `app` (after app.parse threw it) and returns the exit
// status: help and --version print as CLI11 does and return 0. Otherwise one line on stderr:
// an unknown command or flag left over in the deepest command parsed, with its closest
// match, takes precedence over CLI11's own message (a typo is usually why a required flag
// then looks missing); else CLI11's message, prefixed, and but for a validator's message
// pointing to the command's --help. Before both, an old spelling of a renamed flag (`--out`,
// `--report`, `--json FILE` where --json-out writes the file) is named with the flag that
// replaced it. `args` is the command line app.parse was given. Returns 2.
int report_parse_error(CLI::App& app, const CLI::ParseError& e, const std::vector<std::string>& args);

}  // namespace ember::cli
