// ember template render: a conversation through the model's chat template, printed exactly
// (docs/templates.md). Thin over ember::tmpl.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/chat_prompt.h"
#include "cli/commands.h"
#include "template/chat_template.h"

namespace ember::cli {

void register_template_commands(CLI::App& app) {
  CLI::App* tg = app.add_subcommand("template", "Chat templates: render a conversation as the model's template does");
  tg->require_subcommand(1);
  auto args = std::make_shared<ChatTemplateArgs>();
  auto messages = std::make_shared<std::string>();
  CLI::App* r = tg->add_subcommand("render", "Print the rendered prompt exactly (no newline added)");
  r->add_option("-m,--model", args->model, "GGUF whose tokenizer.chat_template to use");
  r->add_option("--tokenizer-config", args->tokenizer_config, "Hugging Face tokenizer_config.json (chat_template)");
  r->add_option("--messages", *messages, "Conversation JSON: [{\"role\",\"content\"}, ...]")->required();
  add_chat_render_options(r, *args);
  r->callback([args, messages] {
    const tmpl::ChatTemplate t = load_chat_template(*args, "template render");
    const std::string text = tmpl::render(t, tmpl::read_messages_file(*messages), render_options(*args));
    std::fwrite(text.data(), 1, text.size(), stdout);
  });
}

}  // namespace ember::cli
