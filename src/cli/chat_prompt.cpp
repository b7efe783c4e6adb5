#include "cli/chat_prompt.h"

#include "gguf/gguf_file.h"
#include "util/error.h"

namespace ember::cli {

void add_chat_render_options(CLI::App* cmd, ChatTemplateArgs& a, bool with_config) {
  if (with_config)
    cmd->add_option("--tokenizer-config", a.tokenizer_config,
                    "tokenizer_config.json whose chat_template renders --messages (default: the GGUF's)");
  cmd->add_flag("--add-generation-prompt", a.add_generation_prompt,
                "End with the assistant header, as apply_chat_template(add_generation_prompt=True)");
  cmd->add_option("--enable-thinking", a.enable_thinking, "Qwen3's enable_thinking (true|false; default: undefined)")
      ->check(CLI::IsMember({"true", "false"}));
  cmd->add_option("--date-string", a.date_string, "Llama 3.2's date_string (default: today, \"%d %b %Y\")");
}

tmpl::RenderOptions render_options(const ChatTemplateArgs& a) {
  tmpl::RenderOptions o;
  o.add_generation_prompt = a.add_generation_prompt;
  if (!a.enable_thinking.empty()) o.enable_thinking = a.enable_thinking == "true";
  if (!a.date_string.empty()) o.date_string = a.date_string;
  return o;
}

tmpl::ChatTemplate load_chat_template(const ChatTemplateArgs& a, const std::string& command) {
  if (!a.tokenizer_config.empty()) return tmpl::from_tokenizer_config(a.tokenizer_config);
  if (!a.model.empty()) return tmpl::from_gguf(gguf::GgufFile::open(a.model));
  fail_field(command, "--model / --tokenizer-config", "one of them (where the chat template is read)", "neither");
}

std::vector<int32_t> chat_prompt_ids(const tok::Tokenizer& tokenizer, const tmpl::ChatTemplate& t,
                                     const std::vector<tmpl::Message>& messages, const tmpl::RenderOptions& o) {
  return tokenizer.encode(tmpl::render(t, messages, o), /*add_bos=*/false, /*parse_special=*/true);
}

}  // namespace ember::cli
