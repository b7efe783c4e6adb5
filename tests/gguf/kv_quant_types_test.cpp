// The KV-cache quantizers (q8_0 both encoders, q4_1, q5_0, q5_1, iq4_nl): blocks computed by
// hand from GGML's reference arithmetic, and the round-trip error bound of every type.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "gguf/blocks.h"
#include "gguf/dequantize.h"
#include "gguf/quantize.h"
#include "util/f16.h"

namespace ember::gguf {
namespace {

// x[j] = j - 16 (j = 0..31): for q5_0 the first largest magnitude is -16, so d = -16 / -16 =
// 1, q = int(x + 16.5) = j; low nibbles j & 15, bit 4 set exactly for j >= 16.
TEST(KvQuantTypes, Q5_0ByHand) {
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = float(j - 16);
  BlockQ5_0 b;
  ASSERT_EQ(quantize_row(TensorType::Q5_0, x, &b, 32), sizeof b);
  EXPECT_EQ(load_u16(b.d), 0x3c00);  // 1.0
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  EXPECT_EQ(qh, 0xffff0000u);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(b.qs[j], uint8_t(j | (j << 4))) << j;
  float y[32];
  dequantize_row(TensorType::Q5_0, &b, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], x[j]);
}

// Same x for q5_1: min -16, max 15, d = 31 / 31 = 1, m = -16, q = uint8(x + 16 + 0.5) = j.
TEST(KvQuantTypes, Q5_1ByHand) {
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = float(j - 16);
  BlockQ5_1 b;
  quantize_row(TensorType::Q5_1, x, &b, 32);
  EXPECT_EQ(load_u16(b.d), 0x3c00);
  EXPECT_EQ(load_u16(b.m), 0xcc00);  // -16
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  EXPECT_EQ(qh, 0xffff0000u);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(b.qs[j], uint8_t(j | (j << 4))) << j;
}

// x[j] = j & 15: q4_1 min 0, max 15, d = 1, m = 0, q = x.
TEST(KvQuantTypes, Q4_1ByHand) {
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = float(j & 15);
  BlockQ4_1 b;
  quantize_row(TensorType::Q4_1, x, &b, 32);
  EXPECT_EQ(load_u16(b.d), 0x3c00);
  EXPECT_EQ(load_u16(b.m), 0x0000);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(b.qs[j], uint8_t(j | (j << 4))) << j;
}

// x = the iq4_nl table itself, twice: max = -127 (first), d0 = -127 / -127 = 1, every element
// is its own nearest table value, and the fitted scale sum(w q x) / sum(w q^2) is exactly 1.
TEST(KvQuantTypes, Iq4NlByHand) {
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = float(kIQ4NLValues[j & 15]);
  BlockIQ4_NL b;
  ASSERT_EQ(quantize_row_kv_cache(TensorType::IQ4_NL, x, &b, 32), 18u);
  EXPECT_EQ(load_u16(b.d), 0x3c00);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(b.qs[j], uint8_t(j | (j << 4))) << j;
  float y[32];
  dequantize_row(TensorType::IQ4_NL, &b, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], x[j]);
  // A (near-)zero block: d = 0 and every value decodes to 0.
  float z[32] = {};
  quantize_row(TensorType::IQ4_NL, z, &b, 32);
  dequantize_row(TensorType::IQ4_NL, &b, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.0f);
}

// amax 127 makes d = 1 for both Q8_0 encoders; they differ on ties: the reference (roundf)
// rounds 2.5 to 3 and -2.5 to -3, the x86 CPU encoder (ties to even) to 2 and -2, 0.5 to 0.
TEST(KvQuantTypes, Q8_0EncodersDifferOnTies) {
  float x[32] = {127.0f, 2.5f, -2.5f, 0.5f, 1.5f};
  BlockQ8_0 ref, cpu;
  quantize_row(TensorType::Q8_0, x, &ref, 32);
  quantize_row_kv_cache(TensorType::Q8_0, x, &cpu, 32);
  EXPECT_EQ(load_u16(ref.d), 0x3c00);
  EXPECT_EQ(load_u16(cpu.d), 0x3c00);
  const int8_t want_ref[5] = {127, 3, -3, 1, 2}, want_cpu[5] = {127, 2, -2, 0, 2};
  for (int j = 0; j < 5; ++j) {
    EXPECT_EQ(ref.qs[j], want_ref[j]) << j;
    EXPECT_EQ(cpu.qs[j], want_cpu[j]) << j;
  }
}

// Round trip on pseudo-random rows: every element within the type's step of the input
// (q8_0: d/2; *_0 symmetric: d; *_1 and iq4_nl: a bound of the same order), plus f16 slack.
TEST(KvQuantTypes, RoundTripErrorBounds) {
  uint32_t s = 12345;
  std::vector<float> x(256), y(256);
  for (float& v : x) {
    s = s * 1664525u + 1013904223u;
    v = (float(int32_t(s >> 8) % 20000) - 10000.0f) / 4000.0f;
  }
  const struct {
    TensorType t;
    double step_frac;  // max |err| / max |x| of a block
  } cases[] = {{TensorType::Q8_0, 0.5 / 127 + 1e-3}, {TensorType::Q4_0, 1.0 / 8 + 1e-3},
               {TensorType::Q4_1, 1.0 / 15 + 1e-2}, {TensorType::Q5_0, 1.0 / 16 + 1e-3},
               {TensorType::Q5_1, 1.0 / 31 + 1e-2}, {TensorType::IQ4_NL, 0.2}};
  for (const auto& c : cases) {
    std::vector<uint8_t> q(size_t(row_bytes(c.t, 256)));
    quantize_row_kv_cache(c.t, x.data(), q.data(), 256);
    dequantize_row(c.t, q.data(), y.data(), 256);
    for (int b = 0; b < 8; ++b) {
      double amax = 0, err = 0;
      for (int j = 0; j < 32; ++j) {
        amax = std::fmax(amax, std::fabs(x[32 * b + j]));
        err = std::fmax(err, std::fabs(double(x[32 * b + j]) - y[32 * b + j]));
      }
      EXPECT_LE(err, c.step_frac * amax * 2) << type_name(uint32_t(c.t)) << " block " << b;
      EXPECT_GT(err, 0.0) << type_name(uint32_t(c.t));
    }
  }
  EXPECT_FALSE(is_kv_cache_quant_type(TensorType::Q4_K));
  EXPECT_NE(std::string::npos, [] {
    try {
      float z[32] = {};
      uint8_t out[300];
      quantize_row_kv_cache(TensorType::Q6_K, z, out, 32);
    } catch (const std::exception& e) {
      return std::string(e.what()).find("KV cache type");
    }
    return std::string::npos;
  }());
}

}  // namespace
}  // namespace ember::gguf
