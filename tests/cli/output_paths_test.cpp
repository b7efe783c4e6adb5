// Issue 12, defect 11 (output paths) through the `ember` binary: an --output whose parent
// directories are missing is created; an output that is one of the command's inputs is
// refused even with --force, naming the output, and the input is left as it was.
#include <gtest/gtest.h>

#include <string>

#include "support/cli_run.h"
#include "support/test_support.h"
#include "util/sha256.h"

namespace ember::cli {
namespace {

using test::q;
using test::run_ember;

// A tiny deterministic model with the built-in byte-level tokenizer.
std::string synth_model(const std::string& dir) {
  const std::string path = dir + "/m.gguf";
  const test::CliRun r = run_ember("model synth --arch llama --layers 2 --hidden 64 --heads 4 --kv-heads 2 "
                                   "--ffn 128 --vocab 300 --seed 7 -o " + q(path));
  EXPECT_EQ(r.rc, 0) << r.out;
  return path;
}

TEST(OutputPaths, ExportCreatesMissingParentDirectories) {
  const std::string dir = test::temp_dir("cli-parents");
  const std::string model = synth_model(dir);
  const std::string out = dir + "/runs/kv/prefix";
  const test::CliRun r = run_ember("kv export --model " + q(model) + " --prompt hello --output " + q(out));
  ASSERT_EQ(r.rc, 0) << r.out;
  const test::CliRun v = run_ember("kv verify " + q(out));
  EXPECT_EQ(v.rc, 0) << v.out;
}

TEST(OutputPaths, AnOutputThatIsAnInputIsRefusedEvenWithForce) {
  const std::string dir = test::temp_dir("cli-same");
  const std::string model = synth_model(dir);
  const std::string snap = dir + "/snap";
  ASSERT_EQ(run_ember("kv export --model " + q(model) + " --prompt hello --output " + q(snap)).rc, 0);
  const std::string model_sha = sha256_file_hex(model);
  const std::string itself = "' itself; refusing to write an output over an input (even with --force)";
  struct Case {
    std::string args, output, input;
  };
  const Case cases[] = {
      {"kv export --model " + q(model) + " --prompt hi --force --output " + q(model), model, model},
      {"kv export --model " + q(model) + " --prompt hi --force --output " + q(dir + "/x") + " --boundary-logits " +
           q(model), model, model},
      {"model quantize " + q(model) + " " + q(model) + " --type q8_0 --force", model, model},
      {"kvc pack " + q(snap) + " " + q(snap) + " --force", snap, snap},
      {"kv replay --model " + q(model) + " --snapshot " + q(snap) + " -n 1 --force --logits-out " + q(model), model,
       model},
      {"run --model " + q(model) + " --prompt hi -n 1 --force --dump-logits " + q(model), model, model},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const test::CliRun r = run_ember(c.args);
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.out.find(c.output + ": is the input '" + c.input + itself), std::string::npos) << r.out;
  }
  EXPECT_EQ(sha256_file_hex(model), model_sha);
  EXPECT_EQ(run_ember("kv verify " + q(snap)).rc, 0);
  // Writing into the input snapshot directory would add a stray entry to it.
  const test::CliRun inside = run_ember("kvc pack " + q(snap) + " " + q(snap + "/p.kvc"));
  EXPECT_NE(inside.rc, 0);
  EXPECT_NE(inside.out.find(snap + "/p.kvc: is inside the input directory '" + snap + "'"), std::string::npos)
      << inside.out;
  EXPECT_EQ(run_ember("kv verify " + q(snap)).rc, 0);
}

}  // namespace
}  // namespace ember::cli
