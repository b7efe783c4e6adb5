#pragma once
// The shared part of both implementations: vocabulary, types, added-token matching, BOS/EOS,
// end-of-generation set, identity. Subclasses encode one raw fragment (text between added
// tokens) and say what bytes a token contributes.
#include <string>
#include <unordered_set>
#include <vector>

#include "tokenizer/spec.h"
#include "tokenizer/specials.h"
#include "tokenizer/tokenizer.h"

namespace ember::tok {

class TokenizerBase : public Tokenizer {
 public:
  explicit TokenizerBase(const TokenizerSpec& spec);

  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const override {
    return encode_from(text, add_bos, parse_special ? 0 : text.size());
  }
  std::vector<int32_t> encode_plain_prefix(std::string_view text, size_t plain_bytes,
                                           bool add_bos) const override {
    return encode_from(text, add_bos, plain_bytes);
  }
  std::string decode(std::span<const int32_t> ids) const override;
  std::string piece(int32_t id) const override { return tokens_[check_id(id)]; }
  TokenType token_type(int32_t id) const override { return types_[check_id(id)]; }
  int32_t n_vocab() const override { return static_cast<int32_t>(tokens_.size()); }
  std::optional<int32_t> bos() const override { return bos_; }
  std::optional<int32_t> eos() const override { return eos_; }
  bool add_bos_default() const override { return add_bos_; }
  bool is_eog(int32_t id) const override { return eog_.count(id) != 0; }
  const std::string& identity() const override { return identity_; }

 protected:
  // Control tokens matched from byte special_from on (SpecialMatcher::split).
  std::vector<int32_t> encode_from(std::string_view text, bool add_bos, size_t special_from) const;

  // Encodes raw text that holds no added token. `after_special`: the fragment starts the
  // text or follows an added token (SentencePiece adds its leading space there).
  virtual void encode_fragment(std::string_view text, bool after_special,
                               std::vector<int32_t>& out) const = 0;
  // decode() hook: SentencePiece drops the space its encoder added.
  virtual void finish_decode(std::span<const int32_t> ids, std::string& text) const {
    (void)ids;
    (void)text;
  }
  size_t check_id(int32_t id) const;  // Error if out of range

  std::string source_;
  std::vector<std::string> tokens_;
  std::vector<TokenType> types_;
  SpecialMatcher specials_;
  std::optional<int32_t> bos_, eos_;
  bool add_bos_;
  std::unordered_set<int32_t> eog_;
  std::string identity_;
};

std::unique_ptr<Tokenizer> make_bpe(const TokenizerSpec& spec);
std::unique_ptr<Tokenizer> make_spm(const TokenizerSpec& spec);

}  // namespace ember::tok
