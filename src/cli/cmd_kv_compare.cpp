#include "cli/commands.h"

namespace ember::cli {

void register_kv_compare_commands(CLI::App& app) { (void)app; }

}  // namespace ember::cli
