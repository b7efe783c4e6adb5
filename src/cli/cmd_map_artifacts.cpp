#include "cli/map_commands.h"

namespace ember::cli {
void register_map_artifact_commands(CLI::App& map) { (void)map; }
}  // namespace ember::cli
