// SentencePiece-style tokenizer of stories260K.gguf against llama.cpp's reference prompt ids,
// and round trips.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "gguf/gguf_file.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace ember::test {
namespace {

const tok::Tokenizer& stories() {
  static const auto t = [] {
    const auto file = gguf::GgufFile::open(shared_path("models/stories260K.gguf"));
    return tok::Tokenizer::from_gguf(file);
  }();
  return *t;
}

std::vector<int32_t> read_i32(const std::string& rel) {
  const auto bytes = read_bytes(shared_path(rel));
  std::vector<int32_t> v(bytes.size() / 4);
  if (!v.empty()) std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

struct Prompt {
  const char* file;
  const char* text;
};
const Prompt kPrompts[] = {
    {"models/reference/stories260K.p1.tokens.i32", "Once upon a time"},
    {"models/reference/stories260K.p2.tokens.i32", "Lily wanted to play with the big red ball, but her mom said"},
    {"models/reference/stories260K.p3.tokens.i32",
     "Tom and his dog went to the park. They saw a tall tree with a bird in it. The bird was singing a "
     "happy song. Tom wanted to"},
};

TEST(Spm, Stories260KMetadata) {
  const auto& t = stories();
  EXPECT_EQ(t.kind(), "spm");
  EXPECT_EQ(t.n_vocab(), 512);
  EXPECT_EQ(t.bos(), 1);
  EXPECT_EQ(t.eos(), 2);
  EXPECT_TRUE(t.add_bos_default());
  EXPECT_TRUE(t.is_eog(2));
  EXPECT_FALSE(t.is_eog(1));
  EXPECT_EQ(t.piece(1), "<s>");
  EXPECT_EQ(t.token_type(1), tok::TokenType::Control);
  EXPECT_EQ(t.identity().size(), 64u);
}

TEST(Spm, MatchesLlamaCppPromptIds) {
  const auto& t = stories();
  for (const Prompt& p : kPrompts) {
    auto all = read_i32(p.file);
    ASSERT_GT(all.size(), 48u) << p.file;
    const std::vector<int32_t> want(all.begin(), all.end() - 48);
    EXPECT_EQ(t.encode(p.text, t.add_bos_default()), want) << p.text;
    EXPECT_EQ(t.decode(want), p.text);
  }
}

TEST(Spm, GreedyContinuationDecodes) {
  // The README's greedy continuation of "Once upon a time", decoded from the reference ids.
  const auto& t = stories();
  auto all = read_i32(kPrompts[0].file);
  ASSERT_GT(all.size(), 48u);
  tok::StreamDecoder sd(t);
  std::string text;
  for (size_t i = all.size() - 48; i < all.size(); ++i) text += sd.push(all[i]);
  text += sd.flush();
  const std::string want =
      ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, "
      "red ball. She wanted to play with it,";
  EXPECT_EQ(text.substr(0, want.size()), want);
}

TEST(Spm, RoundTripsWithByteFallback) {
  const auto& t = stories();
  for (const std::string s :
       {"hello world", "  two leading spaces", "tabs\tand\nnewlines\n", "héllo wörld", "世界 🙂 مرحبا",
        "trailing space ", "", "x", "\x01\x7f control bytes"}) {
    const auto ids = t.encode(s, true);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids[0], 1);
    EXPECT_EQ(t.decode(ids), s) << s;
  }
  // Characters outside the 512-piece vocabulary go through <0xNN> byte tokens.
  const auto ids = t.encode("世", false);
  ASSERT_EQ(ids.size(), 4u);  // "▁" piece + 3 byte tokens
  EXPECT_EQ(t.piece(ids[1]), "<0xE4>");
  EXPECT_EQ(t.token_type(ids[1]), tok::TokenType::Byte);
}

TEST(Spm, SpecialTokensInText) {
  const auto& t = stories();
  const auto with = t.encode("a</s>b", false, true);
  EXPECT_NE(std::find(with.begin(), with.end(), 2), with.end());
  const auto without = t.encode("a</s>b", false, false);
  EXPECT_EQ(std::find(without.begin(), without.end(), 2), without.end());
  EXPECT_EQ(t.decode(without), "a</s>b");
}

TEST(Spm, InvalidUtf8IsAnError) {
  EXPECT_THROW(stories().encode("ab\xff", true), Error);
  EXPECT_THROW(stories().encode("\xc3", true), Error);
  EXPECT_THROW((void)stories().piece(512), Error);
  EXPECT_THROW((void)stories().decode(std::vector<int32_t>{-1}), Error);
}

}  // namespace
}  // namespace ember::test
