// Issue 35, item 1, through the `ember` binary: `--force` deleted any existing directory,
// recursively, for the seven directory writers (`kv export`, `store get`, `kv import-llamacpp`,
// `kv import-safetensors`, `kv export-safetensors --layout vllm`, `kvc unpack`, `map apply`).
// Each now refuses a directory that is not an artifact of its kind, by name, leaving it as it
// was, and replaces one that is (the check is util/atomic_file's DirectoryKind, one place).
// Checked failing before with main's binary: every writer exited 0 and vd/a.txt and vd/sub/
// were gone.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "map/mapper.h"
#include "model/engine.h"
#include "support/cli_run.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"
#include "util/atomic_file.h"

namespace ember::cli {
namespace {

namespace fs = std::filesystem;
using test::q;
using test::run_ember;

// A user's directory given as the output by mistake.
void make_foreign(const std::string& vd) {
  fs::create_directories(vd + "/sub");
  write_file_atomic(vd + "/a.txt", "a", false);
}

bool foreign_untouched(const std::string& vd) {
  return fs::is_directory(vd + "/sub") && read_file(vd + "/a.txt") == "a" &&
         std::distance(fs::directory_iterator(vd), fs::directory_iterator()) == 2;
}

TEST(ForceCli, EveryDirectoryWriterReplacesOnlyItsOwnKind) {
  const std::string dir = test::temp_dir("cli-force");
  const std::string model = test::shared_path("models/stories260K.gguf");
  const std::string snap = dir + "/snap";
  const test::CliRun ex = run_ember("kv export --model " + q(model) + " --prompt 'Once upon a time' --output " + q(snap));
  ASSERT_EQ(ex.rc, 0) << ex.out;
  const size_t at = ex.out.find("seal ");
  ASSERT_NE(at, std::string::npos) << ex.out;
  const std::string seal = ex.out.substr(at + 5, 64);
  // The inputs the other writers read: a store entry, an mlx cache, a KVC1 file, a mapper.
  const std::string store = "dir:" + dir + "/store";
  ASSERT_EQ(run_ember("store put " + q(store) + " " + q(snap)).rc, 0);
  ASSERT_EQ(run_ember("kv export-safetensors " + q(snap) + " -o " + q(dir + "/mlx.safetensors")).rc, 0);
  ASSERT_EQ(run_ember("kvc pack " + q(snap) + " " + q(dir + "/s.kvc")).rc, 0);
  {
    auto m = model::Model::load(model);
    auto t = tok::Tokenizer::from_gguf(m->file());
    const map::ModelGeometry g{m->identity(), "llama", 5, 4, 8, 64};
    map::identity_mapper(g, g, t->identity(), 5, "quantization-boundary").write(dir + "/id", false);
  }
  struct Writer {
    std::string name, args;  // args end with the output flag; the output path follows
    std::string kind;        // what --force replaces, as the refusal names it
  };
  const std::string state = "an ember snapshot, mapped or foreign cache directory (manifest.json, "
                            "keys.f16le, values.f16le) or an empty directory";
  const std::vector<Writer> writers = {
      {"kv export", "kv export --model " + q(model) + " --prompt 'Once upon a time' --output", state},
      {"store get", "store get " + q(store) + " " + seal + " -o", state},
      {"kv import-llamacpp",
       "kv import-llamacpp " + q(test::shared_path("models/llamacpp-state/stories260K.p1.f16.fa0.seq")) +
           " --model " + q(model) + " -o",
       state},
      {"kv import-safetensors",
       "kv import-safetensors " + q(dir + "/mlx.safetensors") + " --model " + q(model) +
           " --prompt 'Once upon a time' -o",
       state},
      {"kv export-safetensors --layout vllm", "kv export-safetensors " + q(snap) + " --layout vllm -o",
       "a vLLM cache directory (model.layers.<N>.self_attn.attn.safetensors for N = 0, 1, ...) or an empty "
       "directory"},
      {"kvc unpack", "kvc unpack " + q(dir + "/s.kvc"), state},
      {"map apply", "map apply --mapper " + q(dir + "/id") + " --snapshot " + q(snap) + " --target " + q(model) +
                        " --output",
       state},
  };
  for (const Writer& w : writers) {
    SCOPED_TRACE(w.name);
    const std::string vd = dir + "/vd-" + std::to_string(&w - writers.data());
    make_foreign(vd);
    const test::CliRun r = run_ember(w.args + " " + q(vd) + " --force");
    EXPECT_EQ(r.rc, 2) << r.out;
    EXPECT_NE(r.out.find("ember: " + vd + ": --force: expected " + w.kind + ", found 'a.txt', 'sub' (a directory) "
                         "(left as it was)\n"),
              std::string::npos)
        << r.out;
    EXPECT_TRUE(foreign_untouched(vd)) << vd;
    // The artifact a first run wrote is replaced by a second one, forced.
    fs::remove_all(vd);
    const test::CliRun first = run_ember(w.args + " " + q(vd));
    ASSERT_EQ(first.rc, 0) << first.out;
    const test::CliRun again = run_ember(w.args + " " + q(vd) + " --force");
    EXPECT_EQ(again.rc, 0) << again.out;
    // Only the artifact is left beside the inputs: no old copy under a temporary name.
    for (const auto& e : fs::directory_iterator(dir))
      EXPECT_NE(e.path().filename().string().rfind(".vd-", 0), 0u) << e.path();
  }
}

// Given the absolute path of a parent of the working directory, `--force` deleted the
// process's own working directory. Even a path that is the working directory itself, empty
// or a snapshot, is refused.
TEST(ForceCli, TheWorkingDirectoryAndItsAncestorsAreNeverReplaced) {
  const std::string dir = test::temp_dir("cli-force-cwd");
  const std::string model = test::shared_path("models/stories260K.gguf");
  const std::string snap = dir + "/snap";
  ASSERT_EQ(run_ember("kv export --model " + q(model) + " --prompt hi --output " + q(snap)).rc, 0);
  for (const std::string& target : {snap, dir}) {
    SCOPED_TRACE(target);
    std::string out;
    const int rc = test::run_command("cd " + q(snap) + " && " + test::ember_binary() + " kv export --model " +
                                         q(model) + " --prompt hi --force --output " + q(target),
                                     &out);
    EXPECT_EQ(rc, 2) << out;
    EXPECT_NE(out.find(target + ": --force: expected "), std::string::npos) << out;
    EXPECT_NE(out.find("never the working directory or one of its ancestors"), std::string::npos) << out;
  }
  EXPECT_EQ(run_ember("kv verify " + q(snap)).rc, 0);
}

}  // namespace
}  // namespace ember::cli
