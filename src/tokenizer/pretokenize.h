#pragma once
// Pre-tokenizer splits of byte-level BPE families, with PCRE2 (UTF + UCP, JIT when the
// library has it), and the NFC normalizer (ICU). The regexes are the exact ones of the
// reference tokenizers; docs/tokenizer.md lists them.
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ember::tok {

// The split regex of a family: "gpt2", "llama-bpe", "qwen2".
const char* split_pattern_gpt2();
const char* split_pattern_llama_bpe();
const char* split_pattern_qwen2();
// llama.cpp's LLAMA_VOCAB_PRE_TYPE_BLOOM (also gpt3-finnish, poro-chat): an optional space and
// a run of anything but whitespace and the listed punctuation ("(", "|", ")" included, as the
// character class in llama-vocab.cpp reads).
const char* split_pattern_bloom();

// A compiled split regex. split() is const and thread-safe.
class SplitRegex {
 public:
  explicit SplitRegex(const std::string& pattern);  // Error if PCRE2 rejects it
  ~SplitRegex();
  SplitRegex(const SplitRegex&) = delete;
  SplitRegex& operator=(const SplitRegex&) = delete;
  // Pieces of `text` (valid UTF-8) in order: each match and each unmatched gap between
  // matches ("Isolated" behaviour). Appends (offset, length) pairs to `out`.
  void split(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;
  bool jit() const { return jit_; }

 private:
  void* code_ = nullptr;  // pcre2_code*
  bool jit_ = false;
};

// Unicode NFC of valid UTF-8 text (ICU). Text below U+0300 is returned unchanged without
// calling ICU (no character below U+0300 composes with a predecessor or decomposes).
std::string nfc(std::string_view text);

}  // namespace ember::tok
