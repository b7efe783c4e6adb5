// Batch invariance (docs/numerics.md): Engine::step evaluates several sequences in one pass,
// prefill chunks and decode tokens mixed, and each sequence's logits and K/V are
// bit-identical to forward() of that sequence alone, whatever else shares the step, on any
// thread count and every SIMD path this CPU has.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "support/test_support.h"
#include "model/engine.h"
#include "model/tiny_model.h"
#include "util/simd.h"

namespace ember::model::batch_step_test {
namespace {

using gguf::TensorType;

struct SimdGuard {
  ~SimdGuard() { set_simd_override(detect_simd()); }
};

std::vector<int32_t> prompt(int n, int vocab, uint32_t salt) {
  std::vector<int32_t> t(size_t(n), 0);
  for (int i = 0; i < n; ++i) t[size_t(i)] = int32_t((uint32_t(i) * 37u + salt * 11u + 5u) % uint32_t(vocab));
  return t;
}

// The valid rows of a cache, layer by layer (the capacity differs between runs).
std::vector<uint16_t> valid_rows(const KvCache& c) {
  std::vector<uint16_t> out;
  for (int l = 0; l < c.n_layers; ++l)
    for (int h = 0; h < c.n_kv_heads; ++h)
      for (int p = 0; p < c.n_pos; ++p) {
        out.insert(out.end(), c.k_row(l, h, p), c.k_row(l, h, p) + c.head_dim);
        out.insert(out.end(), c.v_row(l, h, p), c.v_row(l, h, p) + c.head_dim);
      }
  return out;
}

struct Alone {
  std::vector<float> logits;  // [n][V]: every position's logits, one prefill
  std::vector<uint16_t> kv;
};

Alone run_alone(const std::shared_ptr<const Model>& m, const std::vector<int32_t>& tokens) {
  Engine e(m, EngineOptions{1});
  KvCache c = e.new_cache(int(tokens.size()));
  Alone a;
  a.logits = e.forward(c, tokens, nullptr, true);
  a.kv = valid_rows(c);
  return a;
}

// Runs `prompts` as a server would: each step, every unfinished sequence contributes a chunk
// of random size (1..max_chunk, so prefill chunks and decode-sized steps mix), a random subset
// sits the step out, and the order of sequences in the step is shuffled. Checks every logits
// row against the sequence run alone and the final caches.
void check_random_mix(const std::shared_ptr<const Model>& m, int threads,
                      const std::vector<std::vector<int32_t>>& prompts,
                      const std::vector<Alone>& alone, std::mt19937& rng, int max_chunk) {
  const int V = m->config().n_vocab;
  Engine e(m, EngineOptions{threads});
  std::vector<KvCache> caches;
  for (size_t i = 0; i < prompts.size(); ++i) caches.push_back(e.new_cache(4));
  std::vector<size_t> done(prompts.size(), 0);
  for (int guard = 0; guard < 10000; ++guard) {
    std::vector<size_t> order;
    for (size_t i = 0; i < prompts.size(); ++i)
      if (done[i] < prompts[i].size() && (rng() % 4 != 0 || order.empty())) order.push_back(i);
    if (order.empty()) {
      bool left = false;
      for (size_t i = 0; i < prompts.size(); ++i) left = left || done[i] < prompts[i].size();
      if (!left) break;
      continue;
    }
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<SequenceStep> steps;
    std::vector<size_t> ends;
    for (size_t i : order) {
      const size_t left = prompts[i].size() - done[i];
      const size_t n = std::min<size_t>(left, 1 + rng() % uint32_t(max_chunk));
      steps.push_back({&caches[i], std::span(prompts[i].data() + done[i], n), true});
      ends.push_back(done[i] + n);
    }
    const std::vector<float> logits = e.step(steps);
    ASSERT_EQ(logits.size(), steps.size() * size_t(V));
    for (size_t s = 0; s < order.size(); ++s) {
      const size_t i = order[s];
      const float* want = alone[i].logits.data() + (ends[s] - 1) * size_t(V);
      ASSERT_EQ(std::memcmp(logits.data() + s * size_t(V), want, size_t(V) * 4), 0)
          << "sequence " << i << " position " << ends[s] - 1 << " in a step of " << steps.size();
      done[i] = ends[s];
    }
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(done[i], prompts[i].size());
    EXPECT_EQ(valid_rows(caches[i]), alone[i].kv) << "sequence " << i << " K/V";
  }
}

std::vector<test::TinySpec> specs() {
  std::vector<test::TinySpec> out;
  test::TinySpec s;  // llama, GQA 4:2, F32
  out.push_back(s);
  s = {};
  s.arch = "qwen2";
  s.bias = true;
  s.tied = true;
  s.wtype = TensorType::Q8_0;
  out.push_back(s);
  s = {};
  s.arch = "qwen3";
  s.qk_norm = true;
  s.head_dim = 128;
  s.kv_heads = 1;
  s.wtype = TensorType::Q4_K;
  out.push_back(s);
  return out;
}

TEST(BatchStep, RandomMixesOfOneToEightSequencesEqualEachAlone) {
  SimdGuard guard;
  std::mt19937 rng(20261204);
  for (const test::TinySpec& spec : specs()) {
    SCOPED_TRACE(spec.name());
    auto m = test::make_tiny_model(spec);
    std::vector<std::vector<int32_t>> prompts;
    std::vector<Alone> alone;
    set_simd_override(detect_simd());
    for (uint32_t i = 0; i < 8; ++i) {
      // Lengths past one attention block (64 keys) and one query tile (16) for some.
      prompts.push_back(prompt(3 + int(rng() % 90), spec.vocab, i + 1));
      alone.push_back(run_alone(m, prompts.back()));
    }
    for (int mix = 0; mix < 4; ++mix) {
      const size_t count = 1 + rng() % 8;
      std::vector<std::vector<int32_t>> sub(prompts.begin(), prompts.begin() + long(count));
      std::vector<Alone> sub_alone(alone.begin(), alone.begin() + long(count));
      const int threads = 1 + mix % 3;
      SCOPED_TRACE(std::to_string(count) + " sequences, " + std::to_string(threads) + " threads");
      check_random_mix(m, threads, sub, sub_alone, rng, mix % 2 ? 1 : 40);
    }
    for (SimdLevel level : test::simd_levels_under_test()) {
      set_simd_override(level);
      SCOPED_TRACE(std::string("simd ") + simd_name(level));
      check_random_mix(m, 2, prompts, alone, rng, 24);
    }
  }
}

TEST(BatchStep, OnlyTheSequencesThatAskGetLogits) {
  auto m = test::make_tiny_model(test::TinySpec{});
  Engine e(m, EngineOptions{2});
  const std::vector<int32_t> a = prompt(9, 96, 1), b = prompt(5, 96, 2);
  KvCache ca = e.new_cache(9), cb = e.new_cache(5);
  const SequenceStep steps[2] = {{&ca, a, false}, {&cb, b, true}};
  const std::vector<float> logits = e.step(steps);
  ASSERT_EQ(logits.size(), size_t(96));
  EXPECT_EQ(std::memcmp(logits.data(), run_alone(m, b).logits.data() + 4 * 96, 96 * 4), 0);
  EXPECT_EQ(ca.n_pos, 9);
  EXPECT_EQ(cb.n_pos, 5);
}

TEST(BatchStep, RefusesSharedCachesAndBadPositionsBeforeEvaluating) {
  auto m = test::make_tiny_model(test::TinySpec{});
  Engine e(m, EngineOptions{1});
  const std::vector<int32_t> a = prompt(4, 96, 1);
  KvCache c = e.new_cache(8), d = e.new_cache(8);
  const SequenceStep shared[2] = {{&c, a, true}, {&c, a, true}};
  EXPECT_THROW(e.step(shared), Error);
  EXPECT_EQ(c.n_pos, 0);
  std::vector<int32_t> bad = a;
  bad[2] = 96;  // past the vocabulary
  const SequenceStep one_bad[2] = {{&d, a, true}, {&c, bad, true}};
  EXPECT_THROW(e.step(one_bad), Error);
  EXPECT_EQ(c.n_pos, 0);
  EXPECT_EQ(d.n_pos, 0);
  EXPECT_THROW(e.step({}), Error);
}

}  // namespace
}  // namespace ember::model::batch_step_test
