#include "cli/commands.h"

namespace ember::cli {

void register_run_command(CLI::App& app) { (void)app; }

}  // namespace ember::cli
