#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "tokenizer/spec.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"
#include "util/error.h"
#include "util/sha256.h"

namespace ember::tok {

Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::GgufFile& file) {
  return build_tokenizer(spec_from_gguf_metadata(file.metadata(), file.path()));
}

std::unique_ptr<Tokenizer> Tokenizer::from_gguf_metadata(
    const std::vector<std::pair<std::string, gguf::Value>>& metadata, std::string_view where) {
  return build_tokenizer(spec_from_gguf_metadata(metadata, where));
}

std::unique_ptr<Tokenizer> Tokenizer::from_json_file(const std::string& path) {
  return build_tokenizer(spec_from_json_file(path));
}

const char* pre_kind_name(PreKind k) {
  switch (k) {
    case PreKind::Gpt2: return "gpt2";
    case PreKind::LlamaBpe: return "llama-bpe";
    case PreKind::Qwen2: return "qwen2";
    case PreKind::EmberBytes: return "ember-bytes";
    case PreKind::Bloom: return "bloom";
  }
  return "?";
}

void validate_spec(const TokenizerSpec& s) {
  const size_t n = s.tokens.size();
  if (n == 0) fail_field(s.source, "vocabulary", "at least one token", "none");
  if (n > (size_t(1) << 31) - 1) fail_field(s.source, "vocabulary", "< 2^31 tokens", std::to_string(n));
  if (s.types.size() != n)
    fail_field(s.source, "token types", std::to_string(n) + " entries", std::to_string(s.types.size()));
  if (s.model == ModelKind::Spm && s.scores.size() != n)
    fail_field(s.source, "scores", std::to_string(n) + " entries", std::to_string(s.scores.size()));
  const auto check = [&](const std::optional<int32_t>& id, const char* what) {
    if (id && (*id < 0 || static_cast<size_t>(*id) >= n))
      fail_field(s.source, what, "an id below " + std::to_string(n), std::to_string(*id));
  };
  check(s.bos, "bos token id");
  check(s.eos, "eos token id");
  check(s.unk, "unknown token id");
  for (int32_t id : s.extra_eog) check(id, "end-of-generation token id");
}

// Canonical form (docs/identity.md): a domain tag, then length-prefixed fields and u64s.
std::string spec_identity(const TokenizerSpec& s) {
  Sha256 h;
  h.update_field("ember-tokenizer-identity-v1");
  const bool spm = s.model == ModelKind::Spm;
  h.update_field(spm ? "spm" : std::string("bpe:") + pre_kind_name(s.pre));
  h.update_field(s.normalizer == NormalizerKind::Nfc ? "nfc" : "none");
  h.update_u64(spm ? 0 : s.ignore_merges);
  h.update_u64(s.add_bos);
  h.update_u64(spm ? s.add_space_prefix : 0);
  const auto id_or_none = [](const std::optional<int32_t>& id) {
    return id ? static_cast<uint64_t>(*id) : ~uint64_t(0);
  };
  h.update_u64(id_or_none(s.bos));
  h.update_u64(spm ? id_or_none(s.unk) : ~uint64_t(0));
  // Trailing unused tokens (vocabulary padding up to the embedding size) never appear in
  // encode output, so they do not count.
  size_t n = s.tokens.size();
  while (n > 0 && s.types[n - 1] == TokenType::Unused) --n;
  h.update_u64(n);
  for (size_t i = 0; i < n; ++i) {
    h.update_field(s.tokens[i]);
    TokenType t = s.types[i];
    // Byte-level BPE only distinguishes what the encoder treats differently.
    if (!spm && t != TokenType::Control && t != TokenType::UserDefined && t != TokenType::Unused)
      t = TokenType::Normal;
    h.update_u64(static_cast<uint64_t>(t));
    if (spm) {
      uint32_t bits;
      std::memcpy(&bits, &s.scores[i], 4);
      h.update_u64(bits);
    }
  }
  h.update_u64(spm ? 0 : s.merges.size());
  if (!spm) {
    for (const auto& [a, b] : s.merges) {
      h.update_field(a);
      h.update_field(b);
    }
  }
  return to_hex(h.finish());
}

std::unique_ptr<Tokenizer> build_tokenizer(const TokenizerSpec& spec) {
  validate_spec(spec);
  return spec.model == ModelKind::Spm ? make_spm(spec) : make_bpe(spec);
}

// ---- TokenizerBase ----

TokenizerBase::TokenizerBase(const TokenizerSpec& s)
    : source_(s.source), tokens_(s.tokens), types_(s.types), bos_(s.bos), eos_(s.eos),
      add_bos_(s.add_bos), identity_(spec_identity(s)) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const TokenType t = types_[i];
    if (t == TokenType::Control || t == TokenType::UserDefined)
      specials_.add(tokens_[i], static_cast<int32_t>(i), t == TokenType::Control);
  }
  specials_.finish();
  if (eos_) eog_.insert(*eos_);
  for (int32_t id : s.extra_eog) eog_.insert(id);
  // Chat end markers of the supported families, when present as control tokens.
  static const char* const kEndMarkers[] = {"<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|endoftext|>",
                                            "<|end_of_text|>", "<|end|>", "<end_of_turn>"};
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (types_[i] != TokenType::Control) continue;
    for (const char* m : kEndMarkers)
      if (tokens_[i] == m) eog_.insert(static_cast<int32_t>(i));
  }
}

size_t TokenizerBase::check_id(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokens_.size())
    fail_field(source_, "token id", "0.." + std::to_string(tokens_.size() - 1), std::to_string(id));
  return static_cast<size_t>(id);
}

std::vector<int32_t> TokenizerBase::encode_from(std::string_view text, bool add_bos, size_t special_from) const {
  if (text.size() > size_t(INT32_MAX))
    fail_field("tokenizer input", "text", "at most 2^31-1 bytes", std::to_string(text.size()) + " bytes");
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_bos && bos_) out.push_back(*bos_);
  bool after_special = true;
  for (const Fragment& f : specials_.split(text, special_from)) {
    if (f.id >= 0) {
      out.push_back(f.id);
      after_special = true;
    } else {
      encode_fragment(f.text, after_special, out);
      after_special = false;
    }
  }
  return out;
}

std::string TokenizerBase::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) out += token_bytes(id);
  finish_decode(ids, out);
  return out;
}

// ---- StreamDecoder ----

std::string StreamDecoder::push(int32_t id) {
  pending_ += tok_.token_bytes(id);
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    const size_t n = utf8_seq_len(pending_, i);
    if (n > 0) {
      out.append(pending_, i, n);
      i += n;
    } else if (utf8_incomplete_prefix(pending_, i)) {
      break;  // may complete with the next token
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD for a byte that can never start valid UTF-8 here
      ++i;
    }
  }
  pending_.erase(0, i);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  if (!pending_.empty()) out = "\xEF\xBF\xBD";
  pending_.clear();
  return out;
}

}  // namespace ember::tok
