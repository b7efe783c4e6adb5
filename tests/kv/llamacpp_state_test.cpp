// The llama.cpp `ggsq` v3 reader and writer without a model: the exact bytes of a tiny case,
// round trips in both V layouts, quantized rows decoded as ggml does (and llama.cpp's Hadamard
// rotation undone), and every edited field refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "gguf/dequantize.h"
#include "gguf/quantize.h"
#include "kv/kv_test_util.h"
#include "kv/llamacpp_state.h"
#include "support/test_support.h"
#include "util/error.h"
#include "util/f16.h"

namespace ember::kv {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes write_state(const model::KvCache& c, const std::vector<int32_t>& tokens, bool v_trans) {
  Bytes out;
  BufferSink sink(out);
  write_llamacpp_state(c, tokens, v_trans, sink);
  return out;
}

void put_u32(Bytes& b, size_t at, uint32_t v) { std::memcpy(b.data() + at, &v, 4); }
void put_u64(Bytes& b, size_t at, uint64_t v) { std::memcpy(b.data() + at, &v, 8); }

// Appends little-endian scalars (hand-built files).
struct Builder {
  Bytes b;
  template <typename T>
  Builder& le(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof v);
    return *this;
  }
  Builder& raw(const void* p, size_t n) {
    b.insert(b.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
    return *this;
  }
  // Header, one stream, P cells of sequence 0 at positions 0..P-1, v_trans, n_layer.
  Builder& head(const std::vector<int32_t>& tokens, uint32_t v_trans, uint32_t layers) {
    le(kGgsqMagic).le(kGgsqVersion).le(uint32_t(tokens.size()));
    for (int32_t t : tokens) le(t);
    le(uint32_t(1)).le(uint32_t(tokens.size()));
    for (size_t i = 0; i < tokens.size(); ++i) le(int32_t(i)).le(uint32_t(1)).le(int32_t(0));
    return le(v_trans).le(layers);
  }
};

std::string error_of(const Bytes& b, const LlamaCppTarget& t) {
  return test::error_of([&] { parse_llamacpp_state(b, t, "s.seq"); });
}

// 1 layer, 1 KV head, head_dim 2, 2 cells: every byte of the file, both layouts.
TEST(LlamaCppState, TinyCaseExactBytes) {
  model::KvCache c(1, 1, 2, 2);
  c.n_pos = 2;
  const uint16_t k[4] = {0x3c00, 0x4000, 0xbc00, 0x3800};  // 1, 2 | -1, 0.5
  const uint16_t v[4] = {0x4200, 0x4400, 0x0001, 0x8000};  // 3, 4 | subnormal, -0
  std::memcpy(c.k_row(0, 0, 0), k, sizeof k);
  std::memcpy(c.v_row(0, 0, 0), v, sizeof v);
  const Bytes rows = write_state(c, {1, 7}, false);
  const Bytes want_rows = {
      0x71, 0x73, 0x67, 0x67, 3, 0, 0, 0,                    // magic "qsgg", version 3
      2, 0, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0,                    // n_token_count 2, tokens 1, 7
      1, 0, 0, 0, 2, 0, 0, 0,                                // n_stream 1, cell_count 2
      0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,                    // cell 0: pos 0, 1 seq, seq 0
      1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,                    // cell 1: pos 1, 1 seq, seq 0
      0, 0, 0, 0, 1, 0, 0, 0,                                // v_trans 0, n_layer 1
      1, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0,                    // K: type f16, row 4 bytes
      0x00, 0x3c, 0x00, 0x40, 0x00, 0xbc, 0x00, 0x38,        // K rows: cell 0, cell 1
      1, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0,                    // V: type f16, row 4 bytes
      0x00, 0x42, 0x00, 0x44, 0x01, 0x00, 0x00, 0x80,        // V rows
  };
  EXPECT_EQ(rows, want_rows);
  const Bytes trans = write_state(c, {1, 7}, true);
  Bytes want_trans(want_rows.begin(), want_rows.begin() + 80);  // up to the V part
  want_trans[52] = 1;  // v_trans 1
  const Bytes tail = {1, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0,  // V: f16, element 2 bytes, n_embd_v_gqa 2
                      0x00, 0x42, 0x01, 0x00,              // element 0 of cells 0, 1
                      0x00, 0x44, 0x00, 0x80};             // element 1 of cells 0, 1
  want_trans.insert(want_trans.end(), tail.begin(), tail.end());
  EXPECT_EQ(trans, want_trans);
  for (const Bytes* b : {&rows, &trans}) {
    const LlamaCppState s = parse_llamacpp_state(*b, {1, 1, 2, 8, 16}, "tiny");
    EXPECT_EQ(s.tokens, (std::vector<int32_t>{1, 7}));
    EXPECT_EQ(s.v_trans, b == &trans);
    EXPECT_EQ(std::memcmp(s.cache.k.data(), k, sizeof k), 0);
    EXPECT_EQ(std::memcmp(s.cache.v.data(), v, sizeof v), 0);
    EXPECT_TRUE(s.exact());
  }
}

TEST(LlamaCppState, RoundTripKeepsEveryBitInBothLayouts) {
  const KvState snap = test::make_state(3, 2, 32, 7, 11);
  for (bool v_trans : {false, true}) {
    const Bytes b = write_state(snap.cache, snap.manifest.prefix.tokens, v_trans);
    const LlamaCppState s = parse_llamacpp_state(b, {3, 2, 32, 64, 512}, "rt");
    EXPECT_EQ(s.tokens, snap.manifest.prefix.tokens);
    EXPECT_EQ(s.cache.k, snap.cache.k);
    EXPECT_EQ(s.cache.v, snap.cache.v);
    EXPECT_EQ(s.type_k, kGgmlF16);
    EXPECT_EQ(s.rot_k, 0);
  }
}

// A file with K and V in `type` (rows): `blocks` holds the raw rows, [layer][part][cell].
Bytes raw_file(int32_t type, int layers, uint64_t row, const std::vector<uint8_t>& blocks,
               const std::vector<int32_t>& tokens) {
  Builder f;
  f.head(tokens, 0, uint32_t(layers));
  const size_t per_part = tokens.size() * row;
  for (int part = 0; part < 2; ++part)
    for (int l = 0; l < layers; ++l) {
      f.le(type).le(row);
      f.raw(blocks.data() + (size_t(l) * 2 + part) * per_part, per_part);
    }
  return f.b;
}

// Values x[layer][cell][n_embd] quantized by ember's ggml-exact quantizer, as K and V.
Bytes quantized_file(gguf::TensorType type, int layers, int n_embd, const std::vector<float>& x,
                     const std::vector<int32_t>& tokens) {
  const uint64_t row = gguf::row_bytes(type, uint64_t(n_embd));
  std::vector<uint8_t> blocks(size_t(layers) * 2 * tokens.size() * row);
  for (int l = 0; l < layers; ++l)
    for (int part = 0; part < 2; ++part)
      for (size_t c = 0; c < tokens.size(); ++c)
        gguf::quantize_row(type, x.data() + (size_t(l) * tokens.size() + c) * n_embd,
                           blocks.data() + ((size_t(l) * 2 + part) * tokens.size() + c) * row, n_embd);
  return raw_file(int32_t(type), layers, row, blocks, tokens);
}

TEST(LlamaCppState, QuantizedRowsDecodeAsGgmlDoes) {
  const int n_embd = 64;  // 2 heads of 32: head_dim not a multiple of 64, so never rotated
  std::mt19937 rng(3);
  for (gguf::TensorType type : {gguf::TensorType::Q8_0, gguf::TensorType::Q4_0, gguf::TensorType::Q4_1,
                                gguf::TensorType::Q5_0, gguf::TensorType::Q5_1}) {
    // Random blocks whose f16 scale (and min) fields are small finite values.
    const uint64_t row = gguf::row_bytes(type, n_embd);
    const uint32_t block = uint32_t(row / 2);
    std::vector<uint8_t> blocks(2 * 2 * 3 * row);
    for (auto& x : blocks) x = uint8_t(rng());
    for (size_t at = 0; at < blocks.size(); at += block) {
      const uint16_t d = f32_to_f16(float(rng() % 1000) / 4000.0f);
      std::memcpy(&blocks[at], &d, 2);
      if (type == gguf::TensorType::Q4_1 || type == gguf::TensorType::Q5_1) {
        const uint16_t m = f32_to_f16(-float(rng() % 1000) / 1000.0f);
        std::memcpy(&blocks[at + 2], &m, 2);
      }
    }
    const Bytes b = raw_file(int32_t(type), 2, row, blocks, {1, 2, 3});
    const LlamaCppState s = parse_llamacpp_state(b, {2, 2, 32, 16, 16}, "q");
    EXPECT_FALSE(s.exact());
    EXPECT_EQ(s.rot_k, 0);
    std::vector<float> y(n_embd);
    for (int l = 0; l < 2; ++l)
      for (int part = 0; part < 2; ++part)
        for (int c = 0; c < 3; ++c) {
          gguf::dequantize_row(type, blocks.data() + ((size_t(l) * 2 + part) * 3 + c) * row, y.data(), n_embd);
          for (int e = 0; e < n_embd; ++e) {
            const uint16_t got = part == 0 ? s.cache.k_row(l, e / 32, c)[e % 32] : s.cache.v_row(l, e / 32, c)[e % 32];
            ASSERT_EQ(got, f32_to_f16(y[e])) << gguf::type_name(uint32_t(type));
          }
        }
  }
}

TEST(LlamaCppState, Iq4NlUsesGgmlsTable) {
  uint8_t block[18] = {};
  const uint16_t d = f32_to_f16(0.5f);
  std::memcpy(block, &d, 2);
  for (int j = 0; j < 16; ++j) block[2 + j] = uint8_t(j | ((15 - j) << 4));
  float y[32];
  gguf::dequantize_row(gguf::TensorType::IQ4_NL, block, y, 32);
  const int8_t table[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * float(table[j]));
    EXPECT_EQ(y[j + 16], 0.5f * float(table[15 - j]));
  }
  Builder f;
  f.head({5}, 0, 1);
  for (int part = 0; part < 2; ++part) f.le(kGgmlIq4Nl).le(uint64_t(18)).raw(block, 18);
  const LlamaCppState s = parse_llamacpp_state(f.b, {1, 1, 32, 4, 8}, "iq4");
  for (int j = 0; j < 32; ++j) EXPECT_EQ(s.cache.k_row(0, 0, 0)[j], f32_to_f16(y[j]));
  EXPECT_EQ(ggml_kv_type_name(s.type_v), "iq4_nl");
}

