// Runs the mapper and calibration-set fuzz harnesses (fuzz/map_mapper_fuzz.cpp,
// fuzz/map_calibration_fuzz.cpp) in every build, over their seed corpora, whose names say what
// the reader must do with each (ok-* accepted, bad-* refused), and over deterministic
// mutations of one accepted seed (every truncation of the manifest, single-bit flips across
// manifest and payload). Under ASan/UBSan in CI this is the fuzzers' smoke run; the harnesses
// fail only by crashing or trapping.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#define LLVMFuzzerTestOneInput map_mapper_fuzz_one_input
#include "../../fuzz/map_mapper_fuzz.cpp"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput map_calibration_fuzz_one_input
#include "../../fuzz/map_calibration_fuzz.cpp"
#undef LLVMFuzzerTestOneInput

#include "kv/kv_test_util.h"

namespace ember::map {
namespace {

const std::string kCorpus = std::string(EMBER_SOURCE_DIR) + "/fuzz/corpus/";

using Harness = int (*)(const uint8_t*, size_t);
using Reader = std::function<void(const fuzz::ManifestAndPayload&)>;

void feed(Harness h, const std::string& in) { h(reinterpret_cast<const uint8_t*>(in.data()), in.size()); }

bool accepted(const Reader& read, const std::string& in) {
  try {
    read(fuzz::split_manifest_and_payload(reinterpret_cast<const uint8_t*>(in.data()), in.size()));
    return true;
  } catch (const Error&) {
    return false;
  }
}

void seeds_behave_as_named(const std::string& corpus, Harness h, const Reader& read) {
  int ok = 0, bad = 0;
  for (const auto& e : std::filesystem::directory_iterator(kCorpus + corpus)) {
    const std::string name = e.path().filename().string();
    const std::string in = test::slurp(e.path().string());
    feed(h, in);
    if (name.rfind("ok-", 0) == 0) {
      EXPECT_TRUE(accepted(read, in)) << corpus << "/" << name;
      ++ok;
    } else {
      ASSERT_EQ(name.rfind("bad-", 0), 0u) << "seed names start with ok- or bad-: " << name;
      EXPECT_FALSE(accepted(read, in)) << corpus << "/" << name;
      ++bad;
    }
  }
  EXPECT_GE(ok, 1);
  EXPECT_GE(bad, 3);
}

// Every truncation inside the manifest is refused (incomplete JSON or a missing payload); bit
// flips across the whole input never crash, and most are refused (the rest land in values the
// reader cannot check, such as R² figures, or in the payload, which carries its own hash).
void mutations_never_crash(const std::string& seed, Harness h, const Reader& read) {
  const std::string ok = test::slurp(kCorpus + seed);
  ASSERT_TRUE(accepted(read, ok)) << seed;
  const size_t manifest_end = ok.find("\n@@payload@@\n");
  ASSERT_NE(manifest_end, std::string::npos);
  int refused = 0, runs = 0;
  for (size_t len = 0; len < manifest_end; ++len) {
    const std::string cut = ok.substr(0, len);
    feed(h, cut);
    ++runs;
    refused += !accepted(read, cut);
  }
  EXPECT_EQ(refused, runs);
  refused = runs = 0;
  for (size_t i = 0; i < ok.size(); i += 3) {
    std::string b = ok;
    b[i] = char(uint8_t(b[i]) ^ (1u << (i % 8)));
    feed(h, b);
    if (i >= manifest_end) continue;  // payload values are data: any f32/f64 bits are a value
    ++runs;
    refused += !accepted(read, b);
  }
  EXPECT_GT(refused, runs / 2) << refused << " of " << runs << " manifest flips refused";
}

const Reader kMapper = [](const fuzz::ManifestAndPayload& in) {
  Mapper::parse(in.manifest, reinterpret_cast<const uint8_t*>(in.payload.data()), in.payload.size(), "m", "w");
};
const Reader kCalibration = [](const fuzz::ManifestAndPayload& in) {
  CalibrationSet::parse(in.manifest, reinterpret_cast<const uint8_t*>(in.payload.data()), in.payload.size(), "m", "r");
};

TEST(MapperFuzz, SeedsAreAcceptedOrRefusedAsNamed) {
  seeds_behave_as_named("mapper", map_mapper_fuzz_one_input, kMapper);
}
TEST(MapperFuzz, TruncationsAndBitFlipsNeverCrash) {
  mutations_never_crash("mapper/ok-affine-residual", map_mapper_fuzz_one_input, kMapper);
}
TEST(CalibrationFuzz, SeedsAreAcceptedOrRefusedAsNamed) {
  seeds_behave_as_named("calibration", map_calibration_fuzz_one_input, kCalibration);
}
TEST(CalibrationFuzz, TruncationsAndBitFlipsNeverCrash) {
  mutations_never_crash("calibration/ok-two-prompts", map_calibration_fuzz_one_input, kCalibration);
}

}  // namespace
}  // namespace ember::map
