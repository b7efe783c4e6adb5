#pragma once
// `ember kv validate-replay`'s flags. The CLI resolves the prompt; the three processes, the
// bit-for-bit comparison and the receipt are kv/gate_process.h's.
#include <string>

#include "cli/chat_prompt.h"
#include "kv/gate_process.h"

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

kv::GateOutcome run_replay_gate(const GateArgs& args);

}  // namespace ember::cli
