#pragma once
// The `ember map` and `ember study` command groups are split over three files (one job each):
// cmd_map.cpp (wiring, study recompute-anchor), cmd_map_artifacts.cpp (collect, fit, apply,
// replay, hybrid), cmd_study_sweep.cpp (study sweep).
#include <CLI/CLI.hpp>

namespace ember::cli {

void register_map_artifact_commands(CLI::App& map);  // ember map collect|fit|apply|replay|hybrid
void register_sweep_command(CLI::App& study);        // ember study sweep
void register_kv_quant_study_command(CLI::App& study);  // ember study kv-quant (cmd_study_kv_quant.cpp)

}  // namespace ember::cli
