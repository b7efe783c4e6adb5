// ember tokenize | detokenize: thin wrappers over ember::tok (docs/tokenizer.md).
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/chat_prompt.h"
#include "cli/commands.h"
#include "cli/prompt_text.h"
#include "cli/token_ids.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace ember::cli {
namespace {

struct Source {
  std::string model, tokenizer;
};

void add_source_options(CLI::App* cmd, Source& src) {
  auto* m = cmd->add_option("-m,--model", src.model, "GGUF model file (tokenizer.ggml.* metadata)");
  auto* t = cmd->add_option("--tokenizer", src.tokenizer, "Hugging Face tokenizer.json");
  m->excludes(t);
  t->excludes(m);
}

std::unique_ptr<tok::Tokenizer> load(const Source& src) {
  if (!src.model.empty()) return tok::Tokenizer::from_gguf(gguf::GgufFile::open(src.model));
  if (!src.tokenizer.empty()) return tok::Tokenizer::from_json_file(src.tokenizer);
  fail_field("command line", "--model / --tokenizer", "one of them", "neither");
}

std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

}  // namespace

void register_tokenize_commands(CLI::App& app) {
  struct TokenizeArgs {
    Source src;
    std::string prompt, file, messages;
    ChatTemplateArgs chat;
    bool json = false, no_bos = false, no_special = false;
  };
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* tk = app.add_subcommand("tokenize", "Encode text into token ids (prints ids and pieces)");
  add_source_options(tk, args->src);
  auto* p = tk->add_option("-p,--prompt", args->prompt, "Text to encode");
  auto* f = tk->add_option("--file", args->file, "Read the text to encode from a file (bytes as they are)");
  auto* m = tk->add_option("--messages", args->messages,
                           "Encode a conversation JSON through the chat template (docs/templates.md): no BOS is "
                           "added (the template writes its own)");
  p->excludes(f);
  f->excludes(p);
  m->excludes(p);
  m->excludes(f);
  add_chat_render_options(tk, args->chat, /*with_config=*/true);
  tk->add_flag("--json", args->json, "Print one JSON object: {ids, pieces, n_tokens, tokenizer}");
  tk->add_flag("--no-bos", args->no_bos, "Do not prepend BOS even if the model adds it by default");
  tk->add_flag("--no-special", args->no_special, "Treat control tokens written in the text as plain text");
  tk->callback([args, p, f, m] {
    if (p->count() + f->count() + m->count() == 0)
      fail_field("tokenize", "--prompt / --file / --messages", "one of them", "none");
    const auto t = load(args->src);
    bool add_bos = t->add_bos_default() && !args->no_bos;
    std::vector<int32_t> ids;
    if (m->count() != 0) {
      if (args->no_special) fail_field("tokenize", "--no-special", "not with --messages (control tokens are the template's)", "both");
      ChatTemplateArgs chat = args->chat;
      chat.model = args->src.model;
      add_bos = false;
      ids = chat_prompt_ids(*t, load_chat_template(chat, "tokenize --messages"),
                            tmpl::read_messages_file(args->messages), render_options(chat));
    } else {
      const std::string text =
          args->file.empty() ? checked_prompt_text(args->prompt, "--prompt") : read_prompt_file(args->file);
      ids = t->encode(text, add_bos, !args->no_special);
    }
    if (args->json) {
      nlohmann::json j;
      j["ids"] = ids;
      nlohmann::json pieces = nlohmann::json::array();
      for (int32_t id : ids) pieces.push_back(t->piece(id));
      j["pieces"] = std::move(pieces);
      j["n_tokens"] = ids.size();
      j["tokenizer"] = {{"kind", t->kind()}, {"identity", t->identity()}, {"add_bos", add_bos}};
      std::printf("%s\n", dump(j).c_str());
      return;
    }
    std::printf("tokenizer %s %s\n%zu tokens\n", t->kind().c_str(), t->identity().c_str(), ids.size());
    for (int32_t id : ids) std::printf("%d\t%s\n", id, dump(t->piece(id)).c_str());
  });

  struct DetokenizeArgs {
    Source src;
    std::string ids;
    bool json = false;
  };
  auto dargs = std::make_shared<DetokenizeArgs>();
  CLI::App* dt = app.add_subcommand("detokenize", "Decode token ids into text (bytes exactly, no newline added)");
  add_source_options(dt, dargs->src);
  dt->add_option("--ids", dargs->ids, "Token ids, separated by commas: 1,403,407")->required();
  dt->add_flag("--json", dargs->json, "Print {\"text\": ...} (invalid UTF-8 replaced by U+FFFD)");
  dt->callback([dargs] {
    const auto t = load(dargs->src);
    const std::string text = t->decode(parse_token_ids("--ids", dargs->ids));
    if (dargs->json) {
      std::printf("%s\n", dump(nlohmann::json{{"text", text}}).c_str());
    } else {
      std::fwrite(text.data(), 1, text.size(), stdout);
    }
  });
}

}  // namespace ember::cli
