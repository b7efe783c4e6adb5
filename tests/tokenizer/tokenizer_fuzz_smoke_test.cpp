// Runs the tokenizer fuzz harness (fuzz/tokenizer_fuzz.cpp) in every build over its seeds
// (fuzz/corpus/tokenizer: one per mode of the first byte), every truncation of each, and
// single-bit flips across each, so the sanitizer pass in CI is its smoke run. The harness
// fails only by crashing or trapping (the ember-bytes mode traps when a round trip breaks).
#include <gtest/gtest.h>

#include <filesystem>

#include "../../fuzz/tokenizer_fuzz.cpp"

#include "kv/kv_test_util.h"

namespace ember::tok {
namespace {

void feed(const std::string& in) { LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(in.data()), in.size()); }

TEST(TokenizerFuzz, SeedsTruncationsAndBitFlipsNeverCrash) {
  int seeds = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(EMBER_SOURCE_DIR) + "/fuzz/corpus/tokenizer")) {
    const std::string in = test::slurp(e.path().string());
    ++seeds;
    feed(in);
    for (size_t len = 0; len < in.size(); len += in.size() > 512 ? 13 : 1) feed(in.substr(0, len));
    for (size_t i = 1; i < in.size(); i += in.size() > 512 ? 11 : 1) {  // byte 0 picks the mode: kept
      std::string b = in;
      b[i] = char(uint8_t(b[i]) ^ (1u << (i % 8)));
      feed(b);
    }
  }
  EXPECT_GE(seeds, 4);
}

}  // namespace
}  // namespace ember::tok
