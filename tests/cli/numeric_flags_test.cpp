// Issue 35, item 9, through the `ember` binary: numeric flags are read strictly
// (cli/limits.h, seed_value and finite_number).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "support/cli_run.h"
#include "support/test_support.h"

namespace ember::cli {
namespace {

using test::q;
using test::run_ember;

// Item 9: `--temp -1` and `--seed 18446744073709551616` were accepted (CLI11 2.1 reads an
// unsigned flag with strtoull, which wraps "-1" and saturates 2^64 to 2^64-1; a float flag took
// any value). Every command with these flags refuses them, naming flag, expected and found.
// Checked failing before: `run` exited 0 on each, `model synth` wrote a model.
TEST(NumericFlags, SeedAndSamplingFlagsAreReadStrictly) {
  const std::string dir = test::temp_dir("cli-flags");
  const std::string model = test::shared_path("models/stories260K.gguf");
  const std::string run = "run --model " + q(model) + " --prompt hi -n 2 ";
  const std::string seed = "expected a decimal integer in [0, 18446744073709551615], found ";
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {run + "--temp -1", "--temp: expected a finite number >= 0 (0: greedy), found -1"},
      {run + "--temp nan", "--temp: expected a finite number >= 0 (0: greedy), found nan"},
      {run + "--temp inf", "--temp: expected a finite number >= 0 (0: greedy), found inf"},
      {run + "--top-p 2", "--top-p: expected a number in (0, 1], found 2"},
      {run + "--top-p 0", "--top-p: expected a number in (0, 1], found 0"},
      {run + "--seed 18446744073709551616", "--seed: " + seed + "18446744073709551616"},
      {run + "--seed -1", "--seed: " + seed + "-1"},
      {run + "--seed 010", "--seed: " + seed + "010"},
      {run + "--seed 0x10", "--seed: " + seed + "0x10"},
      {"model synth --arch llama --layers 1 --hidden 64 --heads 4 --kv-heads 2 --ffn 64 --vocab 300 --seed "
       "18446744073709551616 -o " + q(dir + "/m.gguf"),
       "--seed: " + seed + "18446744073709551616"},
      {"map collect --source " + q(model) + " --target " + q(model) + " --seed -1 --output " + q(dir + "/c"),
       "--seed: " + seed + "-1"},
      {"study sweep --source " + q(model) + " --target " + q(model) + " --seed 18446744073709551616",
       "--seed: " + seed + "18446744073709551616"},
      {"study recompute-anchor --first-seed -1", "--first-seed: " + seed + "-1"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const test::CliRun r = run_ember(c.args);
    EXPECT_EQ(r.rc, 2) << r.out;
    EXPECT_EQ(r.out, "ember: " + c.message + "\n");  // one line, prefixed (issue 32)
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  // The largest seed and a zero temperature are still fine.
  EXPECT_EQ(run_ember(run + "--seed 18446744073709551615 --temp 0.7 --top-p 1").rc, 0);
  EXPECT_EQ(run_ember(run + "--seed 0 --temp 0").rc, 0);
}

}  // namespace
}  // namespace ember::cli