// head_dim 64: llama.cpp stores quantized K and V as H x (orthonormal Walsh-Hadamard per 64
// elements); the reader undoes it, so the result is x up to the quantization.
TEST(LlamaCppState, HadamardRotationOfQuantizedRowsIsUndone) {
  EXPECT_EQ(llamacpp_rotation(32, true), 0);
  EXPECT_EQ(llamacpp_rotation(64, true), 64);
  EXPECT_EQ(llamacpp_rotation(128, true), 128);
  EXPECT_EQ(llamacpp_rotation(128, false), 64);
  EXPECT_EQ(llamacpp_rotation(192, true), 64);
  const int n = 64;
  std::vector<float> x(n), hx(n);
  for (int i = 0; i < n; ++i) x[i] = std::cos(float(i) * 0.9f) + 0.01f * float(i);
  for (int i = 0; i < n; ++i) {
    double acc = 0;
    for (int j = 0; j < n; ++j) acc += ((__builtin_popcount(unsigned(i & j)) & 1) ? -x[j] : x[j]);
    hx[i] = float(acc / 8.0);
  }
  const Bytes b = quantized_file(gguf::TensorType::Q8_0, 1, n, hx, {9});
  const LlamaCppState s = parse_llamacpp_state(b, {1, 1, 64, 4, 16}, "rot");
  EXPECT_EQ(s.rot_k, 64);
  EXPECT_EQ(s.rot_v, 64);
  double err = 0;
  for (int i = 0; i < n; ++i) err = std::max(err, std::fabs(double(f16_to_f32(s.cache.k_row(0, 0, 0)[i])) - x[i]));
  EXPECT_LT(err, 0.02);
  LlamaCppTarget off{1, 1, 64, 4, 16};
  off.attn_rot = false;
  const LlamaCppState raw = parse_llamacpp_state(b, off, "raw");
  EXPECT_EQ(raw.rot_k, 0);
  EXPECT_GT(std::fabs(f16_to_f32(raw.cache.k_row(0, 0, 0)[1]) - x[1]), 0.1);
}

