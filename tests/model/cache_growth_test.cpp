// The cache grows as it fills (issue 12, defect 4): an engine that starts from a one-position
// cache and grows it gives the same bits, logits and K/V, as one that preallocated the whole
// run; capacity stays proportional to what is held; positions are bounded by the model's
// context length unless the engine allows going past it; sizes are checked in 64 bits.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "model/engine.h"
#include "model/generate.h"
#include "model/tiny_model.h"
#include "util/error.h"

namespace ember::model {
namespace {

std::vector<int32_t> tokens_of(int n, int vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[size_t(i)] = int32_t((i * 29 + 7) % vocab);
  return t;
}

// Active rows [0, n_pos) of every (layer, head), K then V: what a snapshot would hold.
std::vector<uint16_t> active(const KvCache& c) {
  std::vector<uint16_t> out;
  for (const std::vector<uint16_t>* p : {&c.k, &c.v})
    for (int l = 0; l < c.n_layers; ++l)
      for (int h = 0; h < c.n_kv_heads; ++h) {
        const uint16_t* row = p->data() + c.index(l, h, 0);
        out.insert(out.end(), row, row + size_t(c.n_pos) * c.head_dim);
      }
  return out;
}

// A prefill of `split` tokens then one-token decodes, all logits kept.
std::vector<float> run(Engine& e, KvCache& cache, const std::vector<int32_t>& t, int split) {
  std::vector<float> all = e.forward(cache, std::span(t.data(), size_t(split)), nullptr, true);
  for (size_t i = size_t(split); i < t.size(); ++i) {
    const std::vector<float> l = e.forward(cache, std::span(t.data() + i, 1), nullptr, true);
    all.insert(all.end(), l.begin(), l.end());
  }
  return all;
}

TEST(CacheGrowth, GrownCacheGivesTheBitsOfAPreallocatedOne) {
  test::TinySpec qwen3;
  qwen3.arch = "qwen3";
  qwen3.qk_norm = true;
  qwen3.wtype = gguf::TensorType::Q8_0;
  for (const test::TinySpec& spec : {test::TinySpec{}, qwen3}) {
    SCOPED_TRACE(spec.name());
    auto m = test::make_tiny_model(spec);
    const std::vector<int32_t> t = tokens_of(37, spec.vocab);
    for (int split : {37, 5, 1}) {
      Engine pre(m, EngineOptions{2}), grow(m, EngineOptions{2});
      KvCache a = pre.new_cache(64);
      KvCache b = grow.new_cache(1);
      const std::vector<float> la = run(pre, a, t, split);
      const std::vector<float> lb = run(grow, b, t, split);
      EXPECT_EQ(a.capacity, 64);  // never needed to grow
      EXPECT_GE(b.capacity, 37);
      EXPECT_LE(b.capacity, 2 * 37);  // geometric growth, not the model's context (256)
      ASSERT_EQ(la.size(), lb.size());
      EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)), 0) << "split " << split;
      EXPECT_EQ(a.n_pos, b.n_pos);
      EXPECT_EQ(active(a), active(b)) << "split " << split;
    }
  }
}

TEST(CacheGrowth, GenerateAllocatesForWhatItHolds) {
  auto m = test::make_tiny_model(test::TinySpec{});
  Engine e(m, EngineOptions{1});
  const std::vector<int32_t> prompt = tokens_of(5, 96);
  KvCache cache = e.new_cache(int(prompt.size()));
  GenerateOptions o;
  o.max_steps = 4;
  Sampler greedy(SamplingParams{});
  generate(e, cache, prompt, o, greedy);
  EXPECT_EQ(cache.n_pos, 8);           // 5 prompt + 3 evaluated selections
  EXPECT_EQ(cache.capacity, 10);       // one doubling of the prompt's 5, not 5 + steps up front
  EXPECT_EQ(cache.k.size(), KvCache::elements(2, 2, 10, 64));
}

TEST(CacheGrowth, ReserveKeepsEveryRowInPlace) {
  KvCache c(2, 3, 4, 5);
  for (size_t i = 0; i < c.k.size(); ++i) {
    c.k[i] = uint16_t(i + 1);
    c.v[i] = uint16_t(3 * i + 2);
  }
  c.n_pos = 4;
  const KvCache before = c.copy();
  c.reserve(11);
  EXPECT_EQ(c.capacity, 11);
  EXPECT_EQ(c.n_pos, 4);
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 3; ++h)
      for (int p = 0; p < 11; ++p)
        for (int d = 0; d < 4; ++d) {
          const uint16_t k = p < 5 ? before.k_row(l, h, p)[d] : 0, v = p < 5 ? before.v_row(l, h, p)[d] : 0;
          EXPECT_EQ(c.k_row(l, h, p)[d], k);
          EXPECT_EQ(c.v_row(l, h, p)[d], v);
        }
  c.reserve(3);  // never shrinks
  EXPECT_EQ(c.capacity, 11);
}

TEST(CacheGrowth, PositionsAreBoundedByTheContextLength) {
  auto m = test::make_tiny_model(test::TinySpec{});  // context_length 256
  ASSERT_EQ(m->config().n_ctx, 256);
  Engine e(m, EngineOptions{1});
  EXPECT_EQ(e.position_limit(), 256);
  KvCache c = e.new_cache(1);
  const std::vector<int32_t> t = tokens_of(256, 96);
  e.forward(c, t);  // exactly the context: fine
  EXPECT_EQ(c.capacity, 256);  // growth is capped at the limit
  const int32_t one = 3;
  try {
    e.forward(c, std::span(&one, 1));
    ADD_FAILURE() << "position 256 was evaluated";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("context length 256"), std::string::npos) << err.what();
  }
  EXPECT_EQ(c.n_pos, 256);
  // generate() refuses before evaluating anything.
  KvCache g = e.new_cache(4);
  GenerateOptions o;
  o.max_steps = 254;  // 3 + 254 - 1 = 256 positions: fits
  Sampler greedy(SamplingParams{});
  const std::vector<int32_t> p3 = tokens_of(3, 96);
  EXPECT_NO_THROW(generate(e, g, p3, o, greedy));
  KvCache g2 = e.new_cache(4);
  o.max_steps = 255;
  EXPECT_THROW(generate(e, g2, p3, o, greedy), Error);
  EXPECT_EQ(g2.n_pos, 0);
  // With allow_past_context the same engine goes on.
  Engine past(m, EngineOptions{1, true});
  EXPECT_EQ(past.position_limit(), kMaxCachePositions);
  KvCache c2 = past.new_cache(1);
  past.forward(c2, t);
  EXPECT_NO_THROW(past.forward(c2, std::span(&one, 1)));
  EXPECT_EQ(c2.n_pos, 257);
}

TEST(CacheGrowth, SizesAreCheckedIn64Bits) {
  // 2^10 * 2^10 * 2^24 * 2^12 elements would wrap a 32-bit product and exceed any allocation.
  EXPECT_THROW(KvCache::elements(1024, 1024, 1 << 24, 4096), Error);
  EXPECT_EQ(KvCache::elements(32, 8, 1 << 24, 128), size_t(32) * 8 * (size_t(1) << 24) * 128);
  auto m = test::make_tiny_model(test::TinySpec{});
  Engine e(m, EngineOptions{1});
  EXPECT_THROW(e.new_cache(-2147483647 - 1), Error);
  EXPECT_EQ(e.new_cache(kMaxCachePositions).capacity, 256);  // never more than the engine uses
}

}  // namespace
}  // namespace ember::model
