// Issue 12, defect 11: invalid UTF-8 in a prompt was reported as "tokenizer input: text: ...
// at fragment offset 2", naming neither the file nor where in it. Every command that takes a
// prompt file or --prompt now names the file (with byte offset and line) or the flag.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "cli/prompt_text.h"
#include "support/test_support.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace ember::cli {
namespace {

using test::error_of;

TEST(PromptText, InvalidUtf8NamesTheFileOffsetAndLine) {
  const std::string dir = test::temp_dir("prompt");
  const std::string path = dir + "/p.txt";
  write_file_atomic(path, "line one\nab\xff" "cd\n", false);
  EXPECT_EQ(error_of([&] { read_prompt_file(path); }),
            path + ": text: expected valid UTF-8, found an invalid byte 0xFF at byte offset 11 (line 2)");
  EXPECT_EQ(error_of([&] { checked_prompt_text("x\xc3", "--prompt"); }),
            "--prompt: text: expected valid UTF-8, found an invalid byte 0xC3 at byte offset 1 (line 1)");
  write_file_atomic(dir + "/ok.txt", "caf\xc3\xa9\n", false);
  EXPECT_EQ(read_prompt_file(dir + "/ok.txt"), "caf\xc3\xa9\n");
}

TEST(PromptText, EveryPromptFileCommandNamesTheFile) {
  const std::string dir = test::temp_dir("promptcli");
  const std::string path = dir + "/bad.txt";
  write_file_atomic(path, "ab\xff", false);
  const std::string ember = test::ember_binary();
  const std::string model = test::shared_path("models/stories260K.gguf");
  for (const std::string& args :
       {"tokenize --model " + model + " --file " + path,
        "kv export --model " + model + " --prompt-file " + path + " --output " + dir + "/snap",
        "kv validate-replay --model " + model + " --prompt-file " + path + " -n 2 -o " + dir + "/gate"}) {
    SCOPED_TRACE(args);
    std::string out;
    EXPECT_EQ(test::run_command(ember + " " + args, &out), 2) << out;
    EXPECT_NE(out.find(path + ": text: expected valid UTF-8"), std::string::npos) << out;
  }
  std::string out;
  EXPECT_EQ(test::run_command(ember + " run --model " + model + " --prompt \"$(printf 'ab\\377')\" -n 1", &out), 2) << out;
  EXPECT_NE(out.find("--prompt: text: expected valid UTF-8"), std::string::npos) << out;
}

}  // namespace
}  // namespace ember::cli
