#pragma once
// Many prompts for the commands that run a set of them (map collect, study sweep), read one way:
//   --prompts FILE        one prompt a line (BOS as the tokenizer adds it); FILE.jsonl is a
//                         JSONL prompt file: text entries as lines, messages entries through
//                         the chat template with no BOS added (docs/formats/prompts-jsonl.md)
//   --prompt-ids FILE     one comma-separated id list a line, used as given
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "cli/chat_prompt.h"
#include "tokenizer/tokenizer.h"

namespace ember::cli {

struct PromptListArgs {
  std::string prompts, prompt_ids;
  ChatTemplateArgs chat;  // chat.model: set by the caller (the source GGUF)
  const CLI::Option* prompts_option = nullptr;
  const CLI::Option* ids_option = nullptr;
};

void add_prompt_list_flags(CLI::App* c, PromptListArgs& a);
// The non-empty prompts in file order. Ids must be below `vocab`. Error naming `where` when
// neither flag was given.
std::vector<std::vector<int32_t>> read_prompt_list(const PromptListArgs& a, const tok::Tokenizer& tokenizer,
                                                   int vocab, const std::string& where);

// The same prompts with a name each (kv matrix tables): the JSONL id, else the 1-based
// ordinal of the prompt in its file ("1", "2", ...).
struct NamedPrompt {
  std::string id;
  std::vector<int32_t> tokens;
};
std::vector<NamedPrompt> read_named_prompt_list(const PromptListArgs& a, const tok::Tokenizer& tokenizer,
                                                int vocab, const std::string& where);

}  // namespace ember::cli
