// kv perturb --quantize: whole cache rows quantized as llama.cpp's quantized KV caches are,
// receipted, canonical, bound to the source, applied only in memory.
#include <gtest/gtest.h>

#include <vector>

#include "analysis/compare_fixtures.h"
#include "analysis/kv_quantize.h"
#include "analysis/perturb.h"
#include "gguf/dequantize.h"
#include "gguf/quantize.h"
#include "support/test_support.h"
#include "util/f16.h"

namespace ember::kv {
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

}  // namespace
}  // namespace ember::kv
