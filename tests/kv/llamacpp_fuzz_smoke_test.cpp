// Runs the libFuzzer harness (fuzz/kv_llamacpp_fuzz.cpp) in every build: over the seed corpus
// (which this test regenerates and compares, so the checked-in seeds cannot drift from the
// writer) and deterministic mutations of each seed (every single-byte edit of the headers, a
// sample of the payload, every truncation). Under ASan/UBSan in CI this is the fuzzer's smoke
// run. EMBER_WRITE_FUZZ_SEEDS=1 rewrites the seeds.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <random>

// The KVC1 smoke test links its own harness into this executable: rename this one's entry.
#define LLVMFuzzerTestOneInput kv_llamacpp_fuzz_one_input
#include "../../fuzz/kv_llamacpp_fuzz.cpp"
#undef LLVMFuzzerTestOneInput
#include "gguf/quantize.h"
#include "kv/kv_test_util.h"
#include "support/test_support.h"

namespace ember::kv {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes f16_seed(bool v_trans) {
  const KvState s = test::make_state(2, 1, 32, 3, 21);
  Bytes out;
  BufferSink sink(out);
  write_llamacpp_state(s.cache, s.manifest.prefix.tokens, v_trans, sink);
  return out;
}

// 1 layer, head_dim 64, 2 cells, K and V in `type` (rows).
Bytes quantized_seed(gguf::TensorType type) {
  Bytes out;
  BufferSink b(out);
  b.write_le(kGgsqMagic);
  b.write_le(kGgsqVersion);
  b.write_le(uint32_t(2));
  b.write_le(int32_t(1));
  b.write_le(int32_t(300));
  b.write_le(uint32_t(1));
  b.write_le(uint32_t(2));
  for (int i = 0; i < 2; ++i) {
    b.write_le(int32_t(i));
    b.write_le(uint32_t(1));
    b.write_le(int32_t(0));
  }
  b.write_le(uint32_t(0));
  b.write_le(uint32_t(1));
  std::vector<float> x(64);
  std::vector<uint8_t> q(gguf::row_bytes(type, 64));
  for (int part = 0; part < 2; ++part) {
    b.write_le(int32_t(type));
    b.write_le(uint64_t(q.size()));
    for (int c = 0; c < 2; ++c) {
      for (int i = 0; i < 64; ++i) x[i] = float((i * 7 + c * 3 + part) % 17) - 8.0f;
      gguf::quantize_row(type, x.data(), q.data(), 64);
      b.write(q.data(), q.size());
    }
  }
  return out;
}

TEST(LlamaCppFuzz, SeedsAreCurrentAndMutationsNeverCrash) {
  const std::string dir = std::string(EMBER_SOURCE_DIR) + "/fuzz/corpus/llamacpp/";
  const std::vector<std::pair<std::string, Bytes>> seeds = {
      {"f16-rows.seq", f16_seed(false)},
      {"f16-transposed.seq", f16_seed(true)},
      {"q8_0-rotated.seq", quantized_seed(gguf::TensorType::Q8_0)},
      {"q4_0-rotated.seq", quantized_seed(gguf::TensorType::Q4_0)},
  };
  const char* write = std::getenv("EMBER_WRITE_FUZZ_SEEDS");
  for (const auto& [name, bytes] : seeds) {
    if (write && std::string(write) == "1")
      std::ofstream(dir + name, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                         std::streamsize(bytes.size()));
    EXPECT_EQ(test::read_bytes(dir + name), bytes) << name << " drifted (EMBER_WRITE_FUZZ_SEEDS=1 rewrites it)";
  }
  const LlamaCppTarget a{2, 1, 32, 64, 512}, b{1, 1, 64, 64, 512};
  ASSERT_NO_THROW(parse_llamacpp_state(seeds[0].second, a, "s"));
  ASSERT_NO_THROW(parse_llamacpp_state(seeds[1].second, a, "s"));
  ASSERT_NO_THROW(parse_llamacpp_state(seeds[2].second, b, "s"));
  ASSERT_NO_THROW(parse_llamacpp_state(seeds[3].second, b, "s"));
  std::mt19937 rng(7);
  int runs = 0;
  for (const auto& [name, ok] : seeds) {
    kv_llamacpp_fuzz_one_input(ok.data(), ok.size());
    for (size_t len = 0; len < ok.size(); len += 3, ++runs) kv_llamacpp_fuzz_one_input(ok.data(), len);
    for (size_t i = 0; i < ok.size(); ++i) {
      if (i > 160 && rng() % 16) continue;
      Bytes m = ok;
      m[i] ^= uint8_t(1u << (rng() % 8));
      kv_llamacpp_fuzz_one_input(m.data(), m.size());
      m[i] = uint8_t(rng());
      kv_llamacpp_fuzz_one_input(m.data(), m.size());
      runs += 2;
    }
  }
  EXPECT_GT(runs, 500);
}

}  // namespace
}  // namespace ember::kv
