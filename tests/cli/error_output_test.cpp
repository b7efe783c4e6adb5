// What the CLI prints for an error built from a file's text (defect 8, issue 12).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "map/mapper.h"
#include "support/test_support.h"
#include "util/atomic_file.h"

namespace ember::cli {
namespace {

// A mapper manifest with an unknown key holding ESC, NUL and a newline: `ember map apply`
// refuses it naming the key, on one escaped line. Checked failing before with main's binary:
// the key was accepted (no error at all); a manifest string value's ESC reached stderr raw.
TEST(ErrorOutput, FileTextInAnErrorIsOneEscapedLine) {
  const map::ModelGeometry g{"a", "llama", 2, 2, 4, 8};
  const std::string dir = test::temp_dir("err_esc") + "/m";
  map::identity_mapper(g, g, "t", 0, "quantization-boundary").write(dir, false);
  std::string text = read_file(dir + "/manifest.json");
  text.insert(text.find('{') + 1, "\"\\u001b[2J\\u0000x\\ny\": 1,");
  write_file_atomic(dir + "/manifest.json", text, true);
  std::string out;
  const int rc = test::run_command(test::ember_binary() + " map apply --mapper " + dir +
                                       " --snapshot /nonexistent --target x.gguf --output " + dir + "-out",
                                   &out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_EQ(out.find('\0'), std::string::npos) << out;
  EXPECT_NE(out.find("manifest.json: \\x1b[2J\\x00x\\x0ay: expected no such key, found an unknown key"),
            std::string::npos)
      << out;
  // A string value from the file in the found part: the same.
  map::identity_mapper(g, g, "t", 0, "quantization-boundary").write(dir, true);
  text = read_file(dir + "/manifest.json");
  const size_t at = text.find("\"identity\"", text.find("\"kind\""));
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 10, "\"\\u001b[2Jx\\ny\"");
  write_file_atomic(dir + "/manifest.json", text, true);
  EXPECT_EQ(test::run_command(test::ember_binary() + " map apply --mapper " + dir +
                                  " --snapshot /nonexistent --target x.gguf --output " + dir + "-out",
                              &out),
            2);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_NE(out.find("manifest.json: kind: expected identity, ridge or affine, found \\x1b[2Jx\\x0ay\n"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace ember::cli
