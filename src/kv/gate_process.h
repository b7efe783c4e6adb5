#pragma once
// The exact-replay gate's processes (`ember kv validate-replay`): the uninterrupted generation
// (`ember run --dump-logits`), the export and the replay run as three separate processes of one
// executable, each with its own thread count and SIMD path; then their f32 logits are compared
// bit for bit (kv/replay_gate.h) and a receipt JSON is written. The processes are separate on
// purpose: a state that only survives within one process (a static, a cached plan) cannot
// make the replay pass.
//
// The CLI resolves the prompt (text, file or a chat conversation) and passes it here as the
// text to hash and the flags to forward; this file knows processes, files and the receipt.
// Not thread-safe: forks, and sets EMBER_SIMD in each child only.
#include <string>
#include <vector>

namespace ember::kv {

struct GatePlan {
  std::string executable = "/proc/self/exe";  // what each process runs (an `ember` binary)
  std::string model, tokenizer, arch;          // forwarded; tokenizer/arch may be empty
  std::string prompt;                          // the prompt text, hashed into the receipt
  std::vector<std::string> prompt_flags;       // forwarded to the run and the export
  std::string out;                             // directory for logits, snapshot, logs, receipt
  int n = 0;                                   // native rows (>= 2)
  int threads = 0, native_threads = 0, export_threads = 0, replay_threads = 0;  // 0: default
  std::string native_simd, export_simd, replay_simd;                          // "": default
  bool force = false;  // reuse a non-empty `out`
};

// One process of the gate.
struct GateStep {
  std::string role;               // native | export | replay
  std::vector<std::string> argv;  // argv[0] is "ember"
  int threads = 0;                // 0: the executable's default
  std::string simd;               // EMBER_SIMD for this process; "": unset
  std::string log;                // its stdout and stderr
  int exit_code = -1;             // -1: not run; 128 + signal when killed
};

// The three processes' command lines, in order (no file is touched).
std::vector<GateStep> gate_steps(const GatePlan& plan);

struct GateOutcome {
  bool pass = false;
  std::string summary;       // one line
  std::string receipt_path;  // OUT/receipt.json
};

// Runs the steps in order, stopping at the first that fails, and writes OUT/receipt.json
// (kind ember.replay-gate, version 1) in every case: "error" naming the failed process and the
// last line of its log, or the verdict. Error (before anything runs) for n < 2, a SIMD path
// that is unknown or that this CPU lacks, or a non-empty `out` without force.
GateOutcome run_gate_processes(const GatePlan& plan);

}  // namespace ember::kv
