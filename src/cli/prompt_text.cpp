#include "cli/prompt_text.h"

#include <algorithm>
#include <cstdio>

#include "tokenizer/utf8.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace ember::cli {
namespace {

constexpr size_t kMaxPromptBytes = size_t(64) << 20;

void check_utf8(const std::string& text, const std::string& where) {
  const size_t bad = tok::utf8_invalid_offset(text);
  if (bad == std::string::npos) return;
  const size_t line = 1 + size_t(std::count(text.begin(), text.begin() + std::ptrdiff_t(bad), '\n'));
  char byte[8];
  std::snprintf(byte, sizeof byte, "0x%02X", unsigned(static_cast<unsigned char>(text[bad])));
  fail_field(where, "text", "valid UTF-8",
             std::string("an invalid byte ") + byte + " at byte offset " + std::to_string(bad) + " (line " +
                 std::to_string(line) + ")");
}

}  // namespace

std::string read_prompt_file(const std::string& path) {
  std::string text = read_input(path, kMaxPromptBytes);
  check_utf8(text, path);
  return text;
}

const std::string& checked_prompt_text(const std::string& text, const std::string& flag) {
  check_utf8(text, flag);
  return text;
}

}  // namespace ember::cli
