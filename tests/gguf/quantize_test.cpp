// Quantize -> dequantize error bounds per type (derived in docs/formats/gguf-types.md), and
// agreement with files written by llama.cpp: our reference quantizers reproduce its bytes,
// and its quantized tensors dequantize within the type's bound of the F32 original.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gguf/blocks.h"
#include "gguf/dequantize.h"
#include "gguf/gguf_file.h"
#include "gguf/quantize.h"
#include "support/test_support.h"
#include "util/error.h"
#include "util/f16.h"

namespace ember::gguf {
namespace {

constexpr double kF16Rel = 1.0 / 2048;  // relative rounding of an f16 scale: 2^-11

std::vector<float> gaussian(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, sigma);
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng);
  return x;
}

std::vector<uint8_t> quantize(TensorType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(row_bytes(t, x.size()));
  EXPECT_EQ(quantize_row(t, x.data(), q.data(), int64_t(x.size())), q.size());
  return q;
}

std::vector<float> dequantize(TensorType t, const std::vector<uint8_t>& q, size_t n) {
  std::vector<float> y(n);
  dequantize_row(t, q.data(), y.data(), int64_t(n));
  return y;
}

// The per-element bound of the *_0 types for a block quantized from x (derived in the docs):
// Q8_0: |e| <= d (1/2 + 127 * 2^-11), d = amax / 127.
// Q4_0 / Q5_0: d = max / -H (H = 8 / 16); codes run from -H to H - 1, so the one end at
// +H|d| is clipped to H - 1: |e| <= |d| (1 + H 2^-11) there, |e| <= |d| (1/2 + H 2^-11)
// elsewhere.
double block0_bound(TensorType t, const float* xb, float xe) {
  float amax = 0, max = 0;
  for (int j = 0; j < kQK; ++j)
    if (std::fabs(xb[j]) > amax) amax = std::fabs(xb[j]), max = xb[j];
  const double slack = 1e-6 * amax;
  if (t == TensorType::Q8_0) return amax / 127.0 * (0.5 + 127 * kF16Rel) + slack;
  const double H = t == TensorType::Q4_0 ? 8 : 16;
  const double d = std::fabs(max) / H;
  const bool clipped_end = xe * max < 0 && std::fabs(xe) / d > H - 0.5;
  return d * ((clipped_end ? 1.0 : 0.5) + H * kF16Rel) + slack;
}

TEST(Quantize, BlockZeroTypesStayWithinTheirDerivedBound) {
  for (TensorType t : {TensorType::Q8_0, TensorType::Q4_0}) {
    auto x = gaussian(32 * 300, 3);
    x[5] = 0;
    std::fill(x.begin() + 64, x.begin() + 96, 0.0f);  // an all-zero block
    x[200] = 1e-30f;                                   // f16 underflow of d
    const auto y = dequantize(t, quantize(t, x), x.size());
    for (size_t e = 0; e < x.size(); ++e) {
      const float* xb = x.data() + e / 32 * 32;
      ASSERT_LE(std::fabs(y[e] - x[e]), block0_bound(t, xb, x[e]))
          << type_name(uint32_t(t)) << " element " << e;
    }
  }
}

// K types: every element whose scaled value lies inside the code range is within half a step
// of the stored sub-block scale (the final codes are nearest-rounded against the scales as
// stored); clipped elements and the scale search are covered by an RMS bound measured on
// N(0, 1) data with a 25% margin (docs/formats/gguf-types.md).
struct KStats {
  double rms_rel;
  size_t in_range, checked;
};

