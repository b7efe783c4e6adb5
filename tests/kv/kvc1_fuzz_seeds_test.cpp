// The checked-in KVC1 fuzz seeds (fuzz/corpus/kvc1/) are exactly what this code generates, and
// each is a valid container of its kind. Regenerate after a deliberate format change with
//   EMBER_REGENERATE_FUZZ_SEEDS=1 build/tests/ember_kv_tests --gtest_filter='Kvc1FuzzSeeds.*'
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "kv/kv_test_util.h"
#include "kv/kvc1_snapshot.h"
#include "support/test_support.h"

namespace ember::kv {
namespace {

std::vector<std::pair<std::string, std::string>> seeds() {
  const std::string dir = test::temp_dir("kvc1seeds");
  std::vector<std::pair<std::string, std::string>> out;
  write_state_kvc1(test::make_snapshot(2, 1, 4, 3), dir + "/tiny-f16.kvc", false);
  out.emplace_back("tiny-f16.kvc", test::slurp(dir + "/tiny-f16.kvc"));
  test::write_state(test::make_mapped_state(2, 1, 4, 3), dir + "/mapped");
  pack_snapshot_dir(dir + "/mapped", dir + "/mapped-f16.kvc", false);
  out.emplace_back("mapped-f16.kvc", test::slurp(dir + "/mapped-f16.kvc"));
  // A container-level state (not an ember manifest) of another dtype: the table and payload
  // rules for f32 (the state reader then refuses it, which the harness also exercises).
  const nlohmann::json h = {{"artifact", {{"kind", "native"}}},
                            {"format", kKvc1Format},
                            {"state", {{"geometry", {{"layers", 2}, {"kv_heads", 1}, {"head_dim", 4}, {"positions", 2}}},
                                       {"representation", {{"dtype", "f32"}}}}}};
  std::vector<float> data(8);
  for (size_t i = 0; i < data.size(); ++i) data[i] = float(i) * 0.25f - 1.0f;
  std::vector<Kvc1TensorSource> src;
  for (uint32_t i = 0; i < 4; ++i) {
    Kvc1TensorSource t;
    t.layer = i / 2;
    t.is_value = i % 2;
    t.dtype = Kvc1Dtype::f32;
    t.shape[0] = 1; t.shape[1] = 2; t.shape[2] = 4;
    t.emit = [&data](ByteSink& s) { s.write(data.data(), data.size() * 4); };
    src.push_back(t);
  }
  write_kvc1_file(dir + "/f32-2layers.kvc", h, src, false);
  out.emplace_back("f32-2layers.kvc", test::slurp(dir + "/f32-2layers.kvc"));
  return out;
}

TEST(Kvc1FuzzSeeds, CheckedInSeedsAreTheGeneratedOnes) {
  const std::string corpus = std::string(EMBER_SOURCE_DIR) + "/fuzz/corpus/kvc1";
  const auto want = seeds();
  if (std::getenv("EMBER_REGENERATE_FUZZ_SEEDS")) {
    for (const auto& e : std::filesystem::directory_iterator(corpus)) std::filesystem::remove(e.path());
    for (const auto& [name, bytes] : want) test::spit(corpus + "/" + name, bytes);
  }
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(corpus)) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, want.size()) << "fuzz/corpus/kvc1 holds files this test does not generate";
  for (const auto& [name, bytes] : want) {
    EXPECT_EQ(test::slurp(corpus + "/" + name), bytes) << name << " drifted; regenerate (see the file comment)";
    const auto f = Kvc1File::parse(std::make_shared<const std::vector<uint8_t>>(bytes.begin(), bytes.end()), name);
    EXPECT_EQ(f.artifact_kind(), name.rfind("mapped", 0) == 0 ? "mapped" : "native") << name;
  }
}

}  // namespace
}  // namespace ember::kv
