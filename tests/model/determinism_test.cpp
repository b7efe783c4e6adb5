// The numerics contract canonical-v1, checked by bits, not tolerances: logits and K/V are
// identical for any thread count, for prefill vs prefill + decode, and on every SIMD path,
// over llama, qwen2 and qwen3 and over F32, Q8_0, Q4_K and Q6_K weights.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "support/test_support.h"
#include "model/engine.h"
#include "model/tiny_model.h"
#include "util/simd.h"

namespace ember::model {
namespace {

using gguf::TensorType;

struct SimdGuard {
  ~SimdGuard() { set_simd_override(detect_simd()); }
};

std::vector<int32_t> prompt(int n, int vocab, int salt) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[size_t(i)] = int32_t((i * 37 + salt * 11 + 5) % vocab);
  return t;
}

struct Outcome {
  std::vector<float> logits;  // [n][V]: every position's logits
  std::vector<uint16_t> k, v;
};

// Evaluates `tokens`: a prefill of the first `split` tokens, then one-token decode steps
// (split == n: one prefill).
Outcome run(const std::shared_ptr<const Model>& m, int threads, const std::vector<int32_t>& tokens,
            int split, const ForwardHooks* hooks = nullptr) {
  Engine e(m, EngineOptions{threads});
  KvCache cache = e.new_cache(int(tokens.size()) + 2);
  Outcome o;
  std::vector<float> l = e.forward(cache, std::span(tokens.data(), size_t(split)), hooks, true);
  o.logits = l;
  for (size_t i = size_t(split); i < tokens.size(); ++i) {
    l = e.forward(cache, std::span(tokens.data() + i, 1), hooks, true);
    o.logits.insert(o.logits.end(), l.begin(), l.end());
  }
  EXPECT_EQ(cache.n_pos, int(tokens.size()));
  o.k = cache.k;
  o.v = cache.v;
  return o;
}

void expect_same_bits(const Outcome& a, const Outcome& b, const std::string& what) {
  ASSERT_EQ(a.logits.size(), b.logits.size()) << what;
  EXPECT_EQ(std::memcmp(a.logits.data(), b.logits.data(), a.logits.size() * 4), 0) << what << ": logits";
  EXPECT_EQ(a.k, b.k) << what << ": K cache";
  EXPECT_EQ(a.v, b.v) << what << ": V cache";
}

std::vector<test::TinySpec> geometry_and_type_variants() {
  std::vector<test::TinySpec> out;
  test::TinySpec s;
  s.arch = "llama";  // GQA 4:2, F32
  out.push_back(s);
  s.wtype = TensorType::Q8_0;
  s.kv_heads = 1;  // MQA
  s.tied = true;
  out.push_back(s);
  s = {};
  s.wtype = TensorType::Q4_K;
  s.rope_scaling = "llama3";
  out.push_back(s);
  s = {};
  s.wtype = TensorType::Q6_K;
  s.kv_heads = 4;  // plain MHA
  out.push_back(s);
  s = {};
  s.arch = "qwen2";
  s.bias = true;
  s.tied = true;
  out.push_back(s);
  s.wtype = TensorType::Q8_0;
  out.push_back(s);
  s = {};
  s.arch = "qwen3";
  s.qk_norm = true;
  s.head_dim = 128;  // explicit key_length != embd / heads
  s.wtype = TensorType::Q4_K;
  out.push_back(s);
  s.wtype = TensorType::Q6_K;
  out.push_back(s);
  return out;
}

TEST(Determinism, ThreadsPrefillDecodeAndSimdPathsGiveIdenticalBits) {
  SimdGuard guard;
  for (const test::TinySpec& spec : geometry_and_type_variants()) {
    SCOPED_TRACE(spec.name());
    auto m = test::make_tiny_model(spec);
    const std::vector<int32_t> tokens = prompt(13, spec.vocab, 1);
    const int n = int(tokens.size());
    set_simd_override(detect_simd());
    const Outcome base = run(m, 1, tokens, n);
    // (a) threads
    expect_same_bits(base, run(m, 2, tokens, n), "threads 2");
    expect_same_bits(base, run(m, 3, tokens, n), "threads 3");
    // (b) prefill of P then decode steps, at several P
    expect_same_bits(base, run(m, 1, tokens, 9), "prefill 9 + 4 decodes");
    expect_same_bits(base, run(m, 2, tokens, 1), "prefill 1 + 12 decodes, 2 threads");
    // (c) every SIMD path this CPU has
    for (SimdLevel level : test::simd_levels_under_test()) {
      set_simd_override(level);
      expect_same_bits(base, run(m, 1, tokens, n), std::string("simd ") + simd_name(level));
      expect_same_bits(base, run(m, 3, tokens, 6), std::string("simd ") + simd_name(level) +
                                                       ", 3 threads, prefill 6 + decodes");
    }
  }
}

// Evaluates `tokens` as consecutive multi-token calls of the given sizes (the last call's
// sizes may be 1: decode steps).
Outcome run_calls(const std::shared_ptr<const Model>& m, int threads,
                  const std::vector<int32_t>& tokens, const std::vector<int>& calls) {
  Engine e(m, EngineOptions{threads});
  KvCache cache = e.new_cache(8);  // grows as the calls come (cache growth mid-sequence)
  Outcome o;
  size_t at = 0;
  for (int c : calls) {
    const std::vector<float> l = e.forward(cache, std::span(tokens.data() + at, size_t(c)), nullptr, true);
    o.logits.insert(o.logits.end(), l.begin(), l.end());
    at += size_t(c);
  }
  EXPECT_EQ(at, tokens.size());
  // The valid rows only: the capacity differs with the call pattern.
  Outcome valid;
  valid.logits = o.logits;
  for (int l = 0; l < cache.n_layers; ++l)
    for (int h = 0; h < cache.n_kv_heads; ++h)
      for (int p = 0; p < cache.n_pos; ++p) {
        valid.k.insert(valid.k.end(), cache.k_row(l, h, p), cache.k_row(l, h, p) + cache.head_dim);
        valid.v.insert(valid.v.end(), cache.v_row(l, h, p), cache.v_row(l, h, p) + cache.head_dim);
      }
  return valid;
}

// Attention is blocked over keys (64 at a time) and tiled over queries (16 a task): prompts
// longer than one block and one tile, calls that start and end inside blocks, and decode
// after them give the same bits as one prefill, on every thread count and SIMD path.
TEST(Determinism, PromptsLongerThanOneAttentionBlockGiveIdenticalBits) {
  SimdGuard guard;
  std::vector<test::TinySpec> cases;
  test::TinySpec s;  // llama, GQA 4:2, F32
  cases.push_back(s);
  s = {};
  s.arch = "qwen3";
  s.qk_norm = true;
  s.head_dim = 128;
  s.wtype = TensorType::Q8_0;
  s.kv_heads = 1;  // MQA: one KV head, all query heads in one group
  cases.push_back(s);
  for (const test::TinySpec& spec : cases) {
    SCOPED_TRACE(spec.name());
    auto m = test::make_tiny_model(spec);
    const std::vector<int32_t> tokens = prompt(150, spec.vocab, 4);
    set_simd_override(detect_simd());
    const Outcome base = run_calls(m, 1, tokens, {150});
    expect_same_bits(base, run_calls(m, 2, tokens, {150}), "threads 2");
    expect_same_bits(base, run_calls(m, 3, tokens, {150}), "threads 3");
    expect_same_bits(base, run_calls(m, 1, tokens, {70, 57, 1, 1, 1, 20}), "calls across blocks");
    expect_same_bits(base, run_calls(m, 2, tokens, {64, 64, 16, 1, 5}), "calls on block edges");
    std::vector<int> decode(30, 1);
    decode.insert(decode.begin(), 120);
    expect_same_bits(base, run_calls(m, 3, tokens, decode), "prefill 120 + 30 decodes");
    for (SimdLevel level : test::simd_levels_under_test()) {
      set_simd_override(level);
      expect_same_bits(base, run_calls(m, 2, tokens, {150}), std::string("simd ") + simd_name(level));
      expect_same_bits(base, run_calls(m, 1, tokens, {100, 1, 49}),
                       std::string("simd ") + simd_name(level) + ", calls 100 + 1 + 49");
    }
  }
}

TEST(Determinism, LastRowLogitsEqualAllRowsLogits) {
  auto m = test::make_tiny_model(test::TinySpec{});
  Engine e(m, EngineOptions{2});
  const std::vector<int32_t> tokens = prompt(7, 96, 2);
  KvCache c1 = e.new_cache(8), c2 = e.new_cache(8);
  const std::vector<float> all = e.forward(c1, tokens, nullptr, true);
  const std::vector<float> last = e.forward(c2, tokens, nullptr, false);
  ASSERT_EQ(last.size(), size_t(96));
  EXPECT_EQ(std::memcmp(last.data(), all.data() + 6 * 96, 96 * 4), 0);
}

TEST(Determinism, RestoredCacheContinuesExactlyAsTheOriginal) {
  for (const test::TinySpec& spec : {test::TinySpec{}, geometry_and_type_variants()[6]}) {
    auto m = test::make_tiny_model(spec);
    Engine e(m, EngineOptions{1});
    const std::vector<int32_t> tokens = prompt(10, spec.vocab, 3);
    KvCache live = e.new_cache(16);
    e.forward(live, std::span(tokens.data(), 8));
    // A restore: a fresh cache with only the active rows copied in (as an import does).
    KvCache restored = e.new_cache(12);
    restored.n_pos = live.n_pos;
    restored.copy_prefix(live, live.n_pos);
    const std::vector<float> a = e.forward(live, std::span(tokens.data() + 8, 2));
    const std::vector<float> b = e.forward(restored, std::span(tokens.data() + 8, 2));
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << spec.name();
  }
}

}  // namespace
}  // namespace ember::model