KStats check_k(TensorType t, const float* x, const uint8_t* q, size_t n) {
  std::vector<float> y(n);
  dequantize_row(t, q, y.data(), int64_t(n));
  KStats s{0, 0, 0};
  double se = 0, sx = 0;
  for (size_t e = 0; e < n; ++e) {
    se += double(y[e] - x[e]) * (y[e] - x[e]);
    sx += double(x[e]) * x[e];
    const size_t b = e / kQKK, j = e % kQKK;
    double ds, lo, hi, v;
    if (t == TensorType::Q6_K) {
      const auto* blk = reinterpret_cast<const BlockQ6_K*>(q) + b;
      ds = double(f16_to_f32(load_u16(blk->d)) * float(blk->scales[j / 16]));
      v = x[e] / ds, lo = -32.5, hi = 31.5;
    } else {
      const uint8_t* blk = q + b * (t == TensorType::Q4_K ? 144 : 176);
      const double top = t == TensorType::Q4_K ? 15.5 : 31.5;
      uint8_t sc, m;
      unpack_k4_scale(int(j / 32), blk + 4, &sc, &m);
      ds = double(f16_to_f32(load_u16(blk)) * float(sc));
      const double dm = double(f16_to_f32(load_u16(blk + 2)) * float(m));
      v = (x[e] + dm) / ds, lo = -0.5, hi = top;
    }
    ++s.checked;
    if (ds == 0 || !(v > lo && v < hi)) continue;
    ++s.in_range;
    EXPECT_LE(std::fabs(y[e] - x[e]), std::fabs(ds) * (0.5 + 1e-5) + 1e-6 * std::fabs(x[e]))
        << type_name(uint32_t(t)) << " element " << e;
  }
  s.rms_rel = std::sqrt(se / sx);
  return s;
}

TEST(Quantize, KTypesStayWithinHalfAStepAndTheirRmsBound) {
  // Measured relative RMS error on this N(0,1) data: Q4_K 0.0628, Q6_K 0.0162; bound = 1.25x.
  const std::map<TensorType, double> rms_bound = {{TensorType::Q4_K, 0.0785},
                                                  {TensorType::Q6_K, 0.0203}};
  for (auto [t, bound] : rms_bound) {
    auto x = gaussian(256 * 64, 9);
    std::fill(x.begin() + 256, x.begin() + 512, 0.0f);  // an all-zero super-block
    for (int j = 0; j < 256; ++j) x[1024 + j] = 3.0f + 0.01f * j;  // all positive: min clamps to 0
    const auto q = quantize(t, x);
    const KStats s = check_k(t, x.data(), q.data(), x.size());
    EXPECT_LE(s.rms_rel, bound) << type_name(uint32_t(t));
    EXPECT_GT(s.in_range, s.checked * 9 / 10) << type_name(uint32_t(t));
    std::printf("%s: relative RMS error %.4f, %zu of %zu elements in range\n",
                type_name(uint32_t(t)).c_str(), s.rms_rel, s.in_range, s.checked);
  }
}

TEST(Quantize, RejectsBadLengthsTypesAndNonFiniteValues) {
  std::vector<float> x(256, 1.0f);
  std::vector<uint8_t> q(1024);
  EXPECT_THROW(quantize_row(TensorType::Q4_K, x.data(), q.data(), 128), Error);
  EXPECT_THROW(quantize_row(TensorType::Q5_K, x.data(), q.data(), 256), Error);
  x[7] = std::nanf("");
  EXPECT_THROW(quantize_row(TensorType::Q8_0, x.data(), q.data(), 256), Error);
  EXPECT_FALSE(can_quantize_to(TensorType::F16));
  EXPECT_TRUE(can_quantize_to(TensorType::Q6_K));
}

TEST(Dequantize, UnsupportedTypeNamesTensorAndType) {
  TensorInfo t;
  t.name = "blk.0.attn_q.weight";
  t.shape = {256, 1};
  t.type = TensorType::Q2_K;
  try {
    dequantize_tensor(t);
    FAIL();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("blk.0.attn_q.weight"), std::string::npos) << m;
    EXPECT_NE(m.find("q2_K"), std::string::npos) << m;
  }
}

TEST(Dequantize, F16AndBf16ConvertEveryPatternExactly) {
  std::vector<uint16_t> h(65536);
  for (uint32_t i = 0; i < 65536; ++i) h[i] = uint16_t(i);
  std::vector<float> y(65536);
  dequantize_row(TensorType::F16, h.data(), y.data(), 65536);
  for (uint32_t i = 0; i < 65536; ++i)
    ASSERT_EQ(f32_to_bits(y[i]), f32_to_bits(f16_to_f32(uint16_t(i)))) << i;
  dequantize_row(TensorType::BF16, h.data(), y.data(), 65536);
  for (uint32_t i = 0; i < 65536; ++i) ASSERT_EQ(f32_to_bits(y[i]), i << 16) << i;
}

