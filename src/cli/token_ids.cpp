#include "cli/token_ids.h"

#include <string>

#include "util/error.h"

namespace ember::cli {
namespace {

constexpr int64_t kMaxId = INT32_MAX;

// The offending item, quoted, and cut short so a pasted megabyte stays a one-line message.
std::string quoted(std::string_view item) {
  constexpr size_t kShown = 24;
  if (item.size() <= kShown) return "'" + std::string(item) + "'";
  return "'" + std::string(item.substr(0, kShown)) + "...' (" + std::to_string(item.size()) + " characters)";
}

}  // namespace

std::vector<int32_t> parse_token_ids(std::string_view option, std::string_view text) {
  if (text.empty())
    fail_field(option, "list", "comma-separated token ids such as 1,403,407", "an empty list");
  std::vector<int32_t> ids;
  size_t begin = 0;
  for (;;) {
    const size_t comma = text.find(',', begin);
    const size_t end = comma == std::string_view::npos ? text.size() : comma;
    const std::string_view item = text.substr(begin, end - begin);
    const std::string field = "item " + std::to_string(ids.size());
    if (item.empty())
      fail_field(option, field, "a token id (decimal digits)",
                 "an empty item (a leading, trailing or double comma)");
    int64_t v = 0;
    for (const char c : item) {
      if (c < '0' || c > '9') fail_field(option, field, "a token id of decimal digits 0-9 only", quoted(item));
      v = v * 10 + (c - '0');  // stops below 2^35: v <= kMaxId before each step
      if (v > kMaxId) fail_field(option, field, "a token id of at most " + std::to_string(kMaxId), quoted(item));
    }
    ids.push_back(int32_t(v));
    if (end == text.size()) return ids;
    begin = end + 1;
  }
}

}  // namespace ember::cli
