#pragma once
// The built-in byte-level tokenizer of ember's synthetic models (docs/formats/gguf.md,
// "ember synthetic models"): ids 0..255 are the 256 bytes in GPT-2's byte-to-unicode
// spelling, then a few BPE merge results, then <|bos|>, <|eos|>, then <|reserved_N|> control
// tokens up to the vocabulary size. Stored as tokenizer.ggml.model "gpt2", pre "bloom" (or
// "ember-bytes", the name written before llama.cpp compatibility; docs/formats/gguf.md).
#include <cstdint>
#include <string>
#include <vector>

namespace ember::gguf {

class GgufWriter;

inline constexpr int64_t kSynthMinVocab = 258;  // 256 bytes + <|bos|> + <|eos|>

// GPT-2's bytes_to_unicode(): the printable string (UTF-8) that stands for byte b.
std::string gpt2_byte_token(uint8_t b);

struct SynthVocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> token_types;  // 1 normal, 3 control (llama.cpp's LLAMA_TOKEN_TYPE_*)
  std::vector<std::string> merges;   // "left right", in rank order
  int32_t bos = 0, eos = 0;
};

// vocab_size >= kSynthMinVocab (Error otherwise).
SynthVocab synth_vocab(int64_t vocab_size);

// Writes the tokenizer.ggml.* keys of synth_vocab(vocab_size), with tokenizer.ggml.pre = `pre`:
// "bloom" (what `ember model synth` writes by default: llama.cpp's BLOOM split, which llama.cpp
// loads) or "ember-bytes" (no split; llama.cpp refuses the name). Error for anything else.
void write_synth_tokenizer(GgufWriter& w, int64_t vocab_size, const std::string& pre = "ember-bytes");

}  // namespace ember::gguf
