// ember tokenize / detokenize end to end.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace ember::test {
namespace {

TEST(TokenizeCli, JsonIdsAndPiecesThenDetokenize) {
  const std::string model = shared_path("models/stories260K.gguf");
  std::string out;
  ASSERT_EQ(run_command(ember_binary() + " tokenize --model " + model + " --prompt 'Once upon a time' --json", &out), 0)
      << out;
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["ids"].get<std::vector<int32_t>>(), (std::vector<int32_t>{1, 403, 407, 261, 378}));
  EXPECT_EQ(j["pieces"][1], "\u2581Once");
  EXPECT_EQ(j["pieces"].size(), j["ids"].size());
  ASSERT_EQ(run_command(ember_binary() + " tokenize --model " + model + " --prompt 'Once' --no-bos --json", &out), 0);
  EXPECT_EQ(nlohmann::json::parse(out)["ids"].get<std::vector<int32_t>>(), (std::vector<int32_t>{403}));
  ASSERT_EQ(run_command(ember_binary() + " detokenize --model " + model + " --ids 1,403,407,261,378", &out), 0);
  EXPECT_EQ(out, "Once upon a time");
}

TEST(TokenizeCli, BadInputExitsTwo) {
  const std::string model = shared_path("models/stories260K.gguf");
  std::string out;
  EXPECT_EQ(run_command(ember_binary() + " detokenize --model " + model + " --ids 1,99999", &out), 2);
  EXPECT_NE(out.find("token id"), std::string::npos) << out;
  EXPECT_EQ(run_command(ember_binary() + " tokenize --model " + model, &out), 2);
  EXPECT_EQ(run_command(ember_binary() + " tokenize --tokenizer /nonexistent/tokenizer.json --prompt x", &out), 2);
  EXPECT_NE(out.find("/nonexistent/tokenizer.json"), std::string::npos) << out;
}

}  // namespace
}  // namespace ember::test
