// The bytes ember writes do not move when its code does: a native snapshot of stories260K and the
// KVC1 file packed from it, pinned by SHA-256. The constants were produced by the binary before
// the one-state redesign (issue 29, ember 5c55d36 plus unrelated changes) and re-made by every
// binary since; a change here is a format change and needs a new version, not a new constant.
// Manifest version 2 (the proof object; payload hashes over block digests) re-made the manifest
// and KVC1 constants; the payload files did not move. Version 3 (the proof's witness, kv/witness.h)
// re-made them again; the payload files still did not move.
#include <gtest/gtest.h>

#include "support/cli_run.h"
#include "support/test_support.h"
#include "util/sha256.h"

namespace ember::test {
namespace {

TEST(GoldenBytes, NativeSnapshotAndItsKvc1AreByteStable) {
  const std::string model = shared_path("models/stories260K.gguf");
  const std::string dir = temp_dir("golden");
  ASSERT_EQ(run_ember("kv export --model " + q(model) + " --prompt 'Once upon a time there was a dog' --output " +
                      q(dir + "/snap")).rc, 0);
  ASSERT_EQ(run_ember("kvc pack " + q(dir + "/snap") + " " + q(dir + "/s.kvc")).rc, 0);
  EXPECT_EQ(sha256_file_hex(dir + "/snap/manifest.json"),
            "2465aa752086290255f0879fc44295bff41654e06654337f61f457822c5a2457");
  EXPECT_EQ(sha256_file_hex(dir + "/snap/keys.f16le"),
            "7e607df9ba73feaaf761a64ea31326d719261bd77f28c3bd18841f50ad26b36f");
  EXPECT_EQ(sha256_file_hex(dir + "/snap/values.f16le"),
            "6b96419e87d1af3fa6c75b1ee7ff74be0f15b77686054d3b35fa16227b219c2e");
  EXPECT_EQ(sha256_file_hex(dir + "/s.kvc"), "16ad826fefce20d07e5fa28324e8119bea8e37811d8dbb9f8176147c82b193ea");
}

}  // namespace
}  // namespace ember::test
