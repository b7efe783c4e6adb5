#pragma once
// `ember kv validate-replay`: runs the uninterrupted generation (`ember run --dump-logits`),
// the export and the replay as three separate processes of this same executable
// (/proc/self/exe), then compares their f32 logits bit for bit (kv/replay_gate.h) and writes
// a canonical receipt JSON. Each process may get its own thread count and SIMD path.
#include <string>

#include "cli/chat_prompt.h"

namespace ember::cli {

struct GateArgs {
  std::string model, tokenizer, arch, prompt, prompt_file, out;
  // --messages CONV.json (cli/prompt_input.h): the run and the export each render it through
  // the chat template with the same options (forwarded), no BOS added.
  std::string messages;
  ChatTemplateArgs chat;
  int n = 0;
  int threads = 0, native_threads = 0, export_threads = 0, replay_threads = 0;
  std::string native_simd, export_simd, replay_simd;
  bool force = false;
};

struct GateOutcome {
  bool pass = false;
  std::string summary;       // one line
  std::string receipt_path;  // OUT/receipt.json
};

GateOutcome run_replay_gate(const GateArgs& args);

}  // namespace ember::cli