// Hand-built blocks against values worked out from the layout in blocks.h.
TEST(Dequantize, HandBuiltBlocksDecodeAsTheLayoutSays) {
  // Q4_K: d = 1, dmin = 0.5; sub-block 5 has sc = 0b100011 (35) and m = 0b010110 (22).
  BlockQ4_K k4{};
  const uint16_t one = f32_to_f16(1.0f), half = f32_to_f16(0.5f);
  std::memcpy(k4.d, &one, 2);
  std::memcpy(k4.dmin, &half, 2);
  k4.scales[9] = uint8_t((35 & 0xF) | ((22 & 0xF) << 4));
  k4.scales[1] = uint8_t((35 >> 4) << 6);
  k4.scales[5] = uint8_t((22 >> 4) << 6);
  k4.qs[32 * 2 + 3] = 0x70;  // element 64*2 + 32 + 3 (sub-block 5) has q = 7
  float y[256];
  dequantize_row(TensorType::Q4_K, &k4, y, 256);
  EXPECT_EQ(y[64 * 2 + 32 + 3], 35.0f * 7 - 0.5f * 22);
  EXPECT_EQ(y[64 * 2 + 32 + 4], -0.5f * 22);
  // Q6_K: element 128 + 64 + 5 (half 1, group 2) with q = 0b110101 (53), scale[12] = -3.
  BlockQ6_K k6{};
  std::memcpy(k6.d, &half, 2);
  k6.scales[12] = -3;
  k6.ql[64 + 5] = uint8_t(0x5 << 4);
  k6.qh[32 + 5] = uint8_t(0x3 << 4);
  dequantize_row(TensorType::Q6_K, &k6, y, 256);
  EXPECT_EQ(y[128 + 64 + 5], 0.5f * -3 * (53 - 32));
  // Q5_0: element 17 has high bit 1 (qh bit 17) and low nibble 2 (high nibble of qs[1]).
  BlockQ5_0 q5{};
  std::memcpy(q5.d, &half, 2);
  const uint32_t qh = 1u << 17;
  std::memcpy(q5.qh, &qh, 4);
  q5.qs[1] = 0x20;
  dequantize_row(TensorType::Q5_0, &q5, y, 32);
  EXPECT_EQ(y[17], 0.5f * ((16 + 2) - 16));
  EXPECT_EQ(y[1], 0.5f * -16);
}

// ---- Files written by llama.cpp (../shared/models) --------------------------------------

struct Pair {
  const char* quantized;
  const char* original;  // the F32 file it was quantized from
};
const Pair kPairs[] = {
    {"models/stories260K-Q8_0.gguf", "models/stories260K.gguf"},
    {"models/stories260K-Q4_0.gguf", "models/stories260K.gguf"},
    {"models/stories260K-Q4_K_M.gguf", "models/stories260K.gguf"},
    {"models/synthetic/llama-gqa-s5005.Q4_K_M.gguf", "models/synthetic/llama-gqa-s5005.F32.gguf"},
    {"models/synthetic/llama-gqa-s5005.Q5_K_M.gguf", "models/synthetic/llama-gqa-s5005.F32.gguf"},
    {"models/synthetic/llama-gqa-s5005.Q6_K.gguf", "models/synthetic/llama-gqa-s5005.F32.gguf"},
    {"models/synthetic/qwen2-bias-s5006.Q8_0.gguf", "models/synthetic/qwen2-bias-s5006.F32.gguf"},
    {"models/synthetic/qwen2-bias-s5006.Q4_K_M.gguf", "models/synthetic/qwen2-bias-s5006.F32.gguf"},
};

// Relative RMS bounds on these files' N(0, sigma) weights: 1.25x the largest per-tensor value
// measured over all of them (Q4_K 0.0721, Q5_K 0.0363, Q6_K 0.0180).
const std::map<TensorType, double> kFileRmsBound = {
    {TensorType::Q4_K, 0.090}, {TensorType::Q5_K, 0.0454}, {TensorType::Q6_K, 0.0225}};

