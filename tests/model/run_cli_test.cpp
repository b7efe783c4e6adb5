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

std::string run_stories(const std::string& flags, int* rc) {
  std::string out;
  *rc = test::run_command(test::ember_binary() + " run --model " +
                              test::shared_path("models/stories260K.gguf") + " " + flags, &out);
  return out;
}

// Issue 12, defect 3: --threads -1 silently meant all cores; 1000 was accepted and spun.
TEST(RunCli, ThreadCountsAreCheckedOneWay) {
  int rc = 0;
  std::string out = run_stories("--threads -1 -n 2 --prompt-ids 1", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--threads: thread count: expected 0 (the cores present) or a positive count, "
                     "found -1"), std::string::npos) << out;
  // Clamped to the cores present, said on stderr; the text is the same as with 2 threads.
  out = run_stories("--threads 1000 -n 8 --prompt 'Once upon a time'", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("ember: --threads 1000 is more than the "), std::string::npos) << out;
  EXPECT_NE(out.find("cores present; using "), std::string::npos) << out;
  EXPECT_NE(out.find(", there was a little girl\n"), std::string::npos) << out;
  // Absent: the cores present, and the summary says so.
  out = run_stories("-n 2 --prompt-ids 1", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find(" threads (the cores present), "), std::string::npos) << out;
}

// Issue 12, defect 4: prompts and generation past the context ran silently. stories260K's
// GGUF says context_length 128.
TEST(RunCli, PastTheContextIsRefusedUnlessAllowed) {
  int rc = 0;
  std::string out = run_stories("--quiet -n 128 --prompt-ids 1", &rc);  // positions [0, 128)
  EXPECT_EQ(rc, 0) << out;
  out = run_stories("--quiet -n 129 --prompt-ids 1", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("-n: steps: expected at most 128 (with 1 input positions, input + steps - 1 <= 128) "
                     "(the model's context length; --allow-past-context to go past it), found 129"),
            std::string::npos) << out;
  std::string ids = "1";
  for (int i = 1; i < 130; ++i) ids += ",13";
  out = run_stories("--quiet -n 1 --prompt-ids " + ids, &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--prompt-ids: tokens: expected at most 128 positions"), std::string::npos) << out;
  // Allowed: it runs, and says it went past the context even with --quiet.
  out = run_stories("--quiet --ignore-eos --allow-past-context -n 140 --prompt-ids 1", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("past the model's context length 128 (--allow-past-context)"), std::string::npos) << out;
}

// Issue 12, defect 5: -n 2147483647 overflowed an int in the cache size (UB; UBSan in the
// sanitizer build). Now a limit refused by name before anything is allocated.
TEST(RunCli, HugeStepCountsAreRefusedByName) {
  int rc = 0;
  std::string out = run_stories("-n 2147483647 --prompt-ids 1,13", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("-n: steps: expected at most 127 "), std::string::npos) << out;
  EXPECT_NE(out.find("found 2147483647"), std::string::npos) << out;
  out = run_stories("--allow-past-context -n 2147483647 --prompt-ids 1,13", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("-n: steps: expected at most 16777215 "), std::string::npos) << out;
  EXPECT_NE(out.find("(the most positions a cache holds), found 2147483647"), std::string::npos) << out;
}

}  // namespace
}  // namespace ember
