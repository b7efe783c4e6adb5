// Byte-level BPE: the GPT-2 byte mapping, merges applied by rank (lowest first, leftmost on
// ties), optional ignore_merges (Llama 3), a family split regex and optional NFC.
//
// Everything runs on raw bytes and token ids: each vocabulary string is decoded from the
// byte-level alphabet once at load, so encode never builds "Ġ" strings. A pre-token's initial
// symbols are the ids of its single bytes; merges are looked up by (left id, right id).
#include <algorithm>
#include <memory>
#include <unordered_map>

#include "tokenizer/flat_map.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace ember::tok {
namespace {

struct MergeResult {
  int32_t rank;
  int32_t id;
};

// Working memory of one encode call, reused across its pre-tokens (no allocation per word).
struct Scratch {
  struct Sym {
    int32_t id, prev, next;  // prev/next: neighbour positions, -1 at the ends
  };
  struct Cand {
    int32_t rank, pos, left, right;  // right: position of the right symbol
  };
  std::vector<Sym> sym;
  std::vector<Cand> heap;
  // Pre-token -> its ids (offset, count into `ids`): a piece's BPE depends only on its bytes,
  // so repeats within one call reuse the first result. Keys point into the call's text.
  std::unordered_map<std::string_view, std::pair<uint32_t, uint32_t>> cache;
  std::vector<int32_t> ids;
};

class BpeTokenizer final : public TokenizerBase {
 public:
  explicit BpeTokenizer(const TokenizerSpec& s);
  std::string token_bytes(int32_t id) const override { return raw_[check_id(id)]; }
  std::string kind() const override { return std::string("bpe:") + pre_kind_name(pre_); }

 protected:
  void encode_fragment(std::string_view text, bool after_special, std::vector<int32_t>& out) const override;

