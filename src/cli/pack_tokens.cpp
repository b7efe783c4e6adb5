// The token counter `ember pack validate` and `ember run --pack` use for briefing costs.
#include "cli/pack_tokens.h"
#include "util/error.h"

namespace ember::cli {

std::unique_ptr<contract::TokenCounter> make_token_counter(const std::string& model_path,
                                                           const std::string& tokenizer_path) {
  if (model_path.empty() && tokenizer_path.empty()) return nullptr;
  fail(model_path.empty() ? tokenizer_path : model_path,
       "counting briefing tokens needs the tokenizer module, which this build does not have yet");
}

}  // namespace ember::cli
