// The bytes ember writes do not move when its code does: a native snapshot of stories260K and the
// KVC1 file packed from it, pinned by SHA-256. The constants were produced by the binary before
// the one-state redesign (issue 29, ember 5c55d36 plus unrelated changes) and re-made by every
// binary since; a change here is a format change and needs a new version, not a new constant.
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
            "dbb791c858d54cc7a7754f75d337a4bd03adea0347ba5cf25a3434f46aa9bfa0");
  EXPECT_EQ(sha256_file_hex(dir + "/snap/keys.f16le"),
            "7e607df9ba73feaaf761a64ea31326d719261bd77f28c3bd18841f50ad26b36f");
  EXPECT_EQ(sha256_file_hex(dir + "/snap/values.f16le"),
            "6b96419e87d1af3fa6c75b1ee7ff74be0f15b77686054d3b35fa16227b219c2e");
  EXPECT_EQ(sha256_file_hex(dir + "/s.kvc"), "77afa004c2f8ac2ebb291c28101a6619b79e088609887477d24d98d15c6b7e00");
}

}  // namespace
}  // namespace ember::test
