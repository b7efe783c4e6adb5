#pragma once
// The one way a command turns a conversation into a prompt: the chat template from the GGUF
// (tokenizer.chat_template) or a tokenizer_config.json, rendered by ember::tmpl, then encoded
// without adding BOS (as apply_chat_template(tokenize=True) does: the Llama templates write
// <|begin_of_text|> themselves, the Qwen ones have none), control tokens parsed.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace ember::cli {

struct ChatTemplateArgs {
  std::string model;             // GGUF path (its tokenizer.chat_template)
  std::string tokenizer_config;  // tokenizer_config.json; wins over the GGUF when given
  bool add_generation_prompt = false;
  std::string enable_thinking;   // "", "true" or "false"
  std::string date_string;       // "" = today (Llama 3.2)
};

// --add-generation-prompt, --enable-thinking, --date-string (and, for commands whose model
// flag is their own, --tokenizer-config when with_config).
void add_chat_render_options(CLI::App* cmd, ChatTemplateArgs& a, bool with_config = false);
tmpl::RenderOptions render_options(const ChatTemplateArgs& a);
// Error naming `command` when neither source is given.
tmpl::ChatTemplate load_chat_template(const ChatTemplateArgs& a, const std::string& command);

// The prompt ids of a conversation: encode(render(...), add_bos = false, parse_special = true).
std::vector<int32_t> chat_prompt_ids(const tok::Tokenizer& tokenizer, const tmpl::ChatTemplate& t,
                                     const std::vector<tmpl::Message>& messages, const tmpl::RenderOptions& o);

}  // namespace ember::cli
