// Hooks observe without changing a bit, and partial execution (embed, run_layers, project_kv,
// lm_head) composes to exactly the bits of forward().
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "model/engine.h"
#include "model/rope.h"
#include "model/tiny_model.h"
#include "ops/vec.h"
#include "util/error.h"
#include "util/f16.h"

namespace ember::model {
namespace {

std::vector<int32_t> prompt(int n, int vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[size_t(i)] = int32_t((i * 29 + 3) % vocab);
  return t;
}

bool same(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

std::vector<test::TinySpec> three_layer_specs() {
  test::TinySpec llama;  // normal RoPE, GQA
  llama.layers = 3;
  test::TinySpec qwen2;
  qwen2.arch = "qwen2";
  qwen2.layers = 3;
  qwen2.bias = true;
  qwen2.tied = true;
  test::TinySpec qwen3;
  qwen3.arch = "qwen3";
  qwen3.layers = 3;
  qwen3.qk_norm = true;
  qwen3.head_dim = 128;
  qwen3.wtype = gguf::TensorType::Q8_0;
  return {llama, qwen2, qwen3};
}

struct Recorded {
  std::vector<std::vector<float>> k_pre, k_post, v, attn, residual;  // per layer / boundary
  std::vector<int> boundaries;
};

ForwardHooks recorder(Recorded& r, const ModelConfig& c) {
  const size_t kd = size_t(c.n_kv_heads) * c.head_dim, E = size_t(c.n_embd);
  ForwardHooks h;
  h.on_kv = [&r, kd](int layer, int, int n, const float* kp, const float* kq, const float* v) {
    EXPECT_EQ(size_t(layer), r.k_pre.size());
    r.k_pre.emplace_back(kp, kp + n * kd);
    r.k_post.emplace_back(kq, kq + n * kd);
    r.v.emplace_back(v, v + n * kd);
  };
  h.on_attn_out = [&r, E](int, int, int n, const float* a) { r.attn.emplace_back(a, a + n * E); };
  h.on_residual = [&r, E](int b, int, int n, const float* x) {
    r.boundaries.push_back(b);
    r.residual.emplace_back(x, x + n * E);
  };
  return h;
}

TEST(Hooks, ObservingChangesNoBitAndShowsWhatTheCacheHolds) {
  for (const test::TinySpec& spec : three_layer_specs()) {
    SCOPED_TRACE(spec.name());
    auto m = test::make_tiny_model(spec);
    const ModelConfig& c = m->config();
    Engine e(m, EngineOptions{2});
    const std::vector<int32_t> tokens = prompt(9, spec.vocab);
    KvCache plain = e.new_cache(9), watched = e.new_cache(9);
    const std::vector<float> want = e.forward(plain, tokens, nullptr, true);
    Recorded r;
    const ForwardHooks hooks = recorder(r, c);
    const std::vector<float> got = e.forward(watched, tokens, &hooks, true);
    EXPECT_TRUE(same(want, got));
    EXPECT_EQ(plain.k, watched.k);
    EXPECT_EQ(plain.v, watched.v);
    ASSERT_EQ(int(r.k_pre.size()), c.n_layers);
    ASSERT_EQ(int(r.attn.size()), c.n_layers);
    ASSERT_EQ(r.boundaries, std::vector<int>({0, 1, 2, 3}));
    const int D = c.head_dim, G = c.n_kv_heads;
    for (int l = 0; l < c.n_layers; ++l)
      for (int t = 0; t < 9; ++t)
        for (int g = 0; g < G; ++g) {
          const size_t off = (size_t(t) * G + g) * D;
          // K post-RoPE and V round to exactly the cached f16 rows.
          for (int d = 0; d < D; ++d) {
            ASSERT_EQ(f32_to_f16(r.k_post[size_t(l)][off + d]), watched.k_row(l, g, t)[d]);
            ASSERT_EQ(f32_to_f16(r.v[size_t(l)][off + d]), watched.v_row(l, g, t)[d]);
          }
          // apply_rope is bit-identical to the engine's rotation.
          std::vector<float> head(r.k_pre[size_t(l)].begin() + int64_t(off),
                                  r.k_pre[size_t(l)].begin() + int64_t(off) + D);
          apply_rope(c, t, head.data(), false);
          ASSERT_EQ(std::memcmp(head.data(), r.k_post[size_t(l)].data() + off, size_t(D) * 4), 0);
          // ...and its inverse brings the key back to pre-RoPE space (to rounding).
          apply_rope(c, t, head.data(), true);
          for (int d = 0; d < D; ++d)
            ASSERT_NEAR(head[size_t(d)], r.k_pre[size_t(l)][off + d], 1e-5f * (1 + std::fabs(head[size_t(d)])));
        }
    // Residual boundaries chain: the last one through lm_head gives the logits.
    std::vector<float> logits(size_t(9) * c.n_vocab);
    e.lm_head(r.residual.back().data(), 9, logits.data());
    EXPECT_TRUE(same(logits, want));
    EXPECT_TRUE(same(r.residual.front(), [&] {
      std::vector<float> x(size_t(9) * c.n_embd);
      e.embed(tokens, x.data());
      return x;
    }()));
  }
}

TEST(Partial, LayerRangesComposeToForwardBits) {
  for (const test::TinySpec& spec : three_layer_specs()) {
    SCOPED_TRACE(spec.name());
    auto m = test::make_tiny_model(spec);
    const ModelConfig& c = m->config();
    Engine e(m, EngineOptions{2});
    const std::vector<int32_t> tokens = prompt(11, spec.vocab);
    KvCache full = e.new_cache(11);
    const std::vector<float> want = e.forward(full, tokens, nullptr, true);
    for (int a = 0; a <= c.n_layers; ++a) {
      // Prefix of 7 tokens, then the remaining 4 in one call, both through the partial API.
      KvCache cache = e.new_cache(11);
      std::vector<float> logits;
      for (auto [pos0, n] : {std::pair{0, 7}, std::pair{7, 4}}) {
        std::vector<float> x(size_t(n) * c.n_embd), l(size_t(n) * c.n_vocab);
        e.embed(std::span(tokens.data() + pos0, size_t(n)), x.data());
        e.run_layers(0, a, cache, pos0, n, x.data());
        e.run_layers(a, c.n_layers, cache, pos0, n, x.data());
        e.lm_head(x.data(), n, l.data());
        cache.n_pos = pos0 + n;
        logits.insert(logits.end(), l.begin(), l.end());
      }
      EXPECT_TRUE(same(logits, want)) << "split at layer " << a;
      EXPECT_EQ(cache.k, full.k) << "split at layer " << a;
      EXPECT_EQ(cache.v, full.v) << "split at layer " << a;
    }
  }
}

TEST(Partial, ProjectKvAndAnchorRecomputeMatchForward) {
  for (const test::TinySpec& spec : three_layer_specs()) {
    SCOPED_TRACE(spec.name());
    auto m = test::make_tiny_model(spec);
    const ModelConfig& c = m->config();
    const int L = c.n_layers;
    Engine e(m, EngineOptions{1});
    const std::vector<int32_t> tokens = prompt(10, spec.vocab);
    Recorded r;
    const ForwardHooks hooks = recorder(r, c);
    KvCache full = e.new_cache(12);
    e.forward(full, tokens, &hooks);
    const std::vector<int32_t> next = {5};
    KvCache full_next = full.copy();
    const std::vector<float> want_next = e.forward(full_next, next);
    for (int a = 1; a < L; ++a) {
      // The recompute anchor: layers [0, a) reused from the full run, the residual entering
      // layer a recomputed through [a, L-1), only the K/V projections of the last layer.
      KvCache cache = e.new_cache(12);
      cache.copy_prefix(full, 10, 0, a);
      std::vector<float> x = r.residual[size_t(a)];
      e.run_layers(a, L - 1, cache, 0, 10, x.data());
      e.project_kv(L - 1, x.data(), 10, 0, cache);
      cache.n_pos = 10;
      EXPECT_EQ(cache.k, full.k) << "anchor " << a;
      EXPECT_EQ(cache.v, full.v) << "anchor " << a;
      const std::vector<float> got_next = e.forward(cache, next);
      EXPECT_TRUE(same(got_next, want_next)) << "anchor " << a;
    }
    // project_kv alone on every layer's input residual reproduces that layer's cache rows.
    KvCache kv = e.new_cache(12);
    for (int l = 0; l < L; ++l) e.project_kv(l, r.residual[size_t(l)].data(), 10, 0, kv);
    EXPECT_EQ(kv.k, full.k);
    EXPECT_EQ(kv.v, full.v);
  }
}

TEST(Partial, RejectsBadRangesPositionsAndTokens) {
  auto m = test::make_tiny_model(test::TinySpec{});  // context_length 256
  Engine e(m, EngineOptions{1});
  KvCache cache = e.new_cache(4);
  std::vector<float> x(size_t(4) * 256);
  EXPECT_THROW(e.run_layers(1, 0, cache, 0, 1, x.data()), Error);
  EXPECT_THROW(e.run_layers(0, 3, cache, 0, 1, x.data()), Error);
  EXPECT_THROW(e.run_layers(0, 1, cache, 254, 3, x.data()), Error);  // past the context length
  EXPECT_THROW(e.run_layers(0, 1, cache, -1, 1, x.data()), Error);
  EXPECT_EQ(cache.capacity, 4);  // a refused call does not grow the cache
  EXPECT_THROW(e.project_kv(2, x.data(), 1, 0, cache), Error);
  const std::vector<int32_t> bad = {96};
  EXPECT_THROW(e.forward(cache, bad), Error);
  EXPECT_EQ(cache.n_pos, 0);
  KvCache wrong(1, 2, 64, 4);
  const std::vector<int32_t> one = {1};
  EXPECT_THROW(e.forward(wrong, one), Error);
  // Past the capacity the cache grows; past the context length the engine refuses.
  const std::vector<int32_t> five = {1, 2, 3, 4, 5};
  e.forward(cache, five);
  EXPECT_EQ(cache.n_pos, 5);
  EXPECT_EQ(cache.capacity, 8);
  const std::vector<int32_t> rest(252, 7);
  try {
    e.forward(cache, rest);
    ADD_FAILURE() << "positions [5, 257) evaluated";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("context length 256"), std::string::npos) << err.what();
  }
  EXPECT_EQ(cache.n_pos, 5);
}

}  // namespace
}  // namespace ember::model
