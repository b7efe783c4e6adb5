#pragma once
// Prompt text from the command line or a file, checked for UTF-8 where it enters ember, so an
// invalid byte is reported against what the user typed or named (the flag, or the file with the
// byte offset and line), not against an internal tokenizer fragment.
#include <string>

namespace ember::cli {

// Reads `path` (a regular file of at most 64 MiB; FIFOs refused) and returns its bytes. Throws
// "<path>: text: expected valid UTF-8, found an invalid byte 0xNN at byte offset O (line L)".
std::string read_prompt_file(const std::string& path);

// Returns `text` after the same check, naming `flag` (e.g. "--prompt") instead of a file.
const std::string& checked_prompt_text(const std::string& text, const std::string& flag);

}  // namespace ember::cli