 private:
  void encode_word(std::string_view word, Scratch& scratch, std::vector<int32_t>& out) const;
  void encode_cached(std::string_view word, Scratch& scratch, std::vector<int32_t>& out) const;
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  PreKind pre_;
  bool nfc_;
  bool ignore_merges_;
  std::unique_ptr<SplitRegex> split_;          // null for ember-bytes (no split)
  std::vector<std::string> raw_;               // [n_vocab] bytes each token stands for
  std::array<int32_t, 256> byte_id_;           // the single-byte token of each byte
  StringIndex whole_;                          // raw_ bytes -> id (ignore_merges only)
  PairMap<MergeResult> merges_;                // (left id, right id) -> rank, result
};

BpeTokenizer::BpeTokenizer(const TokenizerSpec& s)
    : TokenizerBase(s), pre_(s.pre), nfc_(s.normalizer == NormalizerKind::Nfc),
      ignore_merges_(s.ignore_merges) {
  switch (pre_) {
    case PreKind::Gpt2: split_ = std::make_unique<SplitRegex>(split_pattern_gpt2()); break;
    case PreKind::LlamaBpe: split_ = std::make_unique<SplitRegex>(split_pattern_llama_bpe()); break;
    case PreKind::Qwen2: split_ = std::make_unique<SplitRegex>(split_pattern_qwen2()); break;
    case PreKind::EmberBytes: break;
    case PreKind::Bloom: split_ = std::make_unique<SplitRegex>(split_pattern_bloom()); break;
  }
  const ByteLevelMap& bl = ByteLevelMap::get();
  const size_t n = tokens_.size();
  raw_.resize(n);
  // Token strings of the base vocabulary (not added tokens) by their byte-level form.
  StringIndex by_piece;
  by_piece.reserve(n);
  if (ignore_merges_) whole_.reserve(n);
  byte_id_.fill(-1);
  for (size_t i = 0; i < n; ++i) {
    const auto id = static_cast<int32_t>(i);
    const bool added = types_[i] == TokenType::Control || types_[i] == TokenType::UserDefined;
    bool mapped = false;
    if (!added) mapped = bl.decode(tokens_[i], raw_[i]);
    // Added tokens, and strings outside the byte-level alphabet, stand for their own bytes
    // (as the Hugging Face ByteLevel decoder does).
    if (!mapped) raw_[i] = tokens_[i];
    if (added || types_[i] == TokenType::Unused) continue;
    by_piece.insert(tokens_, id);  // first id wins on duplicates
    if (mapped) {
      if (ignore_merges_) whole_.insert(raw_, id);
      if (raw_[i].size() == 1 && byte_id_[static_cast<uint8_t>(raw_[i][0])] < 0)
        byte_id_[static_cast<uint8_t>(raw_[i][0])] = id;
    }
  }
  for (int b = 0; b < 256; ++b) {
    if (byte_id_[b] < 0)
      fail_field(source_, "vocabulary", "a byte-level token for every byte (byte-level BPE)",
                 "none for byte " + std::to_string(b) + " (\"" + bl.byte_to_utf8[b] + "\")");
  }
  merges_.reserve(s.merges.size());
  std::string joined;
  for (size_t r = 0; r < s.merges.size(); ++r) {
    const auto& [a, b] = s.merges[r];
    const int32_t ia = by_piece.find(tokens_, a), ib = by_piece.find(tokens_, b);
    joined.assign(a).append(b);
    const int32_t ij = by_piece.find(tokens_, joined);
    if (ia < 0 || ib < 0 || ij < 0) {
      const std::string missing = ia < 0 ? a : ib < 0 ? b : joined;
      fail_field(source_, "merges[" + std::to_string(r) + "]",
                 "tokens present in the vocabulary", "\"" + a + " " + b + "\" needs \"" + missing + "\"");
    }
    // The first (lowest-rank) occurrence of a pair wins, as in the reference.
    merges_.insert(pair_key(ia, ib), MergeResult{static_cast<int32_t>(r), ij});
  }
}

void BpeTokenizer::encode_fragment(std::string_view text, bool, std::vector<int32_t>& out) const {
  if (pre_ == PreKind::EmberBytes) {  // any bytes; no split, no normalization
    Scratch scratch;
    encode_word(text, scratch, out);
    return;
  }
  if (const size_t bad = utf8_invalid_offset(text); bad != std::string_view::npos)
    fail_field("tokenizer input", "text", "valid UTF-8",
               "an invalid byte 0x" + [&] {
                 static const char* hex = "0123456789abcdef";
                 const auto c = static_cast<uint8_t>(text[bad]);
                 return std::string{hex[c >> 4], hex[c & 15]};
               }() + " at fragment offset " + std::to_string(bad));
  std::string normalized;
  if (nfc_) {
    normalized = nfc(text);
    text = normalized;
  }
  std::vector<std::pair<size_t, size_t>> pieces;
  split_->split(text, pieces);
  Scratch scratch;
  for (const auto& [off, len] : pieces) encode_cached(text.substr(off, len), scratch, out);
}

void BpeTokenizer::encode_cached(std::string_view word, Scratch& scratch, std::vector<int32_t>& out) const {
  if (word.size() <= 1 || word.size() > 256) {  // trivial, or too long to be worth keeping
    encode_word(word, scratch, out);
    return;
  }
  const auto [it, fresh] = scratch.cache.try_emplace(word, 0, 0);
  if (fresh) {
    const size_t begin = out.size();
    encode_word(word, scratch, out);
    it->second = {static_cast<uint32_t>(scratch.ids.size()), static_cast<uint32_t>(out.size() - begin)};
    scratch.ids.insert(scratch.ids.end(), out.begin() + static_cast<std::ptrdiff_t>(begin), out.end());
    return;
  }
  const auto first = scratch.ids.begin() + it->second.first;
  out.insert(out.end(), first, first + it->second.second);
}

void BpeTokenizer::encode_word(std::string_view word, Scratch& scratch, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (word.size() == 1) {
    out.push_back(byte_id_[static_cast<uint8_t>(word[0])]);
    return;
  }
  if (ignore_merges_) {
    if (const int32_t id = whole_.find(raw_, word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  // Symbols in a doubly linked list over byte positions; a min-heap of candidate merges
  // ordered by (rank, position). Stale entries are skipped when popped.
  using Sym = Scratch::Sym;
  using Cand = Scratch::Cand;
  const auto n = static_cast<int32_t>(word.size());
  std::vector<Sym>& sym = scratch.sym;
  sym.resize(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i)
    sym[static_cast<size_t>(i)] = {byte_id_[static_cast<uint8_t>(word[static_cast<size_t>(i)])], i - 1,
                                   i + 1 < n ? i + 1 : -1};
  std::vector<Cand>& heap = scratch.heap;
  heap.clear();
  const auto later = [](const Cand& x, const Cand& y) {
    return x.rank != y.rank ? x.rank > y.rank : x.pos > y.pos;
  };
  const auto consider = [&](int32_t l) {
    if (l < 0) return;
    const int32_t r = sym[static_cast<size_t>(l)].next;
    if (r < 0) return;
    const MergeResult* m = merges_.find(pair_key(sym[static_cast<size_t>(l)].id, sym[static_cast<size_t>(r)].id));
    if (!m) return;
    heap.push_back({m->rank, l, sym[static_cast<size_t>(l)].id, r});
    std::push_heap(heap.begin(), heap.end(), later);
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Cand c = heap.back();
    heap.pop_back();
    Sym& l = sym[static_cast<size_t>(c.pos)];
    if (l.id != c.left || l.next != c.right) continue;  // stale
    Sym& r = sym[static_cast<size_t>(c.right)];
    const MergeResult* m = merges_.find(pair_key(l.id, r.id));
    if (!m || m->rank != c.rank) continue;
    l.id = m->id;
    l.next = r.next;
    if (r.next >= 0) sym[static_cast<size_t>(r.next)].prev = c.pos;
    r.id = -1;  // dead
    consider(l.prev);
    consider(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = sym[static_cast<size_t>(i)].next) out.push_back(sym[static_cast<size_t>(i)].id);
}

}  // namespace

std::unique_ptr<Tokenizer> make_bpe(const TokenizerSpec& spec) { return std::make_unique<BpeTokenizer>(spec); }

}  // namespace ember::tok
