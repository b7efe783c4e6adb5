// ember: KV caches as first-class artifacts. The executable parses the command tree (cli/app.cpp)
// and maps what escapes a command to one line and an exit status.
#include <csignal>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/parse_errors.h"
#include "util/error.h"
#include "util/printable.h"

int main(int argc, char** argv) {
  // Past RLIMIT_FSIZE (ulimit -f) the kernel's default for SIGXFSZ kills the process with no
  // message and leaves a writer's temporary behind. Ignored, write() fails with EFBIG instead:
  // the atomic writer reports it on one line naming the output and removes its temporary.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app;
  ember::cli::build_app(app);
  std::vector<std::string> args;  // argv as parsed, kept for the parse error's message
  try {
    args = ember::cli::llama_bench_long_flags(ember::cli::expand_help_command(app, {argv, argv + argc}));
    std::vector<const char*> expanded;
    for (const std::string& a : args) expanded.push_back(a.c_str());
    app.parse(int(expanded.size()), expanded.data());
  } catch (const CLI::ParseError& e) {
    return ember::cli::report_parse_error(app, e, args);
  } catch (const ember::cli::CheckFailed& e) {
    if (!e.message.empty()) std::fprintf(stderr, "ember: %s\n", ember::printable(e.message).c_str());
    return 1;
  } catch (const ember::Error& e) {
    // The one place errors reach the terminal: escaped again (idempotent), for messages not
    // built by fail()/fail_field().
    std::fprintf(stderr, "ember: %s\n", ember::printable(e.what()).c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember: unexpected error: %s\n", ember::printable(e.what()).c_str());
    return 2;
  }
  return 0;
}
