#pragma once
// The prompt flags shared by `ember run` and `ember kv export`, and the one function that turns
// them into token ids, so both commands encode every kind of prompt the same way:
//   --prompt TEXT          encoded with BOS if the tokenizer adds it (unless --no-bos)
//   --prompt-file F        F's bytes as text; F ending in .jsonl is a JSONL prompt file
//                          (docs/formats/prompts-jsonl.md) and --prompt-id picks the entry
//   --messages CONV.json   a conversation through the chat template (docs/templates.md):
//                          never a BOS added, the template writes its own
//   --prompt-ids LIST      ids as given
// A JSONL "messages" entry is encoded as --messages is.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "cli/chat_prompt.h"
#include "tokenizer/tokenizer.h"

namespace ember::cli {

struct PromptInput {
  std::string text, file, ids, messages, prompt_id;
  const CLI::Option* ids_option = nullptr;   // given-but-empty --prompt-ids is an error
  const CLI::Option* text_option = nullptr;
  bool no_bos = false;
  ChatTemplateArgs chat;  // chat.model: set by the caller to its --model
};

// Adds --prompt, --prompt-file, --prompt-id, --messages, --prompt-ids (mutually exclusive where
// they must be), --no-bos, and the chat render options with --tokenizer-config.
void add_prompt_input_flags(CLI::App* c, PromptInput& p);

// True when one of the prompt sources was given.
bool has_prompt_input(const PromptInput& p);
// The prompt ids. tokenizer may be null only for --prompt-ids (else Error naming `model`).
std::vector<int32_t> prompt_input_ids(const PromptInput& p, const tok::Tokenizer* tokenizer, const std::string& model);

}  // namespace ember::cli
