#include "cli/commands.h"

namespace ember::cli {

void register_model_commands(CLI::App& app) { (void)app; }

}  // namespace ember::cli