// Every field edited in a valid file is refused naming that field.
TEST(LlamaCppState, EditedFieldsAreRefusedByName) {
  const KvState snap = test::make_state(2, 1, 32, 3, 5);
  const std::vector<int32_t>& tok = snap.manifest.prefix.tokens;
  const LlamaCppTarget t{2, 1, 32, 64, 512};
  const Bytes rows = write_state(snap.cache, tok, false);
  const Bytes trans = write_state(snap.cache, tok, true);
  ASSERT_EQ(error_of(rows, t), "");
  // offsets: header 12, tokens 12, n_stream 4, cell_count 4, cells 3 * 12, v_trans, n_layer
  const size_t cells = 32, v_trans = 68, n_layer = 72, k_type = 76, k_row = 80;
  auto edited = [&](const Bytes& base, auto&& fn) {
    Bytes b = base;
    fn(b);
    return error_of(b, t);
  };
  auto has = [](const std::string& e, const std::string& field) {
    return e.find("s.seq: " + field + ":") != std::string::npos;
  };
  EXPECT_TRUE(has(edited(rows, [](Bytes& b) { b[0] = 'x'; }), "magic"));
  EXPECT_TRUE(has(edited(rows, [](Bytes& b) { put_u32(b, 4, 2); }), "version"));
  // One more token than cells (count and ids edited consistently): the cells no longer match.
  EXPECT_TRUE(has(edited(rows, [](Bytes& b) {
                    put_u32(b, 8, 4);
                    b.insert(b.begin() + 24, {5, 0, 0, 0});
                  }),
                  "stream[0].cell_count"));
  EXPECT_TRUE(has(edited(rows, [](Bytes& b) { put_u32(b, 8, 4); }), "n_stream") ||
              has(edited(rows, [](Bytes& b) { put_u32(b, 8, 4); }), "stream[1].cell_count"));
  EXPECT_TRUE(has(edited(rows, [](Bytes& b) { put_u32(b, 8, 65); }), "n_token_count"));        // > context
  EXPECT_TRUE(has(edited(rows, [](Bytes& b) { put_u32(b, 8, 0x40000000); }), "n_token_count"));  // > file
  EXPECT_TRUE(has(edited(rows, [](Bytes& b) { put_u32(b, 12, 512); }), "tokens[0]"));
  EXPECT_TRUE(has(edited(rows, [](Bytes& b) { put_u32(b, 24, 0); }), "n_stream"));
  EXPECT_TRUE(has(edited(rows, [](Bytes& b) { put_u32(b, 28, 2); }), "stream[0].cell_count"));
  EXPECT_TRUE(has(edited(rows, [&](Bytes& b) { put_u32(b, cells + 12, 2); }), "cell[1].pos"));
  EXPECT_TRUE(has(edited(rows, [&](Bytes& b) { put_u32(b, cells, 1); }), "cell[0].pos"));
  EXPECT_TRUE(has(edited(rows, [&](Bytes& b) { put_u32(b, cells + 4, 2); }), "cell[0].n_seq_id"));
  EXPECT_TRUE(has(edited(rows, [&](Bytes& b) { put_u32(b, cells + 20, 1); }), "cell[1].seq_id"));
  EXPECT_TRUE(has(edited(rows, [&](Bytes& b) { put_u32(b, v_trans, 2); }), "v_trans"));
  EXPECT_TRUE(has(edited(rows, [&](Bytes& b) { put_u32(b, n_layer, 3); }), "n_layer"));
  EXPECT_TRUE(has(edited(rows, [&](Bytes& b) { put_u32(b, k_type, 9); }), "layer[0].k_type"));  // q8_1
  EXPECT_TRUE(has(edited(rows, [&](Bytes& b) { put_u32(b, k_type, 8); }), "layer[0].k_size_row"));  // q8_0
  EXPECT_TRUE(has(edited(rows, [&](Bytes& b) { put_u64(b, k_row, 66); }), "layer[0].k_size_row"));
  const size_t k1_type = k_row + 8 + 3 * 64;
  EXPECT_TRUE(has(edited(rows, [&](Bytes& b) { put_u32(b, k1_type, 0); }), "layer[1].k_type"));  // mixed types
  // V layout: a rows file read as transposed and the other way round.
  EXPECT_TRUE(has(edited(rows, [&](Bytes& b) { put_u32(b, v_trans, 1); }), "layer[0].v_size_el"));
  EXPECT_TRUE(has(edited(trans, [&](Bytes& b) { put_u32(b, v_trans, 0); }), "layer[0].v_size_row"));
  const size_t v0 = k_row + 2 * (8 + 3 * 64) + 4;  // first V layer's type in the transposed file
  EXPECT_TRUE(has(edited(trans, [&](Bytes& b) { put_u32(b, v0, 8); }), "layer[0].v_type"));  // quantized, transposed
  EXPECT_TRUE(has(edited(trans, [&](Bytes& b) { put_u32(b, v0 + 8, 16); }), "layer[0].n_embd_v_gqa"));
  Bytes longer = rows;
  longer.push_back(0);
  EXPECT_TRUE(has(error_of(longer, t), "trailing bytes"));
  // Another model geometry: each mismatch is named.
  EXPECT_TRUE(has(error_of(rows, {3, 1, 32, 64, 512}), "n_layer"));
  EXPECT_TRUE(has(error_of(rows, {2, 1, 64, 64, 512}), "layer[0].k_size_row"));
  EXPECT_TRUE(has(error_of(rows, {2, 1, 32, 2, 512}), "n_token_count"));
  // Every truncation is refused (never a crash or an allocation past the file).
  for (size_t len = 0; len < rows.size(); ++len) {
    const Bytes cut(rows.begin(), rows.begin() + len);
    EXPECT_NE(error_of(cut, t), "") << len;
  }
}

TEST(LlamaCppState, HostileCellCountAllocatesNothing) {
  // A huge model context and a file claiming many cells: refused before the cache exists.
  Builder f;
  const uint32_t n = 1u << 20;
  f.le(kGgsqMagic).le(kGgsqVersion).le(n);
  for (uint32_t i = 0; i < n; ++i) f.le(int32_t(1));
  f.le(uint32_t(1)).le(n);
  for (uint32_t i = 0; i < n; ++i) f.le(int32_t(i)).le(uint32_t(1)).le(int32_t(0));
  f.le(uint32_t(0)).le(uint32_t(32));
  const std::string e = error_of(f.b, {32, 8, 128, 1 << 22, 512});
  EXPECT_NE(e.find("layer data"), std::string::npos) << e;
}

}  // namespace
}  // namespace ember::kv
