#include "cli/prompt_input.h"

#include "cli/prompt_text.h"
#include "cli/token_ids.h"
#include "template/prompt_file.h"
#include "util/error.h"

namespace ember::cli {

void add_prompt_input_flags(CLI::App* c, PromptInput& p) {
  auto* t = c->add_option("-p,--prompt", p.text, "prompt text");
  auto* f = c->add_option("-f,--prompt-file", p.file,
                          "prompt text from a file (UTF-8); a FILE.jsonl is a JSONL prompt file (--prompt-id)");
  auto* id = c->add_option("--prompt-id", p.prompt_id, "the entry of a JSONL --prompt-file (default: its only one)");
  auto* m = c->add_option("--messages", p.messages, "conversation JSON rendered by the chat template (no BOS added)");
  auto* i = c->add_option("--prompt-ids", p.ids, "prompt as comma-separated token ids (no BOS added)");
  p.ids_option = i;
  p.text_option = t;
  t->excludes(f)->excludes(i)->excludes(m);
  f->excludes(i)->excludes(m);
  m->excludes(i);
  id->needs(f);
  c->add_flag("--no-bos", p.no_bos, "do not prepend BOS to the prompt text");
  add_chat_render_options(c, p.chat, /*with_config=*/true);
}

bool has_prompt_input(const PromptInput& p) {
  return (p.text_option && p.text_option->count() > 0) || !p.file.empty() || !p.messages.empty() ||
         (p.ids_option && p.ids_option->count() > 0);
}

std::vector<int32_t> prompt_input_ids(const PromptInput& p, const tok::Tokenizer* tokenizer, const std::string& model) {
  if (p.ids_option && p.ids_option->count() > 0) return parse_token_ids("--prompt-ids", p.ids);
  if (!has_prompt_input(p))
    fail_field("prompt", "source", "--prompt TEXT, --prompt-file F, --messages CONV.json or --prompt-ids LIST",
               "none");
  if (!tokenizer)
    fail_field(model, "tokenizer", "tokenizer metadata in the GGUF or --tokenizer JSON (or pass --prompt-ids)",
               "none");
  const auto text_ids = [&](const std::string& text) {
    return tokenizer->encode(text, !p.no_bos && tokenizer->add_bos_default());
  };
  const auto chat_ids = [&](const std::vector<tmpl::Message>& messages) {
    return chat_prompt_ids(*tokenizer, load_chat_template(p.chat, "--messages"), messages, render_options(p.chat));
  };
  if (!p.messages.empty()) return chat_ids(tmpl::read_messages_file(p.messages));
  if (!p.file.empty()) {
    if (!tmpl::is_prompt_jsonl(p.file)) {
      if (!p.prompt_id.empty())
        fail_field("--prompt-id", "--prompt-file", "a JSONL prompt file (FILE.jsonl)", p.file);
      return text_ids(read_prompt_file(p.file));
    }
    const auto entries = tmpl::read_prompt_jsonl(p.file);
    const tmpl::PromptEntry& e = tmpl::select_prompt(entries, p.prompt_id, p.file, "--prompt-id");
    return e.messages ? chat_ids(*e.messages) : text_ids(*e.text);
  }
  return text_ids(checked_prompt_text(p.text, "--prompt"));
}

}  // namespace ember::cli
