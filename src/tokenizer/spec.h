#pragma once
// TokenizerSpec: everything that determines tokenization, in one plain struct that both
// loaders (GGUF metadata, tokenizer.json) produce and the implementations consume. The
// identity hash is computed from it, so two sources that yield equal specs yield equal
// identities (docs/identity.md, "Tokenizer identity").
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace ember::tok {

enum class ModelKind { Bpe, Spm };
// Pre-tokenizer split of a byte-level BPE tokenizer (docs/tokenizer.md lists the regexes).
enum class PreKind { Gpt2, LlamaBpe, Qwen2, EmberBytes, Bloom };
enum class NormalizerKind { None, Nfc };

const char* pre_kind_name(PreKind k);  // "gpt2", "llama-bpe", "qwen2", "ember-bytes", "bloom"

struct TokenizerSpec {
  std::string source;  // file name for error messages
  ModelKind model = ModelKind::Bpe;
  PreKind pre = PreKind::Gpt2;  // BPE only
  NormalizerKind normalizer = NormalizerKind::None;
  bool ignore_merges = false;  // BPE: a pre-token found whole in the vocab skips merging

  std::vector<std::string> tokens;  // [n_vocab] id -> stored string
  std::vector<TokenType> types;     // [n_vocab]
  std::vector<float> scores;        // [n_vocab] SPM only; empty for BPE
  std::vector<std::pair<std::string, std::string>> merges;  // BPE, in rank order

  std::optional<int32_t> bos, eos, unk;
  std::vector<int32_t> extra_eog;  // eot/eom ids from metadata (besides eos)
  bool add_bos = false;
  bool add_space_prefix = true;  // SPM only
};

// Checks internal consistency (sizes, ids in range); throws Error naming spec.source.
void validate_spec(const TokenizerSpec& spec);
// Hex SHA-256 over the canonical form described in docs/identity.md.
std::string spec_identity(const TokenizerSpec& spec);
// Builds the implementation (validates first).
std::unique_ptr<Tokenizer> build_tokenizer(const TokenizerSpec& spec);

// Loaders, exposed for tests and conversion.
TokenizerSpec spec_from_json_file(const std::string& path);
// The same from text in memory; config_text is tokenizer_config.json's text (or null), and
// path / config_path name them in errors.
TokenizerSpec spec_from_json_text(std::string_view text, const std::string& path,
                                  const std::string* config_text, const std::string& config_path);
TokenizerSpec spec_from_gguf_metadata(
    const std::vector<std::pair<std::string, gguf::Value>>& metadata, std::string_view where);
// The tokenizer.ggml.* entries a GGUF file needs to reproduce the spec (llama.cpp keys).
// Throws Error when the spec cannot be expressed in GGUF (e.g. qwen2 split without NFC).
std::vector<std::pair<std::string, gguf::Value>> spec_to_gguf_metadata(const TokenizerSpec& spec);

}  // namespace ember::tok
