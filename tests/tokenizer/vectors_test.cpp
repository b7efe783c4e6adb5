// Every reference vector of shared/tokenizer/{qwen3,llama3}/vectors.jsonl: ids, pieces and
// decoded text must match exactly.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace ember::test {

const tok::TokenizerSpec& qwen3_spec() {
  static const tok::TokenizerSpec s = tok::spec_from_json_file(shared_path("tokenizer/qwen3/tokenizer.json"));
  return s;
}
const tok::Tokenizer& qwen3_tokenizer() {
  static const auto t = tok::build_tokenizer(qwen3_spec());
  return *t;
}
const tok::Tokenizer& llama3_tokenizer() {
  static const auto t = tok::Tokenizer::from_json_file(shared_path("tokenizer/llama3/tokenizer.json"));
  return *t;
}

namespace {

void check_vectors(const tok::Tokenizer& t, const std::string& file) {
  std::ifstream in(shared_path(file));
  ASSERT_TRUE(in) << file;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto v = nlohmann::json::parse(line);
    const std::string text = v["text"];
    const auto want_ids = v["ids"].get<std::vector<int32_t>>();
    const auto want_pieces = v["pieces"].get<std::vector<std::string>>();
    const std::string want_decoded = v["decoded"];
    const auto ids = t.encode(text, /*add_bos=*/false, /*parse_special=*/true);
    EXPECT_EQ(ids, want_ids) << file << " line " << n + 1 << ": " << text;
    std::vector<std::string> pieces;
    for (int32_t id : ids) pieces.push_back(t.piece(id));
    EXPECT_EQ(pieces, want_pieces) << file << " line " << n + 1;
    EXPECT_EQ(t.decode(want_ids), want_decoded) << file << " line " << n + 1;
    ++n;
  }
  EXPECT_EQ(n, 95) << file;
}

TEST(TokenizerVectors, Qwen3) { check_vectors(qwen3_tokenizer(), "tokenizer/qwen3/vectors.jsonl"); }
TEST(TokenizerVectors, Llama3) { check_vectors(llama3_tokenizer(), "tokenizer/llama3/vectors.jsonl"); }

TEST(TokenizerVectors, KindsAndSpecials) {
  const auto& q = qwen3_tokenizer();
  EXPECT_EQ(q.kind(), "bpe:qwen2");
  EXPECT_EQ(q.n_vocab(), 151669);
  EXPECT_FALSE(q.bos().has_value());
  EXPECT_FALSE(q.add_bos_default());
  const auto& l = llama3_tokenizer();
  EXPECT_EQ(l.kind(), "bpe:llama-bpe");
  EXPECT_EQ(l.n_vocab(), 128256);
  EXPECT_EQ(l.bos(), 128000);
  EXPECT_FALSE(l.add_bos_default());  // plain ByteLevel post-processor, no add_bos_token
  EXPECT_EQ(l.encode("hi", true), (std::vector<int32_t>{128000, 6151}));
}

}  // namespace
}  // namespace ember::test
