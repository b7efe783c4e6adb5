// Hard cases beyond the shared vectors: split behaviour per family (digits, contractions,
// whitespace runs), scripts (Arabic with harakat and digits, CJK), emoji/ZWJ, combining marks,
// added tokens inside text, invalid UTF-8, long inputs, streaming decode of split sequences.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "tokenizer_test_util.h"
#include "util/error.h"

namespace ember::test {
namespace {

std::vector<std::string> split(const char* pattern, const std::string& text) {
  tok::SplitRegex re(pattern);
  std::vector<std::pair<size_t, size_t>> spans;
  re.split(text, spans);
  std::vector<std::string> out;
  for (auto [o, n] : spans) out.push_back(text.substr(o, n));
  return out;
}
using V = std::vector<std::string>;

// The bytes of each token of an encoding.
V token_texts(const tok::Tokenizer& t, const std::string& text) {
  V out;
  for (int32_t id : t.encode(text, false)) out.push_back(t.token_bytes(id));
  return out;
}

TEST(TokenizerSplit, DigitsGroupPerFamily) {
  EXPECT_EQ(split(tok::split_pattern_llama_bpe(), "1234567"), (V{"123", "456", "7"}));
  EXPECT_EQ(split(tok::split_pattern_qwen2(), "1234"), (V{"1", "2", "3", "4"}));
  EXPECT_EQ(split(tok::split_pattern_gpt2(), "x 1234567"), (V{"x", " 1234567"}));
  // Arabic-Indic digits are \p{N} too.
  EXPECT_EQ(split(tok::split_pattern_llama_bpe(), "\u0661\u0662\u0663\u0664"), (V{"\u0661\u0662\u0663", "\u0664"}));
  // Whole-token level: Llama 3 has every 1-3 digit group as one token, Qwen one per digit.
  EXPECT_EQ(token_texts(llama3_tokenizer(), "1234567"), (V{"123", "456", "7"}));
  EXPECT_EQ(token_texts(qwen3_tokenizer(), "2024"), (V{"2", "0", "2", "4"}));
}

TEST(TokenizerSplit, Contractions) {
  EXPECT_EQ(split(tok::split_pattern_llama_bpe(), "I'll HE'S we're"), (V{"I", "'ll", " HE", "'S", " we", "'re"}));
  EXPECT_EQ(split(tok::split_pattern_qwen2(), "don'T"), (V{"don", "'T"}));
  // GPT-2's contractions are case-sensitive.
  EXPECT_EQ(split(tok::split_pattern_gpt2(), "HE'S he's"), (V{"HE", "'", "S", " he", "'s"}));
}

TEST(TokenizerSplit, WhitespaceRuns) {
  const char* p = tok::split_pattern_llama_bpe();
  EXPECT_EQ(split(p, "a  \t\n\n  b"), (V{"a", "  \t\n\n", " ", " b"}));
  EXPECT_EQ(split(p, "hi   "), (V{"hi", "   "}));
  EXPECT_EQ(split(p, "a\r\nb"), (V{"a", "\r\n", "b"}));
  EXPECT_EQ(split(p, "x\t\ty"), (V{"x", "\t", "\ty"}));
  EXPECT_EQ(split(tok::split_pattern_gpt2(), "a   b"), (V{"a", "  ", " b"}));
}

TEST(TokenizerSplit, ScriptsAndSymbols) {
  const char* p = tok::split_pattern_qwen2();
  EXPECT_EQ(split(p, " \u0645\u0631\u062d\u0628\u0627"), (V{" \u0645\u0631\u062d\u0628\u0627"}));  // " مرحبا"
  EXPECT_EQ(split(p, "\u4f60\u597d\u4e16\u754c"), (V{"\u4f60\u597d\u4e16\u754c"}));                   // 你好世界
  // A ZWJ family is one symbol run: emoji (So) and ZWJ (Cf) are neither letters nor spaces.
  const std::string family = "\U0001F468\u200D\U0001F469\u200D\U0001F467";
  EXPECT_EQ(split(p, " " + family + "!"), (V{" " + family + "!"}));
}

// decode(encode(s)) == s (llama3), == NFC(s) (qwen3), on every hard case.
TEST(TokenizerHardCases, RoundTrips) {
  const std::vector<std::string> cases = {
      "مَرْحَبًا بِالْعَالَمِ 2024 و١٢٣٤٥ Hello",  // Arabic with harakat, Latin and Arabic-Indic digits
      "第一章 東京タワー 한국어 테스트",
      "\U0001F468\u200D\U0001F469\u200D\U0001F467\u200D\U0001F466 \U0001F44D\U0001F3FD \U0001F1EF\U0001F1F5",
      "cafe\u0301 vs caf\u00e9, \u1100\u1161\u11a8, \u212b",  // combining, decomposed Hangul, Angstrom sign
      "I'll say HE'S 'twas they'RE",
      "  \t\t\n\n\r\n   x   \n",
      "int main() { return a<<2 != b; }\n",
      std::string(3000, 'a') + " " + std::string(2000, ' ') + std::string(999, '9'),
      "\x01\x02 nul:" + std::string(1, '\0') + ":end",
  };
  for (const auto& s : cases) {
    const auto& l = llama3_tokenizer();
    EXPECT_EQ(l.decode(l.encode(s, false)), s);
    const auto& q = qwen3_tokenizer();
    EXPECT_EQ(q.decode(q.encode(s, false)), tok::nfc(s));
  }
}

TEST(TokenizerHardCases, CombiningMarks) {
  const std::string decomposed = "e\u0301", composed = "\u00e9";
  const auto& q = qwen3_tokenizer();
  EXPECT_EQ(q.encode(decomposed, false), q.encode(composed, false));  // NFC first
  EXPECT_EQ(q.decode(q.encode(decomposed, false)), composed);
  const auto& l = llama3_tokenizer();
  EXPECT_NE(l.encode(decomposed, false), l.encode(composed, false));  // no normalizer
  EXPECT_EQ(l.decode(l.encode(decomposed, false)), decomposed);
}

TEST(TokenizerHardCases, AddedTokensInsideText) {
  const auto& q = qwen3_tokenizer();
  const std::string chat = "<|im_start|>user\nhi<think>x</think><|im_end|>";
  const auto ids = q.encode(chat, false, true);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(q.piece(ids.front()), "<|im_start|>");
  EXPECT_EQ(q.token_type(ids.front()), tok::TokenType::Control);
  EXPECT_EQ(q.piece(ids.back()), "<|im_end|>");
  EXPECT_TRUE(q.is_eog(ids.back()));
  EXPECT_EQ(q.decode(ids), chat);
  // parse_special = false: control tokens are text, user-defined ones still match.
  const auto plain = q.encode(chat, false, false);
  int user_defined = 0;
  for (int32_t id : plain) {
    EXPECT_NE(q.token_type(id), tok::TokenType::Control) << q.piece(id);
    user_defined += q.token_type(id) == tok::TokenType::UserDefined;
  }
  EXPECT_EQ(user_defined, 2);  // <think> and </think>
  EXPECT_EQ(q.decode(plain), chat);
  // Each family treats the other's control tokens as plain text.
  const auto& l = llama3_tokenizer();
  for (int32_t id : l.encode("<|im_start|>", false)) EXPECT_EQ(l.token_type(id), tok::TokenType::Normal);
  EXPECT_EQ(l.encode("<|begin_of_text|>x", false).front(), 128000);
}

TEST(TokenizerHardCases, InvalidUtf8IsAClearError) {
  for (const std::string bad : {"abc\xff", "\xc3", "\xc0\xaf", "\xed\xa0\x80", "ok \xf4\x90\x80\x80", "\x80"}) {
    for (const tok::Tokenizer* t : {&llama3_tokenizer(), &qwen3_tokenizer()}) {
      try {
        (void)t->encode(bad, false);
        ADD_FAILURE() << "no error for invalid UTF-8";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("valid UTF-8"), std::string::npos) << e.what();
      }
    }
  }
}

TEST(TokenizerHardCases, EmptyAndBos) {
  const auto& l = llama3_tokenizer();
  EXPECT_TRUE(l.encode("", false).empty());
  EXPECT_EQ(l.encode("", true), (std::vector<int32_t>{128000}));
  EXPECT_TRUE(qwen3_tokenizer().encode("", true).empty());  // Qwen has no BOS
}

TEST(StreamDecoder, HoldsBackSplitSequences) {
  const auto& l = llama3_tokenizer();
  const std::string text = "\U0001F642\U0001F643 \u4e16\u754c \u00e9t\u00e9 \U0001F468\u200D\U0001F469";
  const auto ids = l.encode(text, false);
  tok::StreamDecoder sd(l);
  std::string got;
  int held = 0, split_tokens = 0;
  for (int32_t id : ids) {
    const std::string tb = l.token_bytes(id);
    split_tokens += tok::utf8_invalid_offset(tb) != std::string::npos;
    const std::string out = sd.push(id);
    EXPECT_EQ(tok::utf8_invalid_offset(out), std::string::npos);
    held += out.empty();
    got += out;
  }
  got += sd.flush();
  EXPECT_EQ(got, text);
  EXPECT_GT(split_tokens, 0);  // the case is exercised: some tokens hold partial characters
  EXPECT_GT(held, 0);
  // A byte that can never start UTF-8 comes out as U+FFFD; an unfinished tail is released
  // by flush() as U+FFFD too.
  int32_t ff = -1, e4 = -1;
  for (int32_t id = 0; id < l.n_vocab(); ++id) {
    if (l.token_bytes(id) == "\xff") ff = id;
    if (l.token_bytes(id) == "\xe4") e4 = id;
  }
  ASSERT_GE(ff, 0);
  ASSERT_GE(e4, 0);
  tok::StreamDecoder sd2(l);
  EXPECT_EQ(sd2.push(ff), "\xEF\xBF\xBD");
  EXPECT_EQ(sd2.push(e4), "");
  EXPECT_EQ(sd2.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(sd2.flush(), "");
}

}  // namespace
}  // namespace ember::test
