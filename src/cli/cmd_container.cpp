#include "cli/commands.h"

namespace ember::cli {

void register_container_commands(CLI::App& app) { (void)app; }

}  // namespace ember::cli
