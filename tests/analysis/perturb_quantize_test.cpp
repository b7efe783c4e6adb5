// kv perturb --quantize: whole cache rows quantized as llama.cpp's quantized KV caches are,
// receipted, canonical, bound to the source, applied only in memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "analysis/compare_fixtures.h"
#include "analysis/kv_quantize.h"
#include "analysis/perturb.h"
#include "gguf/dequantize.h"
#include "gguf/quantize.h"
#include "kv/llamacpp_state.h"
#include "support/test_support.h"
#include "util/f16.h"

namespace ember::analysis {
namespace {

using testing::synthetic_state;

PerturbSpec qspec(gguf::TensorType t, PerturbPart part, std::vector<int> layers = {}) {
  PerturbSpec s;
  s.quantize = t;
  s.part = part;
  s.layers = std::move(layers);
  return s;
}

// The applied values are exactly f16(dequantize(quantize_row_kv_cache(row))) for each
// (layer, position) row of all KV heads; unselected layers and V are untouched.
TEST(PerturbQuantize, AppliesLlamaCppRowsExactly) {
  const ComparedState src = synthetic_state(3, 2, 16, 5, 7);  // rows of 2 x 16 = 32
  const PerturbReceipt r = make_receipt(src, qspec(gguf::TensorType::Q4_0, PerturbPart::k, {1}));
  EXPECT_EQ(r.affected_k, 1u * 5 * 2 * 16);
  EXPECT_EQ(r.affected_v, 0u);
  EXPECT_GT(r.changed_k, 0u);
  const PerturbedState p = apply_perturbation(testing::copy_state(src), r);
  const model::KvCache& a = src.cache;
  const model::KvCache& b = p.state().cache;
  for (int pos = 0; pos < 5; ++pos) {
    float x[32], y[32];
    for (int h = 0; h < 2; ++h)
      for (int d = 0; d < 16; ++d) x[h * 16 + d] = f16_to_f32(a.k_row(1, h, pos)[d]);
    uint8_t blk[18];
    gguf::quantize_row_kv_cache(gguf::TensorType::Q4_0, x, blk, 32);
    gguf::dequantize_row(gguf::TensorType::Q4_0, blk, y, 32);
    for (int h = 0; h < 2; ++h)
      for (int d = 0; d < 16; ++d) {
        EXPECT_EQ(b.k_row(1, h, pos)[d], f32_to_f16(y[h * 16 + d]));
        EXPECT_EQ(b.k_row(0, h, pos)[d], a.k_row(0, h, pos)[d]);
        EXPECT_EQ(b.v_row(1, h, pos)[d], a.v_row(1, h, pos)[d]);
      }
  }
  EXPECT_EQ(p.state().identity.kind, "perturbed");
}

TEST(PerturbQuantize, ReceiptIsCanonicalAndRoundTrips) {
  const ComparedState src = synthetic_state(2, 4, 8, 3, 2);
  const PerturbReceipt r = make_receipt(src, qspec(gguf::TensorType::IQ4_NL, PerturbPart::kv));
  EXPECT_EQ(r.spec.layers, (std::vector<int>{0, 1}));  // default: all layers
  const std::string text = receipt_json(r);
  EXPECT_NE(text.find("\"kind\": \"quantize\""), std::string::npos);
  EXPECT_NE(text.find("\"type\": \"iq4_nl\""), std::string::npos);
  const PerturbReceipt back = parse_receipt(text, "r.json");
  EXPECT_EQ(receipt_json(back), text);
  EXPECT_EQ(*back.spec.quantize, gguf::TensorType::IQ4_NL);
  // Edited type or layers: refused (canonical form or counts no longer agree).
  std::string edited = text;
  edited.replace(edited.find("iq4_nl"), 6, "q8_0");
  const PerturbReceipt e = parse_receipt(edited, "r.json");
  EXPECT_NE(test::error_of([&] { apply_perturbation(testing::copy_state(src), e); }), "");
  std::string bad = text;
  bad.replace(bad.find("iq4_nl"), 6, "q4_K");
  EXPECT_NE(test::error_of([&] { parse_receipt(bad, "r.json"); }).find("operation.type"),
            std::string::npos);
}

TEST(PerturbQuantize, RefusesWhatLlamaCppCannotStore) {
  // 3 heads x 8 = 24 values per row: not a whole block.
  const ComparedState odd = synthetic_state(2, 3, 8, 3, 1);
  EXPECT_NE(test::error_of([&] { make_receipt(odd, qspec(gguf::TensorType::Q8_0, PerturbPart::k)); })
                .find("cache row length"),
            std::string::npos);
  const ComparedState src = synthetic_state(2, 4, 8, 3, 1);
  EXPECT_NE(test::error_of([&] { make_receipt(src, qspec(gguf::TensorType::Q8_0, PerturbPart::k, {2})); })
                .find("--layers"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { make_receipt(src, qspec(gguf::TensorType::Q8_0, PerturbPart::k, {1, 0})); })
                .find("ascending"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { make_receipt(src, qspec(gguf::TensorType::Q6_K, PerturbPart::k)); })
                .find("--quantize"),
            std::string::npos);
}


// head_dim 64: llama.cpp rotates quantized K (block 64 here) and V (64) before storing them.
// With rotation llamacpp (the default) each row is rotated per head with kv::llamacpp_hadamard,
// quantized, dequantized and unrotated; with none it is quantized as is. The receipt names the
// rotation and its blocks, parses back strictly, and an edited rotation no longer applies.
TEST(PerturbQuantize, ModelsLlamaCppsRotationWhereHeadDimIsAMultipleOf64) {
  const ComparedState src = synthetic_state(2, 2, 64, 3, 11);
  PerturbSpec spec = qspec(gguf::TensorType::Q4_0, PerturbPart::kv, {0});
  EXPECT_EQ(spec.rotation, KvRotation::llamacpp);
  const PerturbReceipt rot = make_receipt(src, spec);
  const PerturbedState p = apply_perturbation(testing::copy_state(src), rot);
  const model::KvCache& a = src.cache;
  const model::KvCache& b = p.state().cache;
  size_t differs_from_unrotated = 0;
  for (int pos = 0; pos < 3; ++pos) {
    float x[128], y[128], r[128];
    for (int h = 0; h < 2; ++h)
      for (int d = 0; d < 64; ++d) x[h * 64 + d] = f16_to_f32(a.k_row(0, h, pos)[d]);
    std::copy(x, x + 128, r);
    kv::llamacpp_hadamard(r, 64);
    kv::llamacpp_hadamard(r + 64, 64);
    uint8_t blk[4 * 18];
    gguf::quantize_row_kv_cache(gguf::TensorType::Q4_0, r, blk, 128);
    gguf::dequantize_row(gguf::TensorType::Q4_0, blk, y, 128);
    kv::llamacpp_hadamard(y, 64);
    kv::llamacpp_hadamard(y + 64, 64);
    float plain[128];
    gguf::quantize_row_kv_cache(gguf::TensorType::Q4_0, x, blk, 128);
    gguf::dequantize_row(gguf::TensorType::Q4_0, blk, plain, 128);
    for (int h = 0; h < 2; ++h)
      for (int d = 0; d < 64; ++d) {
        EXPECT_EQ(b.k_row(0, h, pos)[d], f32_to_f16(y[h * 64 + d]));
        differs_from_unrotated += b.k_row(0, h, pos)[d] != f32_to_f16(plain[h * 64 + d]);
      }
  }
  EXPECT_GT(differs_from_unrotated, 300u);  // of 384: the rotation is not a no-op here
  const std::string text = receipt_json(rot);
  EXPECT_NE(text.find("\"rotation\": \"llamacpp\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"rotation_block\": {\n      \"k\": 64,\n      \"v\": 64"),
            std::string::npos) << text;
  EXPECT_EQ(parse_receipt(text, "r.json").spec.rotation, KvRotation::llamacpp);

  spec.rotation = KvRotation::none;
  const PerturbReceipt plain = make_receipt(src, spec);
  const std::string none_text = receipt_json(plain);
  EXPECT_NE(none_text.find("\"rotation\": \"none\""), std::string::npos);
  EXPECT_NE(none_text.find("\"k\": 0"), std::string::npos);
  EXPECT_NE(plain.changed_k, rot.changed_k);
  // A receipt whose rotation was edited: its counts are the other rotation's, refused on apply.
  auto swap = [](std::string t, const std::string& from, const std::string& to) {
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  const std::string edited =
      swap(swap(swap(text, "\"rotation\": \"llamacpp\"", "\"rotation\": \"none\""), "\"k\": 64",
                "\"k\": 0"),
           "\"v\": 64", "\"v\": 0");
  const PerturbReceipt e = parse_receipt(edited, "r.json");
  EXPECT_NE(test::error_of([&] { apply_perturbation(testing::copy_state(src), e); })
                .find("changed_elements"),
            std::string::npos);
  // Unknown rotation, or a block that is not the rotation's for this head_dim: refused.
  const std::string bad = swap(text, "\"llamacpp\"", "\"hadamard\"");
  EXPECT_NE(test::error_of([&] { parse_receipt(bad, "r.json"); }).find("operation.rotation"),
            std::string::npos);
  const std::string bad_block = swap(text, "\"k\": 64", "\"k\": 32");
  EXPECT_NE(test::error_of([&] { parse_receipt(bad_block, "r.json"); }).find("canonical form"),
            std::string::npos);
  EXPECT_NE(test::error_of([] { parse_kv_rotation("Llamacpp", "kv perturb", "--rotation"); })
                .find("--rotation"),
            std::string::npos);
  // head_dim 8 and 32: no rotation applies, so llamacpp and none give the same bits.
  const ComparedState small = synthetic_state(2, 4, 32, 3, 5);
  PerturbSpec s2 = qspec(gguf::TensorType::Q8_0, PerturbPart::kv);
  const uint64_t with = make_receipt(small, s2).changed_k;
  s2.rotation = KvRotation::none;
  EXPECT_EQ(make_receipt(small, s2).changed_k, with);
  EXPECT_EQ(kv_rotation_block(KvRotation::llamacpp, 32, KvPart::k), 0);
  EXPECT_EQ(kv_rotation_block(KvRotation::llamacpp, 128, KvPart::k), 128);
  EXPECT_EQ(kv_rotation_block(KvRotation::llamacpp, 128, KvPart::v), 64);
  EXPECT_EQ(kv_rotation_block(KvRotation::none, 128, KvPart::k), 0);
}

// The shared rotation is llama.cpp's CPU fwht: f32, scale first, then butterflies. On a basis
// vector it gives exactly the column of ggml_gen_hadamard's matrix (+-1/sqrt(n) in f32), and
// twice applied it returns x to within f32 rounding.
TEST(PerturbQuantize, HadamardIsGgmlsFwht) {
  float e[64] = {};
  e[5] = 1.0f;
  kv::llamacpp_hadamard(e, 64);
  for (int i = 0; i < 64; ++i)
    EXPECT_EQ(e[i], (__builtin_popcount(unsigned(i & 5)) % 2 ? -1.0f : 1.0f) * 0.125f) << i;
  float x[128], y[128];
  for (int i = 0; i < 128; ++i) x[i] = y[i] = std::sin(0.37f * float(i)) * 3.0f;
  kv::llamacpp_hadamard(y, 128);
  kv::llamacpp_hadamard(y, 128);
  for (int i = 0; i < 128; ++i) EXPECT_NEAR(y[i], x[i], 4e-6f) << i;
}

}  // namespace
}  // namespace ember::analysis
