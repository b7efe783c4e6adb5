#include "cli/map_commands.h"

namespace ember::cli {
void register_sweep_command(CLI::App& study) { (void)study; }
}  // namespace ember::cli
