// The token counter `ember pack validate` and `ember run --pack` use for briefing costs.
#include "cli/pack_tokens.h"

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace ember::cli {

std::unique_ptr<contract::TokenCounter> make_token_counter(const std::string& model_path,
                                                           const std::string& tokenizer_path) {
  if (model_path.empty() && tokenizer_path.empty()) return nullptr;
  std::shared_ptr<const tok::Tokenizer> tk;
  if (!tokenizer_path.empty()) {
    tk = tok::Tokenizer::from_json_file(tokenizer_path);
  } else {
    tk = tok::Tokenizer::from_gguf(gguf::GgufFile::open(model_path));
  }
  // The briefing is injected as plain text in front of the prompt: no BOS of its own, and a
  // control token written in a pack is text, never a special token.
  return std::make_unique<contract::TokenCounter>(
      [tk](std::string_view text) { return tk->encode(text, false, false).size(); });
}

}  // namespace ember::cli
