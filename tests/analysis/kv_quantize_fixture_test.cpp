// ggml-exact KV quantization, checked against caches llama.cpp itself wrote
// (../shared/models/llamacpp-state/, README there): ember's own f32 K/V of the same prompt on
// the same F32 GGUF, quantized with gguf::quantize_row_kv_cache, must give the q8_0 / q4_0
// blocks in llama.cpp's state files byte for byte, wherever ember's f32 row is the one
// llama.cpp quantized. The state file is parsed here only as far as this test needs (the
// ggsq v3 layout of llama.cpp's llama_kv_cache::state_write: the importer lives elsewhere).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gguf/dequantize.h"
#include "gguf/quantize.h"
#include "gguf/types.h"
#include "model/engine.h"
#include "support/test_support.h"
#include "util/f16.h"

namespace ember::gguf {
namespace {

struct Reader {
  const std::vector<uint8_t>& b;
  size_t at = 0;
  template <typename T>
  T get() {
    T v;
    EXPECT_LE(at + sizeof(T), b.size());
    if (at + sizeof(T) > b.size()) return T{};
    std::memcpy(&v, b.data() + at, sizeof(T));
    at += sizeof(T);
    return v;
  }
  const uint8_t* take(size_t n) {
    EXPECT_LE(at + n, b.size());
    const uint8_t* p = b.data() + std::min(at, b.size());
    at += n;
    return p;
  }
};

struct SeqState {
  std::vector<int32_t> tokens;
  uint32_t cells = 0;
  bool v_trans = false;
  std::vector<int32_t> k_type, v_type;
  std::vector<uint64_t> k_row, v_row;
  std::vector<std::vector<uint8_t>> k, v;  // [layer] cells * row bytes (V: not transposed)
};

// magic "ggsq", version 3, n_token, tokens; then one stream: cell_count, per cell (pos,
// n_seq_id, seq ids); v_trans, n_layer; per layer (k type, k row size, cells rows); per layer
// V the same when not transposed. Only what the fa1 (V not transposed) files hold.
SeqState read_seq(const std::string& path) {
  const std::vector<uint8_t> bytes = test::read_bytes(path);
  Reader r{bytes};
  SeqState s;
  EXPECT_EQ(r.get<uint32_t>(), 0x67677371u);  // 'ggsq'
  EXPECT_EQ(r.get<uint32_t>(), 3u);
  const uint32_t n_token = r.get<uint32_t>();
  for (uint32_t i = 0; i < n_token; ++i) s.tokens.push_back(r.get<int32_t>());
  EXPECT_EQ(r.get<uint32_t>(), 1u);  // streams
  s.cells = r.get<uint32_t>();
  for (uint32_t c = 0; c < s.cells; ++c) {
    EXPECT_EQ(r.get<int32_t>(), int32_t(c));  // pos
    const uint32_t n_seq = r.get<uint32_t>();
    for (uint32_t i = 0; i < n_seq; ++i) r.get<int32_t>();
  }
  s.v_trans = r.get<uint32_t>() != 0;
  const uint32_t n_layer = r.get<uint32_t>();
  for (uint32_t l = 0; l < n_layer; ++l) {
    s.k_type.push_back(r.get<int32_t>());
    s.k_row.push_back(r.get<uint64_t>());
    const uint8_t* p = r.take(size_t(s.k_row.back()) * s.cells);
    s.k.emplace_back(p, p + s.k_row.back() * s.cells);
  }
  EXPECT_FALSE(s.v_trans) << path;
  for (uint32_t l = 0; l < n_layer && !s.v_trans; ++l) {
    s.v_type.push_back(r.get<int32_t>());
    s.v_row.push_back(r.get<uint64_t>());
    const uint8_t* p = r.take(size_t(s.v_row.back()) * s.cells);
    s.v.emplace_back(p, p + s.v_row.back() * s.cells);
  }
  EXPECT_EQ(r.at, bytes.size()) << path << ": trailing or missing bytes";
  return s;
}

// ember's f32 K (after RoPE) and V of every prompt position, [layer][pos][kv_heads * head_dim]:
// the values its engine rounds into the f16 cache, and llama.cpp into its quantized one.
struct EmberKv {
  std::vector<std::vector<float>> k, v;
  int row = 0;
};

EmberKv ember_kv(const std::string& gguf, const std::vector<int32_t>& tokens) {
  model::Engine engine(model::Model::load(gguf), model::EngineOptions{1, false});
  const model::ModelConfig& c = engine.config();
  EmberKv out;
  out.row = c.n_kv_heads * c.head_dim;
  out.k.assign(size_t(c.n_layers), std::vector<float>(tokens.size() * size_t(out.row)));
  out.v = out.k;
  model::ForwardHooks hooks;
  hooks.on_kv = [&](int layer, int pos0, int n, const float*, const float* k, const float* v) {
    std::memcpy(out.k[size_t(layer)].data() + size_t(pos0) * out.row, k, size_t(n) * out.row * 4);
    std::memcpy(out.v[size_t(layer)].data() + size_t(pos0) * out.row, v, size_t(n) * out.row * 4);
  };
  model::KvCache cache = engine.new_cache(int(tokens.size()));
  engine.forward(cache, tokens, &hooks);
  return out;
}

struct Tally {
  size_t blocks = 0, same = 0, same_ref = 0, rows = 0, rows_same = 0;
  size_t layer_rows_same[8] = {};
};

// Quantizes ember's rows of one part and compares them block by block with llama.cpp's.
void compare_part(TensorType type, const std::vector<std::vector<float>>& ours,
                  const std::vector<std::vector<uint8_t>>& theirs, const std::vector<int32_t>& types,
                  int row, uint32_t cells, Tally* t) {
  const size_t rb = size_t(row_bytes(type, uint64_t(row)));
  const size_t bb = traits(type).block_bytes;
  std::vector<uint8_t> q(rb), qref(rb);
  for (size_t l = 0; l < ours.size(); ++l) {
    ASSERT_EQ(types[l], int32_t(type));
    for (uint32_t c = 0; c < cells; ++c) {
      const float* x = ours[l].data() + size_t(c) * row;
      quantize_row_kv_cache(type, x, q.data(), row);
      quantize_row(type, x, qref.data(), row);
      const uint8_t* ref = theirs[l].data() + size_t(c) * rb;
      bool row_same = true;
      for (size_t b = 0; b < rb / bb; ++b) {
        const bool same = std::memcmp(q.data() + b * bb, ref + b * bb, bb) == 0;
        t->same += same;
        t->same_ref += std::memcmp(qref.data() + b * bb, ref + b * bb, bb) == 0;
        row_same = row_same && same;
        ++t->blocks;
      }
      t->rows_same += row_same;
      ++t->rows;
      t->layer_rows_same[l] += row_same;
    }
  }
}

struct Case {
  const char* model;
  const char* state;
  TensorType type;
  bool exact_layer0;
};

TEST(KvQuantizeFixture, EmberRowsQuantizeToLlamaCppBlocks) {
  const Case cases[] = {
      {"synthetic/llama-gqa-s5005.F32.gguf", "llamacpp-state/llama-gqa-s5005.F32.q8_0.fa1.seq",
       TensorType::Q8_0, true},
      {"synthetic/llama-gqa-s5005.F32.gguf", "llamacpp-state/llama-gqa-s5005.F32.q4_0.fa1.seq", TensorType::Q4_0, true},
      // The qwen2 files' quantized blocks are not the quantization of the K/V that llama.cpp's
      // own f16 file of the same prompt holds (cosine ~0 at every layer, where ember's f32 rows
      // round to that f16 file's values exactly), so no row can match; reported, not asserted
      // (docs/kv-quantization.md).
      {"synthetic/qwen2-bias-s5006.F32.gguf", "llamacpp-state/qwen2-bias-s5006.F32.q8_0.fa1.seq", TensorType::Q8_0, false},
      {"synthetic/qwen2-bias-s5006.F32.gguf", "llamacpp-state/qwen2-bias-s5006.F32.q4_0.fa1.seq", TensorType::Q4_0, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.state);
    const SeqState s = read_seq(test::shared_path(std::string("models/") + c.state));
    const EmberKv e = ember_kv(test::shared_path(std::string("models/") + c.model), s.tokens);
    ASSERT_EQ(s.k.size(), e.k.size());
    Tally k, v;
    compare_part(c.type, e.k, s.k, s.k_type, e.row, s.cells, &k);
    compare_part(c.type, e.v, s.v, s.v_type, e.row, s.cells, &v);
    std::printf("%s: K %zu/%zu blocks identical (reference encoder %zu), V %zu/%zu (%zu); "
                "rows K %zu/%zu V %zu/%zu\n",
                c.state, k.same, k.blocks, k.same_ref, v.same, v.blocks, v.same_ref, k.rows_same,
                k.rows, v.rows_same, v.rows);
    for (int l = 0; l < 4; ++l)
      std::printf("  layer %d: rows identical K %zu V %zu of %u\n", l, k.layer_rows_same[l],
                  v.layer_rows_same[l], s.cells);
    if (c.exact_layer0) {
      // Layer 0's K/V depend only on the embeddings and layer-0 weights, not on any cache, so
      // ember's f32 rows are the very rows llama.cpp quantized: every block must match.
      EXPECT_EQ(k.layer_rows_same[0], s.cells);
      EXPECT_EQ(v.layer_rows_same[0], s.cells);
    }
  }
}

}  // namespace
}  // namespace ember::gguf
