#pragma once
// Tokenizers that match the reference ones token for token: byte-level BPE (Llama 3
// "llama-bpe", Qwen2/2.5/3 "qwen2", plain GPT-2, ember's synthetic "ember-bytes") and
// SentencePiece-style ("llama" model in GGUF: scores, byte fallback, leading "▁").
// Sources: GGUF metadata (tokenizer.ggml.*) or a Hugging Face tokenizer.json. Behaviour,
// exceptions to byte-exact round trips and the identity hash: docs/tokenizer.md and
// docs/identity.md ("Tokenizer identity").
//
// Thread-safety: a Tokenizer is immutable after construction; every const method may be
// called from many threads at once.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gguf/gguf_file.h"

namespace ember::tok {

// Per-token type, numbered as GGUF's tokenizer.ggml.token_type (llama.cpp's convention).
enum class TokenType : int32_t {
  Normal = 1,
  Unknown = 2,
  Control = 3,      // special tokens (BOS, EOS, <|im_start|>): matched in text when parse_special
  UserDefined = 4,  // added non-special tokens (<think>): always matched in text
  Unused = 5,
  Byte = 6,  // SentencePiece byte fallback "<0xNN>"
};

class Tokenizer {
 public:
  // From GGUF metadata. Throws Error naming the file and the field on anything unsupported.
  static std::unique_ptr<Tokenizer> from_gguf(const gguf::GgufFile& file);
  // Same, from metadata entries already in memory (`where` names them in errors).
  static std::unique_ptr<Tokenizer> from_gguf_metadata(
      const std::vector<std::pair<std::string, gguf::Value>>& metadata, std::string_view where);
  // From a Hugging Face tokenizer.json, plus tokenizer_config.json beside it if present
  // (add_bos_token, bos_token, eos_token).
  static std::unique_ptr<Tokenizer> from_json_file(const std::string& path);
  virtual ~Tokenizer();

  // Encodes text. add_bos: prepend BOS (callers pass add_bos_default() unless told otherwise;
  // ignored when the tokenizer has no BOS). parse_special: control tokens written in the
  // text become their ids; user-defined (added, non-special) tokens are matched either way.
  // Text that is not valid UTF-8 throws Error with the byte offset, except for the
  // "ember-bytes" tokenizer, which encodes any byte string.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_bos,
                                      bool parse_special = true) const = 0;
  // encode(text, add_bos, true), except that the first plain_bytes bytes are plain text: a
  // control token written there (a capability pack's "</s><s>") is encoded as its characters,
  // never as its id. One text, so tokenization across the boundary is that of encode().
  virtual std::vector<int32_t> encode_plain_prefix(std::string_view text, size_t plain_bytes,
                                                   bool add_bos) const = 0;
  // Byte-exact decode: the concatenation of token_bytes(), except that a SentencePiece
  // tokenizer drops the one leading space its encoder adds (docs/tokenizer.md). Ids out of
  // range throw Error.
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
  // The bytes one token contributes to generated text (control tokens of SentencePiece
  // models contribute nothing; byte-level BPE control tokens contribute their text).
  virtual std::string token_bytes(int32_t id) const = 0;
  // The vocabulary string as stored ("Ġworld", "▁Once", "<0x0A>", "<|im_start|>").
  virtual std::string piece(int32_t id) const = 0;
  virtual TokenType token_type(int32_t id) const = 0;
  virtual int32_t n_vocab() const = 0;
  virtual std::optional<int32_t> bos() const = 0;
  virtual std::optional<int32_t> eos() const = 0;
  virtual bool add_bos_default() const = 0;
  // End of generation: eos, eot/eom ids from metadata, and the chat end tokens present as
  // control tokens (<|im_end|>, <|eot_id|>, <|endoftext|>, ...).
  virtual bool is_eog(int32_t id) const = 0;
  // Hex SHA-256 over what determines tokenization; docs/identity.md.
  virtual const std::string& identity() const = 0;
  // "bpe:llama-bpe", "bpe:qwen2", "bpe:gpt2", "bpe:ember-bytes" or "spm".
  virtual std::string kind() const = 0;
};

// Streaming decode of generated ids: push() returns only complete UTF-8 and holds back a
// sequence split across tokens (at most 3 bytes). Bytes that can never become valid UTF-8
// come out as U+FFFD; flush() releases a held-back tail (as U+FFFD) at the end of a stream.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer) : tok_(tokenizer) {}
  std::string push(int32_t id);
  std::string flush();

 private:
  const Tokenizer& tok_;
  std::string pending_;  // an incomplete UTF-8 prefix, < 4 bytes
};

}  // namespace ember::tok
