// `ember kv validate-replay`'s prompt: resolved here (text, file, or a conversation through
// the chat template), then the processes are kv::run_gate_processes's (kv/gate_process.h).
#include "cli/kv_gate.h"

#include "cli/prompt_text.h"
#include "template/chat_template.h"

namespace ember::cli {

kv::GateOutcome run_replay_gate(const GateArgs& a) {
  kv::GatePlan plan;
  // The prompt flags both the run and the export get: the text, or the conversation and its
  // render options (rendered here once too, for the receipt's hash and to fail before spawning).
  std::vector<std::string>& flags = plan.prompt_flags;
  if (!a.messages.empty()) {
    ChatTemplateArgs chat = a.chat;
    chat.model = a.model;
    plan.prompt = tmpl::render(load_chat_template(chat, "validate-replay"), tmpl::read_messages_file(a.messages),
                               render_options(chat));
    flags = {"--messages", a.messages};
    if (!a.chat.tokenizer_config.empty()) flags.insert(flags.end(), {"--tokenizer-config", a.chat.tokenizer_config});
    if (a.chat.add_generation_prompt) flags.push_back("--add-generation-prompt");
    if (!a.chat.enable_thinking.empty()) flags.insert(flags.end(), {"--enable-thinking", a.chat.enable_thinking});
    if (!a.chat.date_string.empty()) flags.insert(flags.end(), {"--date-string", a.chat.date_string});
  } else {
    plan.prompt = !a.prompt_file.empty() ? read_prompt_file(a.prompt_file) : checked_prompt_text(a.prompt, "--prompt");
    flags = {"--prompt", plan.prompt};
  }
  plan.model = a.model;
  plan.tokenizer = a.tokenizer;
  plan.arch = a.arch;
  plan.out = a.out;
  plan.n = a.n;
  plan.threads = a.threads;
  plan.native_threads = a.native_threads;
  plan.export_threads = a.export_threads;
  plan.replay_threads = a.replay_threads;
  plan.native_simd = a.native_simd;
  plan.export_simd = a.export_simd;
  plan.replay_simd = a.replay_simd;
  plan.force = a.force;
  return kv::run_gate_processes(plan);
}

}  // namespace ember::cli
