// The checked-in libFuzzer seed corpus (fuzz/corpus/gguf/) is exactly what this code
// generates, and every seed parses. Regenerate after a deliberate format change with
//   EMBER_REGENERATE_FUZZ_SEEDS=1 build/tests/ember_gguf_tests --gtest_filter='FuzzSeeds.*'
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "gguf/synth.h"
#include "gguf_fixture.h"
#include "support/test_support.h"

namespace ember::gguf {
namespace {

std::vector<std::pair<std::string, std::vector<uint8_t>>> seeds() {
  std::vector<std::pair<std::string, std::vector<uint8_t>>> out;
  const auto valid = fixture::to_bytes(fixture::valid_writer());
  out.emplace_back("values-and-tensors.gguf", valid);
  auto v2 = valid;
  fixture::poke<uint32_t>(v2, 4, 2);
  out.emplace_back("version2.gguf", v2);
  // One 256-element tensor of every supported type (bytes from a fixed pattern).
  GgufWriter all;
  all.set_string("general.architecture", "llama");
  for (const char* name : {"f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_K",
                           "q5_K", "q6_K"}) {
    const TensorType t = *parse_type_name(name);
    std::vector<uint8_t> b(size_t(row_bytes(t, 256)));
    for (size_t i = 0; i < b.size(); ++i) b[i] = uint8_t((i * 37 + 11) ^ (i >> 3));
    all.add_tensor(std::string("t.") + name, {256}, t, std::move(b));
  }
  out.emplace_back("all-types.gguf", fixture::to_bytes(all));
  SynthSpec s;
  s.arch = "llama";
  s.layers = 1, s.hidden = 32, s.heads = 2, s.kv_heads = 1, s.ffn = 32, s.vocab = 258;
  s.type = TensorType::Q8_0, s.seed = 1;
  out.emplace_back("synth-llama-q8_0.gguf", fixture::to_bytes(synth_model(s)));
  s.arch = "qwen3", s.qk_norm = true, s.tied = true, s.type = TensorType::F16, s.head_dim = 8;
  out.emplace_back("synth-qwen3-f16.gguf", fixture::to_bytes(synth_model(s)));
  return out;
}

TEST(FuzzSeeds, CheckedInSeedsAreTheGeneratedOnesAndParse) {
  const std::string dir = std::string(EMBER_SOURCE_DIR) + "/fuzz/corpus/gguf";
  const char* regen = std::getenv("EMBER_REGENERATE_FUZZ_SEEDS");
  for (const auto& [name, bytes] : seeds()) {
    SCOPED_TRACE(name);
    EXPECT_NO_THROW(fixture::parse_bytes(bytes));
    EXPECT_LT(bytes.size(), 64u * 1024);  // keep the corpus small: libFuzzer's max_len follows it
    if (regen && std::string(regen) == "1") {
      std::ofstream(dir + "/" + name, std::ios::binary)
          .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    }
    EXPECT_EQ(ember::test::read_bytes(dir + "/" + name), bytes)
        << "fuzz seed out of date: regenerate it (see the comment at the top of this test)";
  }
}

}  // namespace
}  // namespace ember::gguf
