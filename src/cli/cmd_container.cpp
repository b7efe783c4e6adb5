// ember kvc pack|unpack|inspect|verify (KVC1 single-file containers), plus the contract and
// capability-pack commands (cmd_contract.cpp).
#include "cli/commands.h"

namespace ember::cli {

void register_container_commands(CLI::App& app) { register_contract_commands(app); }

}  // namespace ember::cli
