// The token counter `ember pack validate` and `ember run --pack` use for briefing costs.
#include "cli/pack_tokens.h"

#include <cstdio>

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

std::vector<int32_t> apply_pack(const std::string& pack_path, const std::string& allow_path,
                                const tok::Tokenizer& tokenizer, const std::string& prompt,
                                bool add_bos) {
  if (allow_path.empty())
    fail_field("--pack", "--allow", "the host's tool allowlist (a pack never brings its own tools)", "none");
  const contract::TokenCounter count = [&tokenizer](std::string_view text) {
    return tokenizer.encode(text, false, false).size();
  };
  const contract::PackReport r = contract::load_validated_pack(
      pack_path, contract::ToolAllowlist::load(allow_path), contract::PackLimits{}, &count);
  std::string tools;
  for (const auto& t : r.tools) tools += (tools.empty() ? "" : ", ") + t;
  std::fprintf(stderr, "ember: capability pack %s: briefing %zu characters, %zu tokens; tools: %s\n",
               r.pack["id"].get<std::string>().c_str(), r.briefing_chars, *r.briefing_tokens,
               tools.empty() ? "none" : tools.c_str());
  const std::string text = contract::inject_briefing(r.briefing, prompt);
  // Defect 6 (issue 12): the whole text used to be encoded with special-token parsing, so a
  // briefing's "</s><s>" became EOS/BOS. Everything before the prompt is plain text.
  return tokenizer.encode_plain_prefix(text, text.size() - prompt.size(), add_bos);
}

}  // namespace ember::cli
