// Issue 12, "Sealed manifests and trust": every edit of a manifest fails verification, not only
// the edits that break a rule. Each case below verified on the code before the seal (the edits
// broke no rule), and is refused now; then the levels above the seal: --expect and signatures.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "kv/kv_test_util.h"
#include "kv/state.h"
#include "support/test_support.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace ember::test {
namespace {

namespace fs = std::filesystem;

struct Exported {
  std::string dir, seal;
};

Exported export_stories(const std::string& tag, const std::string& extra = "") {
  const std::string dir = temp_dir(tag) + "/snap";
  std::string out;
  EXPECT_EQ(run_command(ember_binary() + " kv export --model " + shared_path("models/stories260K.gguf") +
                            " --prompt 'Once upon a time' --output " + dir + " --threads 1 " + extra,
                        &out),
            0)
      << out;
  std::smatch m;
  EXPECT_TRUE(std::regex_search(out, m, std::regex("seal ([0-9a-f]{64})"))) << out;
  return {dir, m.size() > 1 ? m[1].str() : ""};
}

int verify(const std::string& dir, std::string* out, const std::string& extra = "") {
  return run_command(ember_binary() + " kv verify " + dir + " " + extra, out);
}

// The resume token moved by one, and the witness that starts at it: an edit no rule refuses.
template <class Json>
void bump_resume(Json& j) {
  j["resume"]["token"] = j["resume"]["token"].template get<int>() + 1;
  if (j["proof"].contains("witness_tokens")) j["proof"]["witness_tokens"][0] = j["resume"]["token"];
}

TEST(SealCli, ExportPrintsTheSealThatVerifyRecomputes) {
  const Exported e = export_stories("seal-print");
  std::string out;
  ASSERT_EQ(verify(e.dir, &out), 0) << out;
  EXPECT_NE(out.find("seal " + e.seal), std::string::npos) << out;
  EXPECT_EQ(kv::read_state_header(e.dir, kv::Accept::native).header.manifest.seal, e.seal);
}

TEST(SealCli, EditsThatBreakNoRuleAreRefusedByTheSeal) {
  // The resume token moved by one (a different continuation, still a valid id).
  {
    const Exported e = export_stories("seal-resume");
    edit_manifest(e.dir, [](auto& j) { bump_resume(j); },
                  /*reseal=*/false);
    std::string out;
    EXPECT_EQ(verify(e.dir, &out), 1) << out;
    EXPECT_NE(out.find("manifest.json: seal: expected "), std::string::npos) << out;
    EXPECT_NE(run_command(ember_binary() + " kv replay --model " + shared_path("models/stories260K.gguf") +
                              " --snapshot " + e.dir + " -n 2",
                          &out),
              0);
    EXPECT_NE(out.find("seal: expected"), std::string::npos) << out;
  }
  // keys.f16le and values.f16le swapped together with their hashes.
  {
    const Exported e = export_stories("seal-swap");
    fs::rename(e.dir + "/keys.f16le", e.dir + "/tmp");
    fs::rename(e.dir + "/values.f16le", e.dir + "/keys.f16le");
    fs::rename(e.dir + "/tmp", e.dir + "/values.f16le");
    edit_manifest(e.dir, [](auto& j) {
      std::swap(j["payload"]["keys"]["sha256"], j["payload"]["values"]["sha256"]);
    }, /*reseal=*/false);
    std::string out;
    EXPECT_EQ(verify(e.dir, &out), 1) << out;
    EXPECT_NE(out.find("seal: expected"), std::string::npos) << out;
  }
}

TEST(SealCli, AMappedCacheCannotBeRelabelledNative) {
  kv::KvState m = make_mapped_state(2, 2, 4, 5);
  const std::string dir = temp_dir("seal-relabel") + "/mapped";
  write_state(std::move(m), dir);
  edit_manifest(dir, [](auto& j) {
    j["format"] = "ember.kv-snapshot";
    j.erase("mapping");
  }, /*reseal=*/false);
  try {
    kv::read_state_dir(dir);
    ADD_FAILURE() << "a relabelled mapped cache was read as native";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("seal: expected"), std::string::npos) << e.what();
  }
}

TEST(SealCli, ExpectPinsTheRecordedSeal) {
  const Exported e = export_stories("seal-expect");
  const std::string model = shared_path("models/stories260K.gguf");
  std::string out;
  EXPECT_EQ(run_command(ember_binary() + " kv replay --model " + model + " --snapshot " + e.dir + " -n 2 --expect " + e.seal,
                        &out),
            0)
      << out;
  const std::string other(64, 'a');
  EXPECT_EQ(run_command(ember_binary() + " kv replay --model " + model + " --snapshot " + e.dir + " -n 2 --expect " + other,
                        &out),
            2);
  EXPECT_NE(out.find("seal: expected " + other + " (--expect), found " + e.seal), std::string::npos) << out;
  EXPECT_EQ(verify(e.dir, &out, "--expect " + other), 1) << out;
  // A re-sealed forgery passes the seal but not --expect: the level a recorded ID adds.
  edit_manifest(e.dir, [](auto& j) { bump_resume(j); });
  EXPECT_EQ(verify(e.dir, &out), 0) << out;
  EXPECT_EQ(verify(e.dir, &out, "--expect " + e.seal), 1) << out;
}

