// `ember run` end to end: greedy text, and --dump-logits in the reference layout.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "support/test_support.h"

namespace ember {
namespace {

TEST(RunCli, GreedyTextMatchesTheReferenceContinuation) {
  std::string out;
  const std::string cmd = test::ember_binary() + " run --quiet --threads 2 -n 48 --model " +
                          test::shared_path("models/stories260K.gguf") +
                          " --prompt 'Once upon a time'";
  ASSERT_EQ(test::run_command(cmd, &out), 0) << out;
  EXPECT_EQ(out, ", there was a little girl named Lily. She loved to play outside in the park. "
                 "One day, she saw a big, red ball. She wanted to play with it,\n");
}

TEST(RunCli, DumpLogitsWritesTheReferenceLayout) {
  const std::vector<uint8_t> ref_tokens =
      test::read_bytes(test::shared_path("models/reference/stories260K.p2.tokens.i32"));
  const std::vector<uint8_t> ref_logits =
      test::read_bytes(test::shared_path("models/reference/stories260K.p2.logits.f32"));
  const size_t n_prompt = ref_tokens.size() / 4 - 48;
  std::string ids;
  for (size_t i = 0; i < n_prompt; ++i) {
    int32_t id;
    std::memcpy(&id, ref_tokens.data() + 4 * i, 4);
    ids += (i ? "," : "") + std::to_string(id);
  }
  const std::string dump = test::temp_dir("run") + "/p2.logits";
  std::string out;
  const std::string cmd = test::ember_binary() + " run --quiet -n 48 --model " +
                          test::shared_path("models/stories260K.gguf") + " --prompt-ids " + ids +
                          " --dump-logits " + dump;
  ASSERT_EQ(test::run_command(cmd, &out), 0) << out;
  EXPECT_EQ(test::read_bytes(dump + ".tokens"), ref_tokens);
  const std::vector<uint8_t> got = test::read_bytes(dump);
  ASSERT_EQ(got.size(), ref_logits.size());
  double worst = 0;
  for (size_t i = 0; i < got.size() / 4; ++i) {
    float a, b;
    std::memcpy(&a, got.data() + 4 * i, 4);
    std::memcpy(&b, ref_logits.data() + 4 * i, 4);
    worst = std::max(worst, double(std::fabs(a - b)));
  }
  EXPECT_LE(worst, 0.05);
  // Nothing is overwritten without --force.
  EXPECT_NE(test::run_command(cmd, &out), 0);
  EXPECT_EQ(test::run_command(cmd + " --force", &out), 0) << out;
}

TEST(RunCli, RejectsBadInput) {
  std::string out;
  const std::string model = test::shared_path("models/stories260K.gguf");
  EXPECT_EQ(test::run_command(test::ember_binary() + " run -n 2 --model " + model +
                              " --prompt-ids 1,x", &out), 2);
  EXPECT_NE(out.find("--prompt-ids"), std::string::npos) << out;
  EXPECT_EQ(test::run_command(test::ember_binary() + " run -n 2 --model " + model +
                              " --prompt-ids 1,512", &out), 2);
  EXPECT_NE(out.find("512"), std::string::npos) << out;
  EXPECT_EQ(test::run_command(test::ember_binary() + " run -n 2 --model " + model, &out), 2);
}

}  // namespace
}  // namespace ember
