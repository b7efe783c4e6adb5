// Issue 35, items 7 and 8, through the `ember` binary: what reaches the terminal is escaped.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf/writer.h"
#include "support/cli_run.h"
#include "support/test_support.h"
#include "util/atomic_file.h"
#include "util/byte_io.h"

namespace ember::cli {
namespace {

using test::q;
using test::run_ember;

bool ascii_without_controls(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x80 && (u >= 0x20 || c == '\n');
  });
}

// Item 7: `model inspect --json` of a GGUF whose strings hold invalid UTF-8 exited with
// nlohmann's raw "[json.exception.type_error.316]" message, and printed U+202E (a bidi override
// that reorders what a terminal shows) raw. Checked failing before: rc 2 and the raw message.
TEST(TerminalOutput, InspectJsonIsAsciiWhateverTheFileHolds) {
  gguf::GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", "name\xff\xfe-\xe2\x80\xae-txt.exe");
  w.add_tensor("w\xe2\x80\xae.weight", {4}, gguf::TensorType::F32, std::vector<uint8_t>(16, 0));
  const std::string path = test::temp_dir("cli-json") + "/bidi.gguf";
  std::vector<uint8_t> bytes;
  BufferSink sink(bytes);
  w.write(sink);
  write_file_atomic(path, std::string(bytes.begin(), bytes.end()), false);
  std::string out;
  ASSERT_EQ(test::run_command(test::ember_binary() + " model inspect --json " + q(path) + " 2>/dev/null", &out), 0)
      << out;
  EXPECT_TRUE(ascii_without_controls(out)) << out;
  EXPECT_EQ(out.find("json.exception"), std::string::npos) << out;
  const nlohmann::json j = nlohmann::json::parse(out);  // still JSON, the same strings
  EXPECT_NE(j.dump().find("\xe2\x80\xae"), std::string::npos);  // U+202E, escaped on the wire only
  EXPECT_NE(out.find("\\u202e"), std::string::npos) << out;
  EXPECT_NE(out.find("name\\ufffd\\ufffd-"), std::string::npos) << out;  // invalid bytes: U+FFFD
}

// Item 8: `kv export`, `kvc pack`, `model quantize` (and `model synth`, `kvc unpack`) echoed an
// output path holding control characters raw. Checked failing before: ESC reached stdout.
TEST(TerminalOutput, OutputPathsAreEchoedEscaped) {
  const std::string dir = test::temp_dir("cli-echo");
  const std::string model = test::shared_path("models/stories260K.gguf");
  const std::string evil = dir + "/o\x1b[2J\x1b]0;t\x07";
  const std::string shown = dir + "/o\\x1b[2J\\x1b]0;t\\x07";
  const std::vector<std::string> runs = {
      "kv export --model " + q(model) + " --prompt hi --output " + q(evil + "snap"),
      "kvc pack " + q(evil + "snap") + " " + q(evil + ".kvc"),
      "kvc unpack " + q(evil + ".kvc") + " " + q(evil + "unpacked"),
      "model quantize " + q(model) + " " + q(evil + ".gguf") + " --type q8_0",
      "model synth --arch llama --layers 1 --hidden 64 --heads 4 --kv-heads 2 --ffn 64 --vocab 300 --seed 1 -o " +
          q(evil + "synth.gguf"),
  };
  for (const std::string& args : runs) {
    SCOPED_TRACE(args);
    const test::CliRun r = run_ember(args);
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find('\x07'), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(shown), std::string::npos) << r.out;
  }
}

}  // namespace
}  // namespace ember::cli
