#pragma once
// The JSONL prompt format (ember.prompts, docs/formats/prompts-jsonl.md): one JSON object a
// line, {"id": ..., "text": ...} or {"id": ..., "messages": [...]}, so multi-line prompts and
// chat conversations fit in one file. Read strictly: unknown, missing, mistyped and duplicated
// keys, both or neither of text/messages, a duplicated or empty id, blank lines and invalid
// UTF-8 are errors naming FILE:LINE and the field.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "template/chat_template.h"

namespace ember::tmpl {

struct PromptEntry {
  std::string id;
  std::optional<std::string> text;               // exactly one of text and messages
  std::optional<std::vector<Message>> messages;
  size_t line = 0;                               // 1-based
  std::string where;                             // "FILE:LINE", for errors about this entry
};

// True for a path that names a JSONL prompt file (it ends in ".jsonl"): commands that also read
// older formats (a plain text file, one prompt a line) decide by this.
bool is_prompt_jsonl(const std::string& path);

// At most 1,000,000 entries and 256 MiB. An empty file is an error.
std::vector<PromptEntry> read_prompt_jsonl(const std::string& path);

// The entry with this id, or Error naming the file and the ids it holds (the first few).
// An empty id selects the only entry of a one-entry file.
const PromptEntry& select_prompt(const std::vector<PromptEntry>& entries, const std::string& id,
                                 const std::string& path, const std::string& flag);

}  // namespace ember::tmpl
