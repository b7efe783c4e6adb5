// Tokenizer identity: equal for a tokenizer.json and a GGUF built from it (through the real
// GGUF writer and reader), different when anything that changes tokenization changes; and
// the synthetic "ember-bytes" tokenizer round-trips any byte string.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "gguf/gguf_file.h"
#include "gguf/synth_vocab.h"
#include "gguf/writer.h"
#include "support/test_support.h"
#include "tokenizer/spec.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "tokenizer_test_util.h"
#include "util/byte_io.h"
#include "util/error.h"

namespace ember::test {
namespace {

gguf::GgufFile to_gguf_file(const std::vector<std::pair<std::string, gguf::Value>>& md, const std::string& name) {
  gguf::GgufWriter w;
  for (const auto& [k, v] : md) w.set(k, v);
  auto bytes = std::make_shared<std::vector<uint8_t>>();
  BufferSink sink(*bytes);
  w.write(sink);
  return gguf::GgufFile::parse(bytes, name);
}

TEST(TokenizerIdentity, Qwen3JsonEqualsGguf) {
  const tok::TokenizerSpec& spec = qwen3_spec();
  const auto file = to_gguf_file(tok::spec_to_gguf_metadata(spec), "qwen3-from-json.gguf");
  const auto from_gguf = tok::Tokenizer::from_gguf(file);
  const auto& from_json = qwen3_tokenizer();
  EXPECT_EQ(from_gguf->identity(), from_json.identity());
  EXPECT_EQ(from_gguf->kind(), "bpe:qwen2");
  EXPECT_EQ(from_gguf->n_vocab(), from_json.n_vocab());
  // Same ids on the reference vectors (NFC included: GGUF qwen2 implies it).
  std::ifstream in(shared_path("tokenizer/qwen3/vectors.jsonl"));
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    const auto v = nlohmann::json::parse(line);
    EXPECT_EQ(from_gguf->encode(v["text"].get<std::string>(), false), v["ids"].get<std::vector<int32_t>>());
    ++n;
  }
  EXPECT_EQ(n, 95);
}

TEST(TokenizerIdentity, ChangesWithWhatDeterminesTokenization) {
  const tok::TokenizerSpec& base = qwen3_spec();
  const std::string id0 = tok::spec_identity(base);
  EXPECT_EQ(id0, qwen3_tokenizer().identity());
  auto changed = [&](auto&& edit) {
    tok::TokenizerSpec s = base;
    edit(s);
    return tok::spec_identity(s);
  };
  EXPECT_NE(id0, changed([](auto& s) { std::swap(s.merges[10], s.merges[11]); }));
  EXPECT_NE(id0, changed([](auto& s) { s.tokens[500] += "x"; }));
  EXPECT_NE(id0, changed([](auto& s) { s.pre = tok::PreKind::LlamaBpe; }));
  EXPECT_NE(id0, changed([](auto& s) { s.normalizer = tok::NormalizerKind::None; }));
  EXPECT_NE(id0, changed([](auto& s) { s.types[151668] = tok::TokenType::Control; }));
  EXPECT_NE(id0, changed([](auto& s) { s.add_bos = true; s.bos = 151643; }));
  EXPECT_NE(id0, changed([](auto& s) { s.ignore_merges = true; }));
  // Not part of it: EOS, and trailing unused padding of the vocabulary.
  EXPECT_EQ(id0, changed([](auto& s) { s.eos = 151645; }));
  EXPECT_EQ(id0, changed([](auto& s) {
    s.tokens.push_back("[PAD151669]");
    s.types.push_back(tok::TokenType::Unused);
  }));
}

// The synthetic models' tokenizer (written by `ember model synth`): 256 byte-level strings as
// ids 0..255, then special tokens; no merges, no split.
std::vector<std::pair<std::string, gguf::Value>> ember_bytes_metadata() {
  gguf::GgufWriter w;
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(tok::ByteLevelMap::get().byte_to_utf8[static_cast<size_t>(b)]);
    types.push_back(1);
  }
  for (const char* s : {"<|bos|>", "<|eos|>", "<|reserved_0|>"}) {
    tokens.push_back(s);
    types.push_back(3);
  }
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "ember-bytes");
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_i32_array("tokenizer.ggml.token_type", types);
  w.set_u32("tokenizer.ggml.bos_token_id", 256);
  w.set_u32("tokenizer.ggml.eos_token_id", 257);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  return w.metadata();
}

TEST(TokenizerEmberBytes, RoundTripsAnyBytes) {
  const auto file = to_gguf_file(ember_bytes_metadata(), "ember-bytes.gguf");
  const auto t = tok::Tokenizer::from_gguf(file);
  EXPECT_EQ(t->kind(), "bpe:ember-bytes");
  EXPECT_TRUE(t->add_bos_default());
  EXPECT_TRUE(t->is_eog(257));
  std::mt19937 rng(7);
  for (int len : {0, 1, 2, 7, 100, 4096}) {
    std::string s(static_cast<size_t>(len), '\0');
    for (char& c : s) c = static_cast<char>(rng() & 0xFF);
    const auto ids = t->encode(s, true, /*parse_special=*/false);
    ASSERT_EQ(ids.size(), s.size() + 1);
    EXPECT_EQ(ids[0], 256);
    for (size_t i = 0; i < s.size(); ++i) EXPECT_EQ(t->decode(std::span(ids).subspan(i + 1, 1)), s.substr(i, 1));
    EXPECT_EQ(t->decode(std::span(ids).subspan(1)), s);
  }
  const auto ids = t->encode("a<|eos|>\xff", false, true);
  EXPECT_EQ(ids, (std::vector<int32_t>{97, 257, 255}));
  EXPECT_EQ(t->decode(ids), "a<|eos|>\xff");
}

