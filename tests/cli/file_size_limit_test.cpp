// Issue 35, item 5: under `ulimit -f` a writer died by SIGXFSZ with no message and left its
// temporary behind. main() ignores SIGXFSZ, so write() fails with EFBIG and the atomic writer
// says so on one line naming the output, and removes its temporary. Checked failing before
// with main's binary: both commands were killed by the signal (no exit status, no message) and
// a ".out.gguf.tmp-*" / ".snap.tmp-*" temporary was left in the directory.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "support/cli_run.h"
#include "support/test_support.h"

namespace ember::cli {
namespace {

namespace fs = std::filesystem;
using test::q;

TEST(FileSizeLimit, AWriterPastUlimitFSaysSoAndLeavesNothing) {
  const std::string dir = test::temp_dir("cli-fsize");
  const std::string model = test::shared_path("models/stories260K.gguf");
  std::string prompt;
  for (int i = 0; i < 20; ++i) prompt += "Once upon a time ";  // ~80 of the 128 positions
  struct Case {
    std::string args, output;
  };
  const Case cases[] = {
      {"model synth --arch llama --layers 2 --hidden 64 --heads 4 --kv-heads 2 --ffn 128 --vocab 300 --seed 7 -o " +
           q(dir + "/out.gguf"),
       dir + "/out.gguf"},
      // A directory: its first payload (5 layers x 4 heads x 8 dims x ~80 positions x 2 bytes) is past 4 KiB.
      {"kv export --model " + q(model) + " --prompt " + q(prompt) + " --output " + q(dir + "/snap"),
       dir + "/snap/keys.f16le"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    std::string out;
    // sh's ulimit -f counts 512-byte blocks: a 4 KiB limit for ember only.
    const int rc = test::run_command("ulimit -f 8 && exec " + test::ember_binary() + " " + c.args, &out);
    EXPECT_EQ(rc, 2) << out;  // 128: killed by SIGXFSZ
    EXPECT_EQ(out.rfind("ember: " + c.output + ": write failed: the file size limit was reached (ulimit -f, "
                        "RLIMIT_FSIZE; ",
                        0),
              0u)
        << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  }
  EXPECT_TRUE(fs::is_empty(dir)) << "a temporary or a partial output was left";
}

}  // namespace
}  // namespace ember::cli
