#pragma once
// The one parser for token id lists given on the command line (`ember run --prompt-ids`,
// `ember kv export --prompt-ids`, `ember detokenize --ids`), so every command accepts and
// rejects exactly the same text.
#include <cstdint>
#include <string_view>
#include <vector>

namespace ember::cli {

// "1,403,407" -> {1, 403, 407}. The grammar is strict: one or more items separated by single
// commas, each item one or more decimal digits with a value in [0, INT32_MAX]. Nothing else is
// accepted: no spaces, no signs, no empty item (a leading, trailing or double comma), no empty
// list. Range against a vocabulary is the caller's check. Throws ember::Error (one line naming
// `option`, the item, what was expected and what was found) otherwise.
std::vector<int32_t> parse_token_ids(std::string_view option, std::string_view text);

}  // namespace ember::cli
