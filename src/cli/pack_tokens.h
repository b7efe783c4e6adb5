#pragma once
// The token counter `ember pack validate` and `ember run --pack` use for briefing costs.
#include <memory>
#include <string>

#include "contract/pack.h"

namespace ember::cli {

// From --model (GGUF, its embedded tokenizer) or --tokenizer (tokenizer.json); nullptr when
// neither is given. Error naming the file if it cannot be loaded.
std::unique_ptr<contract::TokenCounter> make_token_counter(const std::string& model_path,
                                                           const std::string& tokenizer_path);

}  // namespace ember::cli
