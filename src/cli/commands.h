#pragma once
// Command groups of the `ember` executable. Each lives in its own file (cmd_*.cpp) and is a
// thin layer over the library: parse flags, call the library, print, map errors to exit codes.
#include <CLI/CLI.hpp>

namespace ember::cli {

// Exit codes: 0 success; 1 a check ran and failed (gate, threshold, verification);
// 2 bad usage or bad input (ember::Error). A command signals a failed check by throwing
// CheckFailed after printing its report.
struct CheckFailed {
  std::string message;
};

// The producer named in the artifacts the commands write (manifests, receipts, store entries).
inline constexpr const char* kProducer = "ember 0.1.0";

// The whole command tree on `app` (cli/app.cpp): what the executable parses and what the
// tests walk to check every command's flags.
void build_app(CLI::App& app);

void register_model_commands(CLI::App& app);        // ember model inspect|quantize|synth
void register_model_import_hf(CLI::App& model);     // ember model import-hf
void register_tokenize_commands(CLI::App& app);     // ember tokenize|detokenize
void register_template_commands(CLI::App& app);     // ember template render
void register_run_command(CLI::App& app);           // ember run
void register_bench_command(CLI::App& app);         // ember bench
// `ember bench`'s argv with llama-bench's one-dash, several-letter flags (-ngl, -pg, -fa, ...)
// renamed to the long flags CLI11 can parse; other command lines are returned as they are.
std::vector<std::string> llama_bench_long_flags(std::vector<std::string> args);
void register_kv_snapshot_commands(CLI::App& kv);   // ember kv export|verify|replay|validate-replay
void register_kv_compare_commands(CLI::App& kv);    // ember kv compare|perturb
void register_kv_safetensors_commands(CLI::App& kv);  // ember kv import-safetensors|export-safetensors
void register_kv_llamacpp_commands(CLI::App& kv);   // ember kv import-llamacpp|export-llamacpp
void register_kv_doctor_command(CLI::App& kv);     // ember kv doctor
void register_kv_matrix_command(CLI::App& kv);      // ember kv matrix
void register_map_commands(CLI::App& app);          // ember map ...|study ...
void register_container_commands(CLI::App& app);    // ember kvc ...|contract ...|pack ...
void register_contract_commands(CLI::App& app);     // ember contract validate|pack validate
void register_store_commands(CLI::App& app);        // ember store put|get|ls|rm|verify|gc|stats
void register_serve_command(CLI::App& app);         // ember serve

}  // namespace ember::cli
