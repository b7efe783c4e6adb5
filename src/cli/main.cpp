// ember: KV caches as first-class artifacts. The executable only wires command groups.
#include <csignal>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/parse_errors.h"
#include "cli/version.h"
#include "util/error.h"
#include "util/printable.h"

int main(int argc, char** argv) {
  // Past RLIMIT_FSIZE (ulimit -f) the kernel's default for SIGXFSZ kills the process with no
  // message and leaves a writer's temporary behind. Ignored, write() fails with EFBIG instead:
  // the atomic writer reports it on one line naming the output and removes its temporary.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"ember: export, verify, replay, compare and translate transformer KV caches"};
  app.require_subcommand(1);
  app.set_version_flag("--version", ember::cli::version_text,
                       "Print the version, the commit and the SIMD path, and exit");
  ember::cli::register_model_commands(app);
  ember::cli::register_tokenize_commands(app);
  ember::cli::register_template_commands(app);
  ember::cli::register_run_command(app);
  ember::cli::register_bench_command(app);
  CLI::App* kv = app.add_subcommand("kv", "KV snapshots: export, verify, replay, compare, perturb");
  kv->require_subcommand(1);
  ember::cli::register_kv_snapshot_commands(*kv);
  ember::cli::register_kv_compare_commands(*kv);
  ember::cli::register_kv_safetensors_commands(*kv);
  ember::cli::register_kv_llamacpp_commands(*kv);
  ember::cli::register_kv_doctor_command(*kv);
  ember::cli::register_kv_matrix_command(*kv);
  ember::cli::register_map_commands(app);
  ember::cli::register_container_commands(app);
  ember::cli::register_store_commands(app);
  ember::cli::register_serve_command(app);
  // After the commands: a subcommand inherits the footer its parent has when it is added.
  app.footer("ember help CMD [SUB] prints the flags of a command (the same as ember CMD [SUB] --help).");
  try {
    const std::vector<std::string> args =
        ember::cli::llama_bench_long_flags(ember::cli::expand_help_command(app, {argv, argv + argc}));
    std::vector<const char*> expanded;
    for (const std::string& a : args) expanded.push_back(a.c_str());
    app.parse(int(expanded.size()), expanded.data());
  } catch (const CLI::ParseError& e) {
    return ember::cli::report_parse_error(app, e);
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
