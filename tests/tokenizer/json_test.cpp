// tokenizer.json loading on small hand-made files: the GPT-2 kind, TemplateProcessing BOS,
// tokenizer_config.json, and one clear error per unsupported field.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace ember::test {
namespace {

using json = nlohmann::json;

// 256 byte tokens (ids 0..255 in byte order), "Ġt" 256, "he" 257, "Ġthe" 258, and one
// added special "<s>" 259.
json tiny() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[tok::ByteLevelMap::get().byte_to_utf8[static_cast<size_t>(b)]] = b;
  vocab["\u0120t"] = 256;
  vocab["he"] = 257;
  vocab["\u0120the"] = 258;
  json j;
  j["model"] = {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array({"\u0120 t", json::array({"h", "e"}), "\u0120t he"})}};
  j["added_tokens"] = json::array({{{"id", 259}, {"content", "<s>"}, {"special", true}}});
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  j["post_processor"] = {{"type", "ByteLevel"}};
  j["decoder"] = {{"type", "ByteLevel"}};
  return j;
}

std::string write_json(const json& j, const json* config = nullptr) {
  const std::string dir = temp_dir("tokjson");
  write_file_atomic(dir + "/tokenizer.json", j.dump(), false);
  if (config) write_file_atomic(dir + "/tokenizer_config.json", config->dump(), false);
  return dir + "/tokenizer.json";
}

TEST(TokenizerJson, Gpt2ByteLevel) {
  const auto t = tok::Tokenizer::from_json_file(write_json(tiny()));
  EXPECT_EQ(t->kind(), "bpe:gpt2");
  EXPECT_EQ(t->n_vocab(), 260);
  EXPECT_EQ(t->encode(" the", false), (std::vector<int32_t>{258}));
  EXPECT_EQ(t->encode("the the", false), (std::vector<int32_t>{'t', 257, 258}));
  EXPECT_EQ(t->encode("x<s>y", false), (std::vector<int32_t>{'x', 259, 'y'}));
  EXPECT_FALSE(t->add_bos_default());
  EXPECT_FALSE(t->bos().has_value());
  EXPECT_EQ(t->decode(t->encode("any \xc3\xa9 text", false)), "any \xc3\xa9 text");
}

TEST(TokenizerJson, BosFromTemplateOrConfig) {
  json j = tiny();
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                                 {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})}};
  const auto t = tok::Tokenizer::from_json_file(write_json(j));
  EXPECT_TRUE(t->add_bos_default());
  EXPECT_EQ(t->bos(), 259);
  EXPECT_EQ(t->encode("x", t->add_bos_default()), (std::vector<int32_t>{259, 'x'}));
  // tokenizer_config.json beside it overrides add_bos and names EOS.
  const json cfg = {{"add_bos_token", false}, {"bos_token", "<s>"}, {"eos_token", {{"content", "<s>"}}}};
  const auto t2 = tok::Tokenizer::from_json_file(write_json(j, &cfg));
  EXPECT_FALSE(t2->add_bos_default());
  EXPECT_EQ(t2->eos(), 259);
  EXPECT_TRUE(t2->is_eog(259));
  EXPECT_NE(t->identity(), t2->identity());  // add_bos differs
}

void expect_error(const std::function<void(json&)>& edit, const std::string& field) {
  json j = tiny();
  edit(j);
  const std::string path = write_json(j);
  try {
    tok::Tokenizer::from_json_file(path);
    ADD_FAILURE() << "no error; expected one naming " << field;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(field), std::string::npos) << msg;
  }
}

TEST(TokenizerJson, ClearErrors) {
  expect_error([](json& j) { j["model"]["type"] = "WordPiece"; }, "model.type");
  expect_error([](json& j) { j["model"]["byte_fallback"] = true; }, "model.byte_fallback");
  expect_error([](json& j) { j["model"]["merges"][0] = "\u0120 zz"; }, "merges[0]");
  expect_error([](json& j) { j["model"]["merges"][1] = 5; }, "model.merges[1]");
  expect_error([](json& j) { j["model"]["vocab"].erase("he"); }, "added_tokens[0].id: expected an id in 0..258");
  expect_error([](json& j) { j["model"]["vocab"]["he"] = 256; }, "model.vocab");
  expect_error([](json& j) { j["added_tokens"][0]["lstrip"] = true; }, "added_tokens[0].lstrip");
  expect_error([](json& j) { j["added_tokens"][0]["id"] = 258; }, "added_tokens[0].id");
  expect_error([](json& j) { j["normalizer"] = {{"type", "NFKC"}}; }, "normalizer.type");
  expect_error([](json& j) { j["pre_tokenizer"] = {{"type", "Whitespace"}}; }, "pre_tokenizer");
  expect_error(
      [](json& j) {
        j["pre_tokenizer"] = {{"type", "Sequence"},
                              {"pretokenizers", json::array({{{"type", "Split"}, {"pattern", {{"Regex", "\\w+"}}}, {"behavior", "Isolated"}},
                                                             {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
      },
      "pre_tokenizer.pretokenizers[0].pattern.Regex");
  expect_error([](json& j) { j["decoder"] = {{"type", "Metaspace"}}; }, "decoder.type");
  expect_error([](json& j) { j["post_processor"] = {{"type", "BertProcessing"}}; }, "post_processor.type");
  const std::string dir = temp_dir("tokjson-bad");
  {  // a vocab entry listed twice: refused by its path, not resolved to the last id
    std::string text = tiny().dump();
    const size_t at = text.find("\"he\":257");
    ASSERT_NE(at, std::string::npos);
    text.insert(at, "\"he\":256,");
    write_file_atomic(dir + "/dup.json", text, false);
    try {
      tok::Tokenizer::from_json_file(dir + "/dup.json");
      ADD_FAILURE() << "accepted a duplicated vocab key";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("model.vocab.he: expected a key that appears once"), std::string::npos)
          << e.what();
    }
  }
  write_file_atomic(dir + "/tokenizer.json", "{\"model\": [1, 2", false);
  EXPECT_THROW(tok::Tokenizer::from_json_file(dir + "/tokenizer.json"), Error);
  EXPECT_THROW(tok::Tokenizer::from_json_file(dir + "/missing.json"), Error);
}

}  // namespace
}  // namespace ember::test
