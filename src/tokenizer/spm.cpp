// SentencePiece-style tokenizer (GGUF tokenizer.ggml.model = "llama"): text -> " " prefix
// (add_space_prefix) -> spaces as "▁" -> UTF-8 characters -> greedy bigram merges by score
// (highest first, leftmost on ties) while the merged string is a piece -> characters left
// without a piece fall back to their bytes "<0xNN>" (or the unknown token).
// This is the SentencePiece BPE segmentation as llama.cpp runs it for llama-family GGUFs.
#include <algorithm>
#include <cstdio>

#include "tokenizer/flat_map.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace ember::tok {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581 "▁"

class SpmTokenizer final : public TokenizerBase {
 public:
  explicit SpmTokenizer(const TokenizerSpec& s);
  std::string token_bytes(int32_t id) const override { return bytes_[check_id(id)]; }
  std::string kind() const override { return "spm"; }

 protected:
  void encode_fragment(std::string_view text, bool after_special, std::vector<int32_t>& out) const override;
  void finish_decode(std::span<const int32_t> ids, std::string& text) const override;

 private:
  std::vector<float> scores_;
  std::vector<std::string> bytes_;  // [n_vocab] what each token contributes to decoded text
  StringIndex piece_id_;             // tokens_ of normal + user-defined pieces -> id
  std::array<int32_t, 256> byte_tok_;                        // "<0xNN>" ids, -1 if absent
  std::optional<int32_t> unk_;
  bool add_space_prefix_;
};

SpmTokenizer::SpmTokenizer(const TokenizerSpec& s)
    : TokenizerBase(s), scores_(s.scores), unk_(s.unk), add_space_prefix_(s.add_space_prefix) {
  const size_t n = tokens_.size();
  bytes_.resize(n);
  byte_tok_.fill(-1);
  piece_id_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string& t = tokens_[i];
    switch (types_[i]) {
      case TokenType::Normal: {
        std::string b;
        for (size_t k = 0; k < t.size();) {
          if (t.compare(k, kSpace.size(), kSpace) == 0) {
            b.push_back(' ');
            k += kSpace.size();
          } else {
            b.push_back(t[k++]);
          }
        }
        bytes_[i] = std::move(b);
        piece_id_.insert(tokens_, static_cast<int32_t>(i));
        break;
      }
      case TokenType::UserDefined:
        bytes_[i] = t;
        piece_id_.insert(tokens_, static_cast<int32_t>(i));
        break;
      case TokenType::Byte: {
        unsigned v = 0;
        char tail = 0;
        if (t.size() != 6 || std::sscanf(t.c_str(), "<0x%2X>%c", &v, &tail) != 1)
          fail_field(source_, "tokens[" + std::to_string(i) + "]", "a byte token \"<0xNN>\"", "\"" + t + "\"");
        bytes_[i] = std::string(1, static_cast<char>(v));
        if (byte_tok_[v] < 0) byte_tok_[v] = static_cast<int32_t>(i);
        break;
      }
      case TokenType::Unknown:
        bytes_[i] = "\xE2\x96\x85";  // U+2585, as llama.cpp renders the unknown token
        break;
      case TokenType::Control:
      case TokenType::Unused:
        break;  // contribute nothing to text
    }
  }
}

void SpmTokenizer::encode_fragment(std::string_view text, bool after_special, std::vector<int32_t>& out) const {
  if (const size_t bad = utf8_invalid_offset(text); bad != std::string_view::npos)
    fail_field("tokenizer input", "text", "valid UTF-8", "an invalid byte at fragment offset " + std::to_string(bad));
  std::string s;
  s.reserve(text.size() * 3 / 2 + 4);
  if (add_space_prefix_ && after_special) s += kSpace;
  for (char c : text) {
    if (c == ' ')
      s += kSpace;
    else
      s.push_back(c);
  }
  // Symbols: [start, start + len) spans of s, in a linked list.
  struct Sym {
    size_t start, len;
    int32_t prev, next;
  };
  std::vector<Sym> sym;
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_seq_len(s, i);  // valid: checked above, and "▁" is valid
    sym.push_back({i, n, static_cast<int32_t>(sym.size()) - 1, static_cast<int32_t>(sym.size()) + 1});
    i += n;
  }
  if (sym.empty()) return;
  sym.back().next = -1;
  struct Bigram {
    float score;
    int32_t left, right;
    size_t len;  // merged length when pushed: a stale entry no longer matches
  };
  const auto worse = [](const Bigram& a, const Bigram& b) {
    return a.score != b.score ? a.score < b.score : a.left > b.left;
  };
  std::vector<Bigram> heap;
  const auto try_add = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const Sym& a = sym[static_cast<size_t>(l)];
    const Sym& b = sym[static_cast<size_t>(r)];
    const int32_t id = piece_id_.find(tokens_, std::string_view(s).substr(a.start, a.len + b.len));
    if (id < 0) return;
    heap.push_back({scores_[static_cast<size_t>(id)], l, r, a.len + b.len});
    std::push_heap(heap.begin(), heap.end(), worse);
  };
  for (size_t i = 1; i < sym.size(); ++i) try_add(static_cast<int32_t>(i) - 1, static_cast<int32_t>(i));
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), worse);
    const Bigram bg = heap.back();
    heap.pop_back();
    Sym& l = sym[static_cast<size_t>(bg.left)];
    Sym& r = sym[static_cast<size_t>(bg.right)];
    if (l.len == 0 || r.len == 0 || l.next != bg.right || l.len + r.len != bg.len) continue;  // stale
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[static_cast<size_t>(r.next)].prev = bg.left;
    try_add(l.prev, bg.left);
    try_add(bg.left, l.next);
  }
  for (int32_t i = 0; i >= 0; i = sym[static_cast<size_t>(i)].next) {
    const std::string_view piece = std::string_view(s).substr(sym[static_cast<size_t>(i)].start, sym[static_cast<size_t>(i)].len);
    if (const int32_t id = piece_id_.find(tokens_, piece); id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char c : piece) {  // byte fallback
      const int32_t b = byte_tok_[static_cast<uint8_t>(c)];
      if (b >= 0) {
        out.push_back(b);
      } else if (unk_) {
        out.push_back(*unk_);
        break;  // one unknown token per character
      } else {
        fail_field(source_, "vocabulary", "a piece, a byte token or an unknown token for every character",
                   "none for \"" + std::string(piece) + "\"");
      }
    }
  }
}

void SpmTokenizer::finish_decode(std::span<const int32_t> ids, std::string& text) const {
  // The encoder adds one space at the start of the text; drop it again when the first token
  // that contributes text is a normal piece starting with a space.
  if (!add_space_prefix_) return;
  for (int32_t id : ids) {
    const auto i = static_cast<size_t>(id);
    if (bytes_[i].empty()) continue;
    if (types_[i] == TokenType::Normal && bytes_[i][0] == ' ') text.erase(0, 1);  // it starts at 0
    return;
  }
}

}  // namespace

std::unique_ptr<Tokenizer> make_spm(const TokenizerSpec& spec) { return std::make_unique<SpmTokenizer>(spec); }

}  // namespace ember::tok
