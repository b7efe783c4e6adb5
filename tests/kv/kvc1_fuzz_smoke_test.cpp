// Runs the libFuzzer harness (fuzz/kvc1_fuzz.cpp) in every build: over the seed corpus and
// deterministic mutations of a valid container (every single-byte edit in the preamble and
// table, a sample elsewhere, every truncation length). Under ASan/UBSan in CI this is the
// fuzzer's smoke run; the harness itself fails only by crashing.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "../../fuzz/kvc1_fuzz.cpp"
#include "kv/kv_test_util.h"
#include "support/test_support.h"

namespace ember::kv {
namespace {

TEST(Kvc1Fuzz, SeedsAndMutationsNeverCrash) {
  int seeds = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(EMBER_SOURCE_DIR) + "/fuzz/corpus/kvc1")) {
    const auto b = test::read_bytes(e.path().string());
    LLVMFuzzerTestOneInput(b.data(), b.size());
    ++seeds;
  }
  EXPECT_GE(seeds, 3);
  const std::string dir = test::temp_dir("kvc1fuzz");
  write_state_kvc1(test::make_snapshot(2, 1, 4, 3), dir + "/s.kvc", false);
  const auto ok = test::read_bytes(dir + "/s.kvc");
  ASSERT_NO_THROW(Kvc1File::parse(std::make_shared<const std::vector<uint8_t>>(ok), "ok"));
  std::mt19937 rng(1);
  int refused = 0;
  auto run = [&](std::vector<uint8_t> b) {
    auto p = std::make_shared<const std::vector<uint8_t>>(std::move(b));
    try {
      Kvc1File::parse(p, "m");
    } catch (const Error&) {
      ++refused;
    }
    LLVMFuzzerTestOneInput(p->data(), p->size());
  };
  for (size_t len = 0; len < ok.size(); len += 7) run(std::vector<uint8_t>(ok.begin(), ok.begin() + len));
  for (size_t i = 0; i < ok.size(); ++i) {
    if (i > 512 && rng() % 8) continue;
    auto b = ok;
    b[i] ^= uint8_t(1u << (rng() % 8));
    run(b);
  }
  EXPECT_GT(refused, 100);  // every edit of a hashed file is refused
}

}  // namespace
}  // namespace ember::kv
