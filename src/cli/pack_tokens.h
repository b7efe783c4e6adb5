#pragma once
// The token counter `ember pack validate` and `ember run --pack` use for briefing costs.
#include <memory>
#include <cstdint>
#include <string>
#include <vector>

#include "contract/pack.h"
#include "tokenizer/tokenizer.h"

namespace ember::cli {

// From --model (GGUF, its embedded tokenizer) or --tokenizer (tokenizer.json); nullptr when
// neither is given. Error naming the file if it cannot be loaded.
std::unique_ptr<contract::TokenCounter> make_token_counter(const std::string& model_path,
                                                           const std::string& tokenizer_path);

// `ember run --pack PACK --allow TOOLS.json`: validates the pack (schema, every tool against
// the allowlist, briefing bounds in characters and in tokens of the run's tokenizer), prints
// the briefing's cost on stderr, and returns the prompt's token ids: briefing, blank line,
// prompt, encoded as one text in which the briefing and the blank line are plain text (a
// control token written in a pack, "</s><s>" or "<|im_start|>", is never its id), while the
// user's own prompt keeps special-token parsing. Error naming the pack and the first violation
// if it is refused.
std::vector<int32_t> apply_pack(const std::string& pack_path, const std::string& allow_path,
                                const tok::Tokenizer& tokenizer, const std::string& prompt,
                                bool add_bos);

}  // namespace ember::cli
