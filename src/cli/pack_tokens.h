#pragma once
// The token counter `ember pack validate` and `ember run --pack` use for briefing costs.
#include <memory>
#include <string>

#include "contract/pack.h"
#include "tokenizer/tokenizer.h"

namespace ember::cli {

// From --model (GGUF, its embedded tokenizer) or --tokenizer (tokenizer.json); nullptr when
// neither is given. Error naming the file if it cannot be loaded.
std::unique_ptr<contract::TokenCounter> make_token_counter(const std::string& model_path,
                                                           const std::string& tokenizer_path);

// `ember run --pack PACK --allow TOOLS.json`: validates the pack (schema, every tool against
// the allowlist, briefing bounds in characters and in tokens of the run's tokenizer), prints
// the briefing's cost on stderr, and returns the text to encode: briefing, blank line, prompt.
// Error naming the pack and the first violation if it is refused.
std::string apply_pack(const std::string& pack_path, const std::string& allow_path,
                       const tok::Tokenizer& tokenizer, const std::string& prompt);

}  // namespace ember::cli
