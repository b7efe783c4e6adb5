// ForwardHooks::transform_kv, the one hook that changes results: absent or doing nothing,
// the bits are canonical-v1's; rewriting rows, every later query sees the rewritten rows, and
// prefill equals decode and one thread equals several, as canonical-v1 promises.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "model/engine.h"
#include "model/tiny_model.h"
#include "util/f16.h"

namespace ember::model::kv_transform_test {
namespace {

std::vector<int32_t> prompt(int n, int vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[size_t(i)] = int32_t((i * 31 + 7) % vocab);
  return t;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

// Logits of every position and the cache after one prefill of 40 tokens (past the engine's
// 32-token threshold for splitting the per-token work across threads).
struct Prefill {
  std::vector<float> logits;
  KvCache cache;
};
Prefill prefill(Engine& e, const ForwardHooks* h) {
  Prefill r{{}, e.new_cache(64)};
  r.logits = e.forward(r.cache, prompt(40, e.config().n_vocab), h, true);
  return r;
}

TEST(KvTransform, AbsentOrDoingNothingChangesNoBit) {
  test::TinySpec spec;
  spec.layers = 3;
  auto m = test::make_tiny_model(spec);
  Engine e(m, EngineOptions{2, false});
  const Prefill base = prefill(e, nullptr);
  ForwardHooks empty;  // every member empty: the canonical path
  const Prefill a = prefill(e, &empty);
  ForwardHooks identity;
  std::atomic<int> calls = 0;
  identity.transform_kv = [&](int, int, float*, float*) { ++calls; };
  const Prefill b = prefill(e, &identity);
  EXPECT_EQ(calls, 3 * 40);  // once per (layer, position)
  EXPECT_TRUE(same_bits(base.logits, a.logits));
  EXPECT_TRUE(same_bits(base.logits, b.logits));
  EXPECT_EQ(base.cache.k, a.cache.k);
  EXPECT_EQ(base.cache.v, b.cache.v);
  EXPECT_EQ(base.cache.k, b.cache.k);
}

TEST(KvTransform, QueryTransformOfF16RoundingIsCanonicalAndAnotherIsNot) {
  test::TinySpec spec;
  spec.layers = 2;
  auto m = test::make_tiny_model(spec);
  const int D = m->config().head_dim;
  Engine e(m, EngineOptions{2, false});
  const Prefill base = prefill(e, nullptr);
  ForwardHooks same;  // what the engine does without it: the query in f16
  same.transform_q = [D](int, const float* q, float* out) {
    for (int i = 0; i < D; ++i) out[i] = f16_to_f32(f32_to_f16(q[i]));
  };
  const Prefill a = prefill(e, &same);
  EXPECT_TRUE(same_bits(base.logits, a.logits));
  ForwardHooks coarse;  // layer 1's queries rounded to 1/4: its scores change, its cache does not
  coarse.transform_q = [D](int layer, const float* q, float* out) {
    for (int i = 0; i < D; ++i) out[i] = layer == 1 ? std::round(q[i] * 4.0f) / 4.0f : f16_to_f32(f32_to_f16(q[i]));
  };
  const Prefill b = prefill(e, &coarse);
  EXPECT_FALSE(same_bits(base.logits, b.logits));
  EXPECT_EQ(base.cache.k, b.cache.k);  // K/V of both layers come before layer 1's attention output
}

TEST(KvTransform, RewrittenRowsAreWhatLaterQueriesReadForAnyThreadsAndSplit) {
  test::TinySpec spec;
  spec.layers = 3;
  auto m = test::make_tiny_model(spec);
  const int row = m->config().n_kv_heads * m->config().head_dim;
  ForwardHooks h;
  // A pure function of its arguments: halve V of layer 1, round K of layer 0 to 1/8.
  h.transform_kv = [row](int layer, int, float* k, float* v) {
    for (int i = 0; i < row; ++i) {
      if (layer == 0) k[i] = std::round(k[i] * 8.0f) / 8.0f;
      if (layer == 1) v[i] *= 0.5f;
    }
  };
  Engine one(m, EngineOptions{1, false}), two(m, EngineOptions{2, false});
  const Prefill base = prefill(one, nullptr);
  const Prefill a = prefill(one, &h);
  const Prefill b = prefill(two, &h);
  EXPECT_FALSE(same_bits(base.logits, a.logits));  // later queries read the rewritten rows
  EXPECT_TRUE(same_bits(a.logits, b.logits));
  EXPECT_EQ(a.cache.k, b.cache.k);
  EXPECT_EQ(a.cache.v, b.cache.v);
  // Token by token: the same cache and the same last logits as the prefill.
  KvCache c = one.new_cache(64);
  const std::vector<int32_t> t = prompt(40, one.config().n_vocab);
  std::vector<float> last;
  for (int i = 0; i < 40; ++i) last = one.forward(c, {&t[size_t(i)], 1}, &h);
  EXPECT_EQ(c.k, a.cache.k);
  EXPECT_EQ(c.v, a.cache.v);
  const int V = one.config().n_vocab;
  EXPECT_EQ(std::memcmp(last.data(), a.logits.data() + size_t(39) * V, size_t(V) * 4), 0);
  // Layer 2's rows are untouched by the transform but not by what it did upstream.
  EXPECT_NE(a.cache.k, base.cache.k);
}

}  // namespace
}  // namespace ember::model::kv_transform_test