TEST(SharedFiles, QuantizedTensorsDequantizeWithinTheTypeBound) {
  std::map<std::string, double> worst_rms;
  for (const Pair& p : kPairs) {
    SCOPED_TRACE(p.quantized);
    const GgufFile q = GgufFile::open(test::shared_path(p.quantized));
    const GgufFile f = GgufFile::open(test::shared_path(p.original));
    for (const TensorInfo& t : q.tensors()) {
      const TensorInfo& o = f.tensor(t.name);
      ASSERT_EQ(o.type, TensorType::F32) << t.name;
      ASSERT_EQ(o.shape, t.shape) << t.name;
      const std::vector<float> x = dequantize_tensor(o), y = dequantize_tensor(t);
      const size_t n = x.size();
      switch (t.type) {
        case TensorType::F32:
          EXPECT_EQ(0, std::memcmp(x.data(), y.data(), n * 4)) << t.name;
          break;
        case TensorType::F16:
          for (size_t e = 0; e < n; ++e)
            ASSERT_LE(std::fabs(y[e] - x[e]), kF16Rel * std::fabs(x[e]) + 0x1p-25) << t.name;
          break;
        case TensorType::Q8_0: case TensorType::Q4_0: case TensorType::Q5_0:
          for (size_t e = 0; e < n; ++e)
            ASSERT_LE(std::fabs(y[e] - x[e]), block0_bound(t.type, x.data() + e / 32 * 32, x[e]))
                << t.name << " element " << e;
          break;
        case TensorType::Q4_K: case TensorType::Q5_K: case TensorType::Q6_K: {
          const KStats s = check_k(t.type, x.data(), t.data, n);
          EXPECT_LE(s.rms_rel, kFileRmsBound.at(t.type)) << t.name;
          double& w = worst_rms[type_name(uint32_t(t.type))];
          w = std::max(w, s.rms_rel);
          break;
        }
        default: ADD_FAILURE() << t.name << ": unexpected type " << type_name(uint32_t(t.type));
      }
    }
  }
  for (auto& [name, v] : worst_rms) std::printf("%s: worst relative RMS error %.4f\n", name.c_str(), v);
}

// Requantizing the F32 original with our reference quantizers reproduces llama.cpp's bytes
// for every tensor of a type we write (Q8_0, Q4_0, Q4_K, Q6_K, and Q5_0, which llama-quantize
// chose for the rows of the K-quant files that do not fit a 256-block).
TEST(SharedFiles, OurQuantizersReproduceLlamaCppBytes) {
  std::map<std::string, std::pair<int, int>> tally;  // type -> (identical, total)
  for (const Pair& p : kPairs) {
    SCOPED_TRACE(p.quantized);
    const GgufFile q = GgufFile::open(test::shared_path(p.quantized));
    const GgufFile f = GgufFile::open(test::shared_path(p.original));
    for (const TensorInfo& t : q.tensors()) {
      if (!can_quantize_to(t.type)) continue;
      const std::vector<float> x = dequantize_tensor(f.tensor(t.name));
      std::vector<uint8_t> ours(t.n_bytes);
      const uint64_t rb = row_bytes(t.type, t.row_length());
      for (uint64_t r = 0; r < t.n_rows(); ++r)
        quantize_row(t.type, x.data() + r * t.row_length(), ours.data() + r * rb,
                     int64_t(t.row_length()));
      const bool same = std::memcmp(ours.data(), t.data, t.n_bytes) == 0;
      auto& c = tally[type_name(uint32_t(t.type))];
      c.first += same;
      ++c.second;
      size_t diff = 0;
      for (size_t i = 0; i < t.n_bytes; ++i) diff += ours[i] != t.data[i];
      EXPECT_TRUE(same) << t.name << " (" << type_name(uint32_t(t.type)) << "): " << diff
                        << " of " << t.n_bytes << " bytes differ";
    }
  }
  for (auto& [name, c] : tally)
    std::printf("%s: %d of %d tensors byte-identical to llama.cpp\n", name.c_str(), c.first, c.second);
  EXPECT_EQ(tally.size(), 5u);  // q4_0, q4_K, q5_0, q6_K, q8_0 occur in the shared files
}

}  // namespace
}  // namespace ember::gguf
