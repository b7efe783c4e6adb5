// The `ember` command tree, built once for the executable and once for the tests that walk
// every command (tests/cli/flag_names_test.cpp checks one meaning per flag name).
#include "cli/commands.h"
#include "cli/version.h"

namespace ember::cli {

void build_app(CLI::App& app) {
  app.description("ember: export, verify, replay, compare and translate transformer KV caches");
  app.require_subcommand(1);
  app.set_version_flag("--version", version_text, "Print the version, the commit and the SIMD path, and exit");
  register_model_commands(app);
  register_tokenize_commands(app);
  register_template_commands(app);
  register_run_command(app);
  register_bench_command(app);
  CLI::App* kv = app.add_subcommand("kv", "KV snapshots: export, verify, replay, compare, perturb");
  kv->require_subcommand(1);
  register_kv_snapshot_commands(*kv);
  register_kv_compare_commands(*kv);
  register_kv_safetensors_commands(*kv);
  register_kv_llamacpp_commands(*kv);
  register_kv_doctor_command(*kv);
  register_kv_matrix_command(*kv);
  register_map_commands(app);
  register_container_commands(app);
  register_store_commands(app);
  register_serve_command(app);
  // After the commands: a subcommand inherits the footer its parent has when it is added.
  app.footer("ember help CMD [SUB] prints the flags of a command (the same as ember CMD [SUB] --help).");
}

}  // namespace ember::cli