TEST(SealCli, SignaturesAreCheckedWheneverPresentAndRequiredByTrust) {
  const std::string keys = temp_dir("seal-keys");
  std::string out;
  ASSERT_EQ(run_command(ember_binary() + " kv keygen --private " + keys + "/k.pem --public " + keys + "/k.pub", &out), 0) << out;
  ASSERT_EQ(run_command(ember_binary() + " kv keygen --private " + keys + "/o.pem --public " + keys + "/o.pub", &out), 0) << out;
  const Exported signed_ = export_stories("seal-signed", "--sign " + keys + "/k.pem");
  const Exported plain = export_stories("seal-unsigned");
  EXPECT_EQ(signed_.seal, plain.seal);  // the signature is not part of the content identity
  EXPECT_EQ(verify(signed_.dir, &out, "--trust " + keys + "/k.pub"), 0) << out;
  EXPECT_EQ(verify(signed_.dir, &out, "--trust " + keys + "/o.pub"), 1) << out;
  EXPECT_NE(out.find("signature.public_key: expected"), std::string::npos) << out;
  EXPECT_EQ(verify(plain.dir, &out, "--trust " + keys + "/k.pub"), 1) << out;
  EXPECT_NE(out.find("an unsigned artifact"), std::string::npos) << out;
  // A forger who edits and re-seals cannot keep the signature valid.
  edit_manifest(signed_.dir, [](auto& j) { bump_resume(j); });
  EXPECT_EQ(verify(signed_.dir, &out), 1) << out;
  EXPECT_NE(out.find("signature.value: expected a valid Ed25519 signature"), std::string::npos) << out;
}

// kv compare pins and authenticates each side on its own: --expect-left/--expect-right take the
// seals the writers printed, --trust (both sides) or --trust-left/--trust-right a public key;
// a KVC1 file carries its snapshot's seal, so pinning it works on a packed side too.
TEST(SealCli, CompareChecksEachSidesSealAndSignature) {
  const std::string keys = temp_dir("seal-compare-keys");
  std::string out;
  ASSERT_EQ(run_command(ember_binary() + " kv keygen --private " + keys + "/k.pem --public " + keys + "/k.pub", &out), 0) << out;
  const Exported left = export_stories("seal-compare-left", "--sign " + keys + "/k.pem");
  const Exported right = export_stories("seal-compare-right");
  const std::string packed = temp_dir("seal-compare-kvc") + "/right.kvc";
  ASSERT_EQ(run_command(ember_binary() + " kvc pack " + right.dir + " " + packed, &out), 0) << out;
  const auto compare = [&](const std::string& extra) {
    return run_command(ember_binary() + " kv compare " + left.dir + " " + packed + " " + extra, &out);
  };
  EXPECT_EQ(compare("--expect-left " + left.seal + " --expect-right " + right.seal), 0) << out;
  EXPECT_EQ(left.seal, right.seal);  // same content, same identity: the signature is not part of it
  const std::string other(64, 'b');
  EXPECT_EQ(compare("--expect-right " + other), 2) << out;
  EXPECT_NE(out.find(packed + ": seal: expected " + other + " (--expect), found " + right.seal), std::string::npos)
      << out;
  EXPECT_EQ(compare("--expect-left " + other), 2) << out;
  EXPECT_NE(out.find(left.dir + ": seal: expected " + other), std::string::npos) << out;
  EXPECT_EQ(compare("--trust-left " + keys + "/k.pub"), 0) << out;
  EXPECT_EQ(compare("--trust " + keys + "/k.pub"), 2) << out;  // RIGHT is unsigned
  EXPECT_NE(out.find(packed + ": signature"), std::string::npos) << out;
  EXPECT_NE(out.find("an unsigned artifact"), std::string::npos) << out;
}

// kvc pack --sign: the container carries a signed manifest, so `kv replay --trust` accepts the
// .kvc (and refuses the unsigned one), and the seal, the content identity, is unchanged.
TEST(SealCli, PackSignsTheContainedManifest) {
  const std::string keys = temp_dir("seal-pack-keys");
  std::string out;
  ASSERT_EQ(run_command(ember_binary() + " kv keygen --private " + keys + "/k.pem --public " + keys + "/k.pub", &out), 0) << out;
  const Exported e = export_stories("seal-pack");
  const std::string dir = temp_dir("seal-pack-kvc");
  ASSERT_EQ(run_command(ember_binary() + " kvc pack " + e.dir + " " + dir + "/plain.kvc", &out), 0) << out;
  ASSERT_EQ(run_command(ember_binary() + " kvc pack --sign " + keys + "/k.pem " + e.dir + " " + dir + "/signed.kvc", &out), 0)
      << out;
  const std::string model = shared_path("models/stories260K.gguf");
  const auto replay = [&](const std::string& kvc) {
    return run_command(ember_binary() + " kv replay --model " + model + " --snapshot " + kvc + " -n 2 --trust " + keys +
                           "/k.pub --expect " + e.seal,
                       &out);
  };
  EXPECT_EQ(replay(dir + "/signed.kvc"), 0) << out;
  EXPECT_EQ(replay(dir + "/plain.kvc"), 2) << out;
  EXPECT_NE(out.find("an unsigned artifact"), std::string::npos) << out;
  ASSERT_EQ(run_command(ember_binary() + " kvc unpack " + dir + "/signed.kvc " + dir + "/unpacked", &out), 0) << out;
  EXPECT_EQ(verify(dir + "/unpacked", &out, "--trust " + keys + "/k.pub --expect " + e.seal), 0) << out;
}

}  // namespace
}  // namespace ember::test
