// Runs the manifest fuzz harness (fuzz/kv_manifest_fuzz.cpp) in every build: over the seed
// corpus, whose names say what the reader must do with each (ok-* accepted, bad-* refused),
// and over deterministic mutations of the real exported manifest (every truncation, every
// single-bit flip). Under ASan/UBSan in CI this is the fuzzer's smoke run; the harness
// itself fails only by crashing (or trapping when an accepted manifest is not canonical-stable).
#include <gtest/gtest.h>

#include <filesystem>

// The KVC1 smoke test links its own harness into this executable: rename this one's entry.
#define LLVMFuzzerTestOneInput kv_manifest_fuzz_one_input
#include "../../fuzz/kv_manifest_fuzz.cpp"
#undef LLVMFuzzerTestOneInput

#include "kv/kv_test_util.h"
#include "support/test_support.h"
#include "util/error.h"

namespace ember::kv {
namespace {

const std::string kSeeds = std::string(EMBER_SOURCE_DIR) + "/fuzz/corpus/manifest";

void feed(const std::string& text) {
  kv_manifest_fuzz_one_input(reinterpret_cast<const uint8_t*>(text.data()), text.size());
}

TEST(ManifestFuzz, SeedsAreAcceptedOrRefusedAsNamed) {
  int ok = 0, bad = 0;
  for (const auto& e : std::filesystem::directory_iterator(kSeeds)) {
    const std::string name = e.path().filename().string();
    const std::string text = test::slurp(e.path().string());
    feed(text);
    if (name.rfind("ok-", 0) == 0) {
      EXPECT_NO_THROW(parse_state_manifest(text, name)) << name;  // either kind
      ++ok;
    } else {
      ASSERT_EQ(name.rfind("bad-", 0), 0u) << "seed names start with ok- or bad-: " << name;
      // Refused for the reason its name gives, not merely for a seal it lacks: every bad seed
      // is sealed, so the rule it breaks is reached.
      const std::string error = test::error_of([&] { parse_state_manifest(text, name); });
      EXPECT_FALSE(error.empty()) << name;
      EXPECT_EQ(error.find(": seal:"), std::string::npos) << name << ": " << error;
      ++bad;
    }
  }
  EXPECT_GE(ok, 3);
  EXPECT_GE(bad, 3);
  // The exported seed is what `ember kv export` writes: it is its own canonical text, so a
  // change of the manifest format shows up here (re-export the seed with the new writer).
  const std::string exported = test::slurp(kSeeds + "/ok-stories260k-export.json");
  EXPECT_EQ(SnapshotManifest::from_json(exported, "seed").to_json(), exported);
}

TEST(ManifestFuzz, TruncationsAndBitFlipsNeverCrash) {
  const std::string ok = test::slurp(kSeeds + "/ok-stories260k-export.json");
  ASSERT_GT(ok.size(), 1000u);
  int refused = 0, runs = 0;
  auto run = [&](const std::string& text) {
    ++runs;
    try {
      SnapshotManifest::from_json(text, "m");
    } catch (const Error&) {
      ++refused;
    }
    feed(text);
  };
  const size_t close = ok.rfind('}');
  for (size_t len = 0; len <= close; ++len) run(ok.substr(0, len));
  EXPECT_EQ(refused, runs);  // every prefix without the closing brace is incomplete JSON
  EXPECT_NO_THROW(SnapshotManifest::from_json(ok.substr(0, close + 1), "no final newline"));
  refused = runs = 0;
  for (size_t i = 0; i < ok.size(); ++i)
    for (int bit = 0; bit < 8; ++bit) {
      std::string b = ok;
      b[i] = char(uint8_t(b[i]) ^ (1u << bit));
      run(b);
    }
  // A flip can leave a valid manifest only inside what the manifest cannot check (producer,
  // engine fingerprint, the 64-hex identities and payload hashes, whitespace): about one in
  // ten here; every other flip changes a checked or hashed value and is refused.
  EXPECT_GT(refused, runs * 4 / 5) << refused << " of " << runs;
}

}  // namespace
}  // namespace ember::kv
