#include "cli/prompt_list.h"

#include <optional>

#include "cli/prompt_text.h"
#include "cli/token_ids.h"
#include "template/prompt_file.h"
#include "util/error.h"

namespace ember::cli {
namespace {

// Non-empty lines, a trailing \r dropped.
std::vector<std::string> read_lines(const std::string& path) {
  std::vector<std::string> out;
  const std::string text = read_prompt_file(path);
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) out.push_back(line);
    start = end + 1;
  }
  return out;
}

}  // namespace

void add_prompt_list_flags(CLI::App* c, PromptListArgs& a) {
  auto* p = c->add_option("--prompts", a.prompts,
                          "Prompts file, one per line; a FILE.jsonl is a JSONL prompt file (text and messages)");
  auto* i = c->add_option("--prompt-ids", a.prompt_ids,
                          "File of prompts as token ids: one comma-separated list per line (no BOS added)");
  p->excludes(i);
  a.prompts_option = p;
  a.ids_option = i;
  add_chat_render_options(c, a.chat, /*with_config=*/true);
}

std::vector<std::vector<int32_t>> read_prompt_list(const PromptListArgs& a, const tok::Tokenizer& tokenizer,
                                                   int vocab, const std::string& where) {
  std::vector<std::vector<int32_t>> out;
  for (NamedPrompt& p : read_named_prompt_list(a, tokenizer, vocab, where)) out.push_back(std::move(p.tokens));
  return out;
}

std::vector<NamedPrompt> read_named_prompt_list(const PromptListArgs& a, const tok::Tokenizer& tokenizer,
                                                int vocab, const std::string& where) {
  std::vector<NamedPrompt> out;
  std::string entry_id;  // the JSONL id of the entry being added; empty: its ordinal
  const auto add = [&](std::vector<int32_t> p) {
    if (!p.empty()) out.push_back({entry_id.empty() ? std::to_string(out.size() + 1) : entry_id, std::move(p)});
  };
  const auto text_ids = [&](const std::string& text) { return tokenizer.encode(text, tokenizer.add_bos_default()); };
  if (a.ids_option && a.ids_option->count() > 0) {
    const std::vector<std::string> lines = read_lines(a.prompt_ids);
    for (size_t i = 0; i < lines.size(); ++i) {
      std::vector<int32_t> p = parse_token_ids(a.prompt_ids + ": list " + std::to_string(i), lines[i]);
      for (int32_t id : p)
        if (id >= vocab)
          fail_field(a.prompt_ids, "token id", "below the vocabulary size " + std::to_string(vocab), std::to_string(id));
      add(std::move(p));
    }
  } else if (a.prompts_option && a.prompts_option->count() > 0) {
    if (!tmpl::is_prompt_jsonl(a.prompts)) {
      for (const auto& line : read_lines(a.prompts)) add(text_ids(line));
    } else {
      std::optional<tmpl::ChatTemplate> tpl;
      for (const tmpl::PromptEntry& e : tmpl::read_prompt_jsonl(a.prompts)) {
        entry_id = e.id;
        if (e.text) {
          add(text_ids(*e.text));
        } else {
          if (!tpl) tpl = load_chat_template(a.chat, where + " " + e.where);
          add(chat_prompt_ids(tokenizer, *tpl, *e.messages, render_options(a.chat)));
        }
      }
    }
  } else {
    fail_field(where, "prompts", "--prompts FILE or --prompt-ids FILE", "neither");
  }
  return out;
}

}  // namespace ember::cli
