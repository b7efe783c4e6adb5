// Positions are bounded by the model (issue 12, defect 4): `kv export` and `kv replay` refuse
// a prefix or a continuation past the model's context length (GGUF `<arch>.context_length`)
// unless --allow-past-context is given; an export past it records "past_context": true in the
// manifest; a snapshot directory's positions are refused before a payload is read.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "kv/state.h"
#include "support/cli_run.h"
#include "support/test_support.h"
#include "util/error.h"

namespace ember::test {
namespace {

namespace fs = std::filesystem;

std::string slurp(const std::string& path) {
  const std::vector<uint8_t> b = read_bytes(path);
  return std::string(b.begin(), b.end());
}

std::string ids(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += (i ? "," : "") + std::to_string(40 + i);
  return s;
}

// A synthetic llama whose GGUF says context_length 16.
std::string synth16(const std::string& dir) {
  const std::string out = dir + "/ctx16.gguf";
  const CliRun r = run_ember("model synth --arch llama --layers 2 --hidden 64 --heads 4 --kv-heads 2 --ffn 128 "
                             "--vocab 300 --context 16 --seed 3 -o " + q(out));
  EXPECT_EQ(r.rc, 0) << r.out;
  return out;
}

TEST(ContextLimit, ExportAndReplayPastTheContextNeedTheFlag) {
  const std::string dir = temp_dir("ctx");
  const std::string model = synth16(dir);
  const std::string m = " --threads 1 --model " + q(model);
  // A 20-position prefix on a 16-position model.
  CliRun r = run_ember("kv export" + m + " --prompt-ids " + ids(20) + " -o " + q(dir + "/past"));
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("prompt: tokens: expected at most 16 positions (the model's context length; "
                       "--allow-past-context to go past it), found 20"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir + "/past"));
  r = run_ember("kv export" + m + " --allow-past-context --prompt-ids " + ids(20) + " -o " + q(dir + "/past"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("past the model's context length 16"), std::string::npos) << r.out;
  const std::string manifest = slurp(dir + "/past/manifest.json");
  EXPECT_NE(manifest.find("\"past_context\": true"), std::string::npos) << manifest;
  r = run_ember("kv verify " + q(dir + "/past"));
  EXPECT_EQ(r.rc, 0) << r.out;

  // Its replay on the same model: refused by the snapshot's positions, then allowed.
  r = run_ember("kv replay" + m + " -n 2 --snapshot " + q(dir + "/past"));
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find(dir + "/past: geometry.positions + the resume token: expected at most 16 positions "
                             "(the model's context length; --allow-past-context to go past it), found 21"),
            std::string::npos) << r.out;
  r = run_ember("kv replay" + m + " --allow-past-context -n 2 --snapshot " + q(dir + "/past"));
  EXPECT_EQ(r.rc, 0) << r.out;

  // The positions are refused before a payload is read: a truncated payload is not reached.
  fs::create_directory(dir + "/cut");
  for (const char* f : {"manifest.json", "keys.f16le", "values.f16le"})
    fs::copy_file(dir + "/past/" + f, dir + "/cut/" + f);
  fs::resize_file(dir + "/cut/keys.f16le", 10);
  r = run_ember("kv replay" + m + " -n 2 --snapshot " + q(dir + "/cut"));
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("geometry.positions + the resume token"), std::string::npos) << r.out;
}

TEST(ContextLimit, ReplayStepsStayWithinTheContext) {
  const std::string dir = temp_dir("ctx");
  const std::string model = synth16(dir);
  const std::string m = " --threads 1 --model " + q(model);
  CliRun r = run_ember("kv export" + m + " --prompt-ids " + ids(10) + " -o " + q(dir + "/in"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(slurp(dir + "/in/manifest.json").find("past_context"), std::string::npos);
  // 10 cached + the resume token + 5 more = positions [0, 16).
  r = run_ember("kv replay" + m + " --ignore-eos -n 6 --snapshot " + q(dir + "/in"));
  EXPECT_EQ(r.rc, 0) << r.out;
  r = run_ember("kv replay" + m + " -n 7 --snapshot " + q(dir + "/in"));
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("-n: steps: expected at most 6 "), std::string::npos) << r.out;
}

TEST(ContextLimit, ManifestPastContextIsOptionalAndOnlyTrue) {
  const std::string dir = temp_dir("ctx");
  const std::string model = synth16(dir);
  const CliRun r = run_ember("kv export --threads 1 --allow-past-context --model " + q(model) +
                             " --prompt-ids " + ids(17) + " -o " + q(dir + "/s"));
  ASSERT_EQ(r.rc, 0) << r.out;
  const std::string text = slurp(dir + "/s/manifest.json");
  const kv::SnapshotManifest parsed = kv::SnapshotManifest::from_json(text, "m");
  EXPECT_TRUE(parsed.past_context);
  EXPECT_EQ(parsed.to_json(), text);  // canonical, key in its place
  std::string f = text;
  f.replace(f.find("\"past_context\": true"), 20, "\"past_context\": false");
  try {
    kv::SnapshotManifest::from_json(f, "m");
    ADD_FAILURE() << "past_context false accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "m: past_context: expected true (or the key absent), found false");
  }
}

}  // namespace
}  // namespace ember::test