// The tokenizer `ember model synth` writes (gguf::write_synth_tokenizer, with merges): any byte
// string round-trips, BOS is added, merges apply.
TEST(TokenizerEmberBytes, SynthWriterRoundTrips) {
  for (int64_t vocab : {258, 300, 1024}) {
    gguf::GgufWriter w;
    gguf::write_synth_tokenizer(w, vocab, "ember-bytes");
    const auto t = tok::Tokenizer::from_gguf(to_gguf_file(w.metadata(), "synth.gguf"));
    EXPECT_EQ(t->kind(), "bpe:ember-bytes");
    EXPECT_EQ(t->n_vocab(), vocab);
    ASSERT_TRUE(t->bos().has_value());
    EXPECT_TRUE(t->add_bos_default());
    EXPECT_TRUE(t->is_eog(*t->eos()));
    std::mt19937 rng(static_cast<uint32_t>(vocab));
    for (int len : {0, 1, 3, 64, 2000}) {
      std::string s(static_cast<size_t>(len), '\0');
      for (char& c : s) c = static_cast<char>(rng() & 0xFF);
      const auto ids = t->encode(s, t->add_bos_default(), /*parse_special=*/false);
      ASSERT_FALSE(ids.empty());
      EXPECT_EQ(ids[0], *t->bos());
      EXPECT_EQ(t->decode(std::span(ids).subspan(1)), s);
    }
    const std::string text = "the other one, and then the end";
    const auto ids = t->encode(text, false);
    EXPECT_EQ(t->decode(ids), text);
    if (vocab >= 300) EXPECT_LT(ids.size(), text.size());  // merges (" t", "he", " the", ...) applied
    else EXPECT_EQ(ids.size(), text.size());             // 258: no room for merges
  }
}

TEST(TokenizerGguf, ClearErrors) {
  auto md = ember_bytes_metadata();
  auto set = [&](const std::string& key, gguf::Value v) {
    for (auto& [k, x] : md)
      if (k == key) x = v;
  };
  set("tokenizer.ggml.model", gguf::Value::of_string("bert"));
  try {
    tok::Tokenizer::from_gguf_metadata(md, "m.gguf");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("m.gguf: tokenizer.ggml.model"), std::string::npos) << e.what();
  }
  md = ember_bytes_metadata();
  set("tokenizer.ggml.pre", gguf::Value::of_string("falcon"));
  EXPECT_THROW(tok::Tokenizer::from_gguf_metadata(md, "m.gguf"), Error);
  md = ember_bytes_metadata();
  set("tokenizer.ggml.bos_token_id", gguf::Value::of_u32(9999));
  EXPECT_THROW(tok::Tokenizer::from_gguf_metadata(md, "m.gguf"), Error);
  md = ember_bytes_metadata();
  set("tokenizer.ggml.token_type", gguf::Value::of_array(gguf::ValueType::INT32, {gguf::Value::of_i32(1)}));
  EXPECT_THROW(tok::Tokenizer::from_gguf_metadata(md, "m.gguf"), Error);
  EXPECT_THROW(tok::Tokenizer::from_gguf_metadata({}, "m.gguf"), Error);
}

// `ember model synth` writes pre "bloom" (llama.cpp's LLAMA_VOCAB_PRE_TYPE_BLOOM split) so that
// llama.cpp loads the file; for the synthetic vocabulary (every merge inside a run of letters,
// or a space followed by a letter, which the BLOOM split never separates) it gives exactly the
// ids of "ember-bytes" (no split) on valid UTF-8 text.
TEST(TokenizerEmberBytes, BloomSplitGivesTheSameIdsOnTheSynthVocabulary) {
  for (int64_t vocab : {258, 300, 1024}) {
    gguf::GgufWriter wb, we;
    gguf::write_synth_tokenizer(wb, vocab, "bloom");
    gguf::write_synth_tokenizer(we, vocab, "ember-bytes");
    const auto bloom = tok::Tokenizer::from_gguf(to_gguf_file(wb.metadata(), "b.gguf"));
    const auto bytes = tok::Tokenizer::from_gguf(to_gguf_file(we.metadata(), "e.gguf"));
    EXPECT_EQ(bloom->kind(), "bpe:bloom");
    EXPECT_NE(bloom->identity(), bytes->identity());
    const char* alphabet[] = {"a", "b", "d", "e", "h", "i", "n", "o", "r", "s", "t", "u", "w", "T", " ", " ",
                              "  ", "\n", "\t", ".", ",", "!", "?", "'", "'re", "(", ")", "|", "1", "-",
                              "\xe2\x80\xa6", "\xe3\x80\x82", "\xc3\xa9", "\xd8\x8c", "<|eos|>"};
    std::mt19937 rng(static_cast<uint32_t>(vocab));
    for (int n = 0; n < 300; ++n) {
      std::string s;
      for (int k = int(rng() % 40); k > 0; --k) s += alphabet[rng() % std::size(alphabet)];
      for (bool special : {false, true})
        ASSERT_EQ(bloom->encode(s, true, special), bytes->encode(s, true, special)) << s;
    }
    for (const char* s : {"the weather there", "'red and 'there", "in the  end\n\nthe ou", "x  the"})
      EXPECT_EQ(bloom->encode(s, true), bytes->encode(s, true)) << s;
  }
}

}  // namespace
}  // namespace ember::test
