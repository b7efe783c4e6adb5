#include "gguf/synth_vocab.h"

#include <algorithm>
#include <iterator>

#include "gguf/writer.h"
#include "util/error.h"

namespace ember::gguf {
namespace {

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xc0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3f));
  } else {
    s += char(0xe0 | (cp >> 12));
    s += char(0x80 | ((cp >> 6) & 0x3f));
    s += char(0x80 | (cp & 0x3f));
  }
  return s;
}

// Merges of common English pairs, in rank order. Each result is a token (ids 256...); a merge
// may only use tokens that exist before it. "Ġ" is the byte-level spelling of a space.
const char* const kMerges[][2] = {
    {"Ġ", "t"}, {"h", "e"}, {"Ġ", "a"}, {"i", "n"}, {"Ġt", "he"}, {"e", "r"},
    {"o", "n"}, {"Ġ", "s"}, {"e", "d"}, {"Ġ", "w"}, {"a", "n"},  {"Ġ", "o"},
    {"r", "e"}, {"n", "d"}, {"Ġ", "b"}, {"o", "u"},
};

}  // namespace

std::string gpt2_byte_token(uint8_t b) {
  // Bytes that are printable and not space keep their own code point; the other 68 bytes map,
  // in increasing order, to U+0100, U+0101, ...
  auto printable = [](uint32_t c) {
    return (c >= 0x21 && c <= 0x7e) || (c >= 0xa1 && c <= 0xac) || (c >= 0xae && c <= 0xff);
  };
  if (printable(b)) return utf8(b);
  uint32_t n = 0;
  for (uint32_t c = 0; c < b; ++c)
    if (!printable(c)) ++n;
  return utf8(0x100 + n);
}

SynthVocab synth_vocab(int64_t vocab_size) {
  if (vocab_size < kSynthMinVocab)
    fail_field("synth", "--vocab",
               ">= " + std::to_string(kSynthMinVocab) + " (256 byte tokens + <|bos|> + <|eos|>)",
               std::to_string(vocab_size));
  if (vocab_size > int64_t(INT32_MAX))
    fail_field("synth", "--vocab", "<= 2^31-1", std::to_string(vocab_size));
  SynthVocab v;
  v.tokens.reserve(size_t(vocab_size));
  for (int b = 0; b < 256; ++b) v.tokens.push_back(gpt2_byte_token(uint8_t(b)));
  v.token_types.assign(256, 1);
  const int64_t n_merges = std::min<int64_t>(std::size(kMerges), vocab_size - kSynthMinVocab);
  for (int64_t m = 0; m < n_merges; ++m) {
    v.merges.push_back(std::string(kMerges[m][0]) + " " + kMerges[m][1]);
    v.tokens.push_back(std::string(kMerges[m][0]) + kMerges[m][1]);
    v.token_types.push_back(1);
  }
  v.bos = int32_t(v.tokens.size());
  v.tokens.push_back("<|bos|>");
  v.eos = int32_t(v.tokens.size());
  v.tokens.push_back("<|eos|>");
  v.token_types.push_back(3);
  v.token_types.push_back(3);
  for (int64_t r = 0; int64_t(v.tokens.size()) < vocab_size; ++r) {
    v.tokens.push_back("<|reserved_" + std::to_string(r) + "|>");
    v.token_types.push_back(3);
  }
  return v;
}

void write_synth_tokenizer(GgufWriter& w, int64_t vocab_size, const std::string& pre) {
  if (pre != "bloom" && pre != "ember-bytes")
    fail_field("synth", "--pre-tokenizer", "bloom or ember-bytes", "'" + pre + "'");
  const SynthVocab v = synth_vocab(vocab_size);
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", pre);
  w.set_string_array("tokenizer.ggml.tokens", v.tokens);
  w.set_i32_array("tokenizer.ggml.token_type", v.token_types);
  w.set_string_array("tokenizer.ggml.merges", v.merges);
  w.set_u32("tokenizer.ggml.bos_token_id", uint32_t(v.bos));
  w.set_u32("tokenizer.ggml.eos_token_id", uint32_t(v.eos));
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_bool("tokenizer.ggml.add_eos_token", false);
}

}  // namespace ember::gguf
