// matmul / dot_f32 under "canonical-v1": every SIMD path the CPU supports must give the same
// bits as the scalar reference for every weight type, shape, token count and thread count
// (memcmp, no tolerance); and the kernels must agree with an f64 dot of the dequantized
// weights within a bound derived from the 8-bit activation quantization.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "support/test_support.h"
#include "gguf/blocks.h"
#include "gguf/dequantize.h"
#include "ops/dot.h"
#include "ops/matmul.h"
#include "util/error.h"
#include "util/f16.h"

namespace ember {
namespace {

using gguf::TensorType;

const TensorType kAllTypes[] = {TensorType::F32,  TensorType::F16,  TensorType::BF16,
                                TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0,
                                TensorType::Q5_1, TensorType::Q8_0, TensorType::Q4_K,
                                TensorType::Q5_K, TensorType::Q6_K};

int block_elems(TensorType t) {
  gguf::BlockGeometry g;
  EXPECT_TRUE(gguf::block_geometry(t, &g));
  return g.elems;
}

void put_f16(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

// Random weights of `type`: random code bytes (so every code, including GGML's extremes such
// as Q8_0's -128 and Q6_K's scale -128, occurs), with the f16 scale fields overwritten by
// moderate values so the products stay finite.
std::vector<uint8_t> random_weights(TensorType type, int64_t m, int64_t k, std::mt19937& rng) {
  gguf::BlockGeometry g;
  gguf::block_geometry(type, &g);
  const int64_t n_blocks = m * k / g.elems;
  std::vector<uint8_t> w(size_t(n_blocks * g.bytes));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  for (auto& b : w) b = uint8_t(byte(rng));
  for (int64_t i = 0; i < n_blocks; ++i) {
    uint8_t* p = w.data() + i * g.bytes;
    switch (type) {
      case TensorType::F32: {
        const float v = val(rng);
        std::memcpy(p, &v, 4);
        break;
      }
      case TensorType::F16: put_f16(p, val(rng)); break;
      case TensorType::BF16: {
        const uint16_t h = f32_to_bf16(val(rng));
        std::memcpy(p, &h, 2);
        break;
      }
      case TensorType::Q4_0: case TensorType::Q5_0: case TensorType::Q8_0:
        put_f16(p, 0.05f * val(rng));
        break;
      case TensorType::Q4_1: case TensorType::Q5_1:
        put_f16(p, 0.05f * val(rng));
        put_f16(p + 2, 0.2f * val(rng));
        break;
      case TensorType::Q4_K: case TensorType::Q5_K:
        put_f16(p, 0.002f * std::fabs(val(rng)));
        put_f16(p + 2, 0.002f * std::fabs(val(rng)));
        break;
      case TensorType::Q6_K: put_f16(p + 208, 0.0005f * val(rng)); break;
      default: ADD_FAILURE();
    }
  }
  return w;
}

std::vector<float> random_acts(int64_t n, int64_t k, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(size_t(n * k));
  for (auto& v : x) v = nd(rng);
  // A few zero blocks and outliers, which exercise the activation quantizer's edge cases.
  if (k >= 64) std::fill(x.begin(), x.begin() + 32, 0.0f);
  if (x.size() > 100) x[100] = 40.0f, x[x.size() - 1] = -55.0f;
  return x;
}

std::vector<float> run(const ops::WeightMatrix& W, const std::vector<float>& x, int64_t n,
                       int threads, SimdLevel level) {
  ThreadPool pool(threads);
  std::vector<float> y(size_t(n * W.rows), -12345.0f);
  ops::matmul(W, x.data(), n, y.data(), pool, level);
  return y;
}

std::string describe(TensorType t, int64_t m, int64_t k, int64_t n, int threads,
                     SimdLevel level) {
  return gguf::type_name(uint32_t(t)) + " m=" + std::to_string(m) + " k=" +
         std::to_string(k) + " n=" + std::to_string(n) + " threads=" + std::to_string(threads) +
         " path=" + simd_name(level);
}

TEST(Matmul, EveryPathMatchesScalarBitForBit) {
  std::mt19937 rng(7);
  for (TensorType type : kAllTypes) {
    const int be = block_elems(type);
    std::vector<int64_t> ks;
    if (be == 32) ks = {32, 64 + 32, 256 * 3, 32 * 5};
    if (be == 256) ks = {256, 256 * 3, 256 * 2};
    if (be == 1) ks = {1, 15, 16, 17, 32, 64 + 32, 172, 256 * 3 + 5};
    for (int64_t k : ks) {
      for (int64_t m : {1, 5, 37}) {
        const auto w = random_weights(type, m, k, rng);
        const ops::WeightMatrix W{type, w.data(), m, k};
        for (int64_t n : {1, 7}) {
          const auto x = random_acts(n, k, rng);
          const auto ref = run(W, x, n, 1, SimdLevel::scalar);
          for (float v : ref) ASSERT_TRUE(std::isfinite(v)) << describe(type, m, k, n, 1, SimdLevel::scalar);
          for (SimdLevel level : test::simd_levels_under_test())
            for (int threads : {1, 2, 3}) {
              const auto y = run(W, x, n, threads, level);
              ASSERT_EQ(0, std::memcmp(ref.data(), y.data(), ref.size() * 4))
                  << describe(type, m, k, n, threads, level);
            }
        }
      }
    }
  }
}

// Prefill tiles, their remainders and the token chunks (the kernels walk a few hundred KB
// of activations at a time: at k = 4864 a chunk is 20-215 tokens, depending on the type and
// the core's L2): every token count from 2 to 13 (each tile remainder of every path), and 500
// tokens (several chunks, with a remainder), for row counts that leave row-block remainders,
// on every path and 1/2/3 threads, bit for bit against the scalar reference.
TEST(Matmul, TilesRemaindersAndTokenChunksMatchScalar) {
  std::mt19937 rng(19);
  const int64_t k = 4864;
  for (TensorType type : kAllTypes) {
    const int64_t m = 11;
    const auto w = random_weights(type, m, k, rng);
    const ops::WeightMatrix W{type, w.data(), m, k};
    const auto x = random_acts(500, k, rng);
    const auto ref = run(W, x, 500, 1, SimdLevel::scalar);
    for (SimdLevel level : test::simd_levels_under_test()) {
      for (int threads : {1, 2, 3}) {
        const auto y = run(W, x, 500, threads, level);
        ASSERT_EQ(0, std::memcmp(ref.data(), y.data(), ref.size() * 4))
            << describe(type, m, k, 500, threads, level);
      }
      for (int64_t n = 2; n <= 13; ++n) {
        const auto y = run(W, x, n, 2, level);  // the first n tokens: a prefix of ref
        ASSERT_EQ(0, std::memcmp(ref.data(), y.data(), size_t(n * m) * 4))
            << describe(type, m, k, n, 2, level);
      }
    }
  }
}

// The avx2 panel (ops/q32_panel.h) walks the blocks in chunks of 32, even and odd blocks
// apart, and the tokens in pairs, the VNNI panel (ops/q32_vnni_panel.h) in chunks of 64 and
// groups of 4 tokens: 67 blocks (chunks of 32, 32 and 3, or 64 and 3, the last one ending on
// an even block) and 19 tokens (a single last token; a last group of 3) must still give the
// scalar bits.
TEST(Matmul, OddBlockCountsAndTokenPairsMatchScalar) {
  std::mt19937 rng(23);
  const int64_t k = 32 * 67, m = 9, n = 19;
  for (TensorType type : {TensorType::Q8_0, TensorType::Q4_0, TensorType::Q5_0}) {
    const auto w = random_weights(type, m, k, rng);
    const ops::WeightMatrix W{type, w.data(), m, k};
    const auto x = random_acts(n, k, rng);
    const auto ref = run(W, x, n, 1, SimdLevel::scalar);
    for (SimdLevel level : test::simd_levels_under_test()) {
      const auto y = run(W, x, n, 2, level);
      ASSERT_EQ(0, std::memcmp(ref.data(), y.data(), ref.size() * 4)) << describe(type, m, k, n, 2, level);
    }
  }
}

// Prefill of n tokens and n decodes of one token give the same bits (contract (b)).
TEST(Matmul, BatchedEqualsOneTokenAtATime) {
  std::mt19937 rng(11);
  for (TensorType type : kAllTypes) {
    const int64_t k = block_elems(type) == 256 ? 512 : 96, m = 19, n = 9;
    const auto w = random_weights(type, m, k, rng);
    const ops::WeightMatrix W{type, w.data(), m, k};
    const auto x = random_acts(n, k, rng);
    for (SimdLevel level : test::simd_levels_under_test()) {
      const auto batched = run(W, x, n, 2, level);
      for (int64_t t = 0; t < n; ++t) {
        const std::vector<float> xt(x.begin() + t * k, x.begin() + (t + 1) * k);
        const auto one = run(W, xt, 1, 1, level);
        ASSERT_EQ(0, std::memcmp(one.data(), batched.data() + t * m, size_t(m) * 4))
            << describe(type, m, k, n, 2, level) << " token " << t;
      }
    }
  }
}

// The kernels compute the right thing, not just a consistent one: compare with an f64 dot of
// the dequantized weights. For quantized weights the activations are rounded to 8-bit
// blocks first; element e of a block with largest magnitude amax moves by at most
// 0.5 * amax / 127 from rounding plus 127 * (amax / 127) * 2^-11 from storing the Q8_0 scale
// as f16, so the bound is sum_e |w_e| * 0.57 * amax(e) / 127, plus 1e-5 relative slack for
// the f32 accumulation.
TEST(Matmul, AgreesWithF64ReferenceOfDequantizedWeights) {
  std::mt19937 rng(13);
  for (TensorType type : kAllTypes) {
    const int be = block_elems(type);
    const int64_t k = be == 256 ? 768 : (be == 32 ? 160 : 172), m = 23, n = 3;
    const auto w = random_weights(type, m, k, rng);
    const ops::WeightMatrix W{type, w.data(), m, k};
    const auto x = random_acts(n, k, rng);
    std::vector<float> wf(size_t(m * k));
    gguf::dequantize_row(type, w.data(), wf.data(), m * k);
    const int act_block = be == 1 ? 1 : be;
    for (SimdLevel level : test::simd_levels_under_test()) {
      const auto y = run(W, x, n, 2, level);
      for (int64_t t = 0; t < n; ++t)
        for (int64_t i = 0; i < m; ++i) {
          double ref = 0, mag = 0, qbound = 0;
          for (int64_t e = 0; e < k; ++e) {
            const double wv = wf[i * k + e], xv = x[t * k + e];
            ref += wv * xv;
            mag += std::fabs(wv * xv);
            if (act_block > 1) {
              float amax = 0;
              const int64_t b0 = e / act_block * act_block;
              for (int64_t j = b0; j < b0 + act_block; ++j)
                amax = std::max(amax, std::fabs(x[t * k + j]));
              qbound += std::fabs(wv) * 0.57 * amax / 127.0;
            }
          }
          const double tol = qbound + 1e-5 * mag + 1e-6;
          ASSERT_NEAR(y[t * m + i], ref, tol) << describe(type, m, k, n, 2, level) << " row " << i
                                              << " token " << t;
        }
    }
  }
}

// Worst-case blocks: the largest integer sums the contract claims exact in f32. One token
// takes the decode tiles; 12 tokens of 5 rows take the prefill tiles and panels (int16 codes
// on avx2) and a row left over.
TEST(Matmul, ExtremeCodesStayExact) {
  const int64_t k = 512, rows = 5;
  // Q6_K: scale -128 and code 0 (q - 32 = -32) everywhere, d = 1.
  std::vector<uint8_t> q6(size_t(rows) * 2 * sizeof(gguf::BlockQ6_K), 0);
  for (int64_t b = 0; b < rows * 2; ++b) {
    auto* blk = reinterpret_cast<gguf::BlockQ6_K*>(q6.data()) + b;
    for (auto& s : blk->scales) s = -128;
    put_f16(blk->d, 1.0f);
  }
  // Q8_0: code -128 everywhere, d = 1.
  std::vector<uint8_t> q8(size_t(rows * k / 32 * 34), 0x80);
  for (int64_t b = 0; b < rows * k / 32; ++b) put_f16(q8.data() + 34 * b, 1.0f);
  // Activation scales: Q8_K keeps 1 / (127 / 1) in f32, Q8_0 stores 1 / 127 as f16.
  const double d8k = 1.0f / 127.0f, d80 = f16_to_f32(f32_to_f16(1.0f / 127.0f));
  for (auto [type, bytes, expect] :
       {std::tuple{TensorType::Q6_K, &q6, double(k) * -128 * -32 * -127 * d8k},
        std::tuple{TensorType::Q8_0, &q8, double(k) * -128 * -127 * d80}}) {
    const ops::WeightMatrix W{type, bytes->data(), rows, k};
    for (int64_t n : {1, 12}) {
      const std::vector<float> x(size_t(n * k), -1.0f);  // quantizes to -127 everywhere
      for (SimdLevel level : test::simd_levels_under_test()) {
        const auto y = run(W, x, n, 1, level);
        for (float v : y)
          ASSERT_NEAR(v, expect, 1e-6 * std::fabs(expect))
              << gguf::type_name(uint32_t(type)) << " " << simd_name(level) << " n=" << n;
      }
    }
  }
}

// matmul_shared quantizes x once per activation format and splits every matrix's rows in one
// parallel section: each output must still be the bits of its own matmul call, for matrices
// of mixed types (float, 32-block and K-quant formats side by side), on every path and
// thread count.
TEST(Matmul, SharedInputGivesTheBitsOfSeparateCalls) {
  std::mt19937 rng(17);
  const int64_t k = 512;
  const TensorType types[] = {TensorType::Q8_0, TensorType::Q4_K, TensorType::F16,
                              TensorType::Q6_K, TensorType::Q4_0};
  const int64_t rows[] = {37, 20, 5, 64, 1};
  std::vector<std::vector<uint8_t>> w;
  std::vector<ops::WeightMatrix> Ws;
  for (int i = 0; i < 5; ++i) {
    w.push_back(random_weights(types[i], rows[i], k, rng));
    Ws.push_back({types[i], w.back().data(), rows[i], k});
  }
  for (int64_t n : {1, 9}) {
    const auto x = random_acts(n, k, rng);
    for (SimdLevel level : test::simd_levels_under_test())
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        std::vector<std::vector<float>> ys;
        std::vector<float*> yp;
        for (int i = 0; i < 5; ++i) ys.emplace_back(size_t(n * rows[i]), -1.0f);
        for (auto& y : ys) yp.push_back(y.data());
        ops::matmul_shared(Ws, x.data(), n, yp, pool, level);
        for (int i = 0; i < 5; ++i) {
          const auto one = run(Ws[size_t(i)], x, n, 1, SimdLevel::scalar);
          ASSERT_EQ(0, std::memcmp(one.data(), ys[size_t(i)].data(), one.size() * 4))
              << describe(types[i], rows[i], k, n, threads, level) << " (shared)";
        }
      }
  }
  // Widths must agree.
  ThreadPool pool(1);
  std::vector<uint8_t> w2 = random_weights(TensorType::Q8_0, 2, 256, rng);
  const ops::WeightMatrix bad[2] = {Ws[0], {TensorType::Q8_0, w2.data(), 2, 256}};
  std::vector<float> xz(static_cast<size_t>(k)), y0(37), y1(2);
  float* const yb[2] = {y0.data(), y1.data()};
  EXPECT_THROW(ops::matmul_shared(bad, xz.data(), 1, yb, pool), Error);
}

TEST(Matmul, RejectsUnsupportedTypeAndBadShape) {
  ThreadPool pool(1);
  std::vector<uint8_t> w(1024);
  std::vector<float> x(256), y(4);
  EXPECT_THROW(ops::matmul({TensorType::Q2_K, w.data(), 1, 256}, x.data(), 1, y.data(), pool),
               Error);
  EXPECT_THROW(ops::matmul({TensorType::Q8_0, w.data(), 1, 48}, x.data(), 1, y.data(), pool),
               Error);
  EXPECT_THROW(ops::matmul({TensorType::Q4_K, w.data(), 1, 128}, x.data(), 1, y.data(), pool),
               Error);
}

TEST(DotF32, EveryPathMatchesScalarAndF64) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t k : {0, 1, 3, 15, 16, 17, 31, 33, 64, 100, 257, 1000}) {
    std::vector<float> a(static_cast<size_t>(k)), b(static_cast<size_t>(k));
    for (auto& v : a) v = nd(rng);
    for (auto& v : b) v = nd(rng);
    const float ref = ops::dot_f32(a.data(), b.data(), k, SimdLevel::scalar);
    double exact = 0, mag = 0;
    for (int64_t j = 0; j < k; ++j) exact += double(a[j]) * b[j], mag += std::fabs(double(a[j]) * b[j]);
    EXPECT_NEAR(ref, exact, 1e-6 * mag + 1e-30) << k;
    for (SimdLevel level : test::simd_levels_under_test()) {
      const float v = ops::dot_f32(a.data(), b.data(), k, level);
      EXPECT_EQ(0, std::memcmp(&v, &ref, 4)) << "k=" << k << " " << simd_name(level);
    }
  }
}

}  // namespace
}  // namespace ember
