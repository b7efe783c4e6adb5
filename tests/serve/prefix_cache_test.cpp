// The RAM prefix tier: whole blocks only, the longest shared prefix, the rows' bits, and the
// byte budget.
#include <gtest/gtest.h>

#include <vector>

#include "model/engine.h"
#include "model/tiny_model.h"
#include "serve/prefix_cache.h"

namespace ember::serve {
namespace {

constexpr int B = PrefixCache::kBlock;

std::vector<int32_t> tokens(int n, int salt) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(int32_t((i * 5 + salt) % 96));
  return t;
}

TEST(PrefixCache, RestoresTheLongestWholeBlockPrefixWithTheSameBits) {
  auto m = test::make_tiny_model(test::TinySpec{});
  model::Engine e(m, model::EngineOptions{1});
  const std::vector<int32_t> a = tokens(3 * B + 5, 1);
  model::KvCache ca = e.new_cache(int(a.size()));
  e.forward(ca, a);
  PrefixCache pc(size_t(64) << 20);
  pc.insert(a, ca);
  EXPECT_EQ(pc.entries(), 1u);

  // A prompt sharing 2 blocks and 3 tokens of the third: 2 blocks restored.
  std::vector<int32_t> b = a;
  b[size_t(2 * B + 3)] = (b[size_t(2 * B + 3)] + 1) % 96;
  model::KvCache cb = e.new_cache(int(b.size()));
  ASSERT_EQ(pc.restore(b, int(b.size()) - 1, cb), 2 * B);
  for (int l = 0; l < cb.n_layers; ++l)
    for (int h = 0; h < cb.n_kv_heads; ++h)
      for (int p = 0; p < 2 * B; ++p)
        for (int d = 0; d < cb.head_dim; ++d) {
          ASSERT_EQ(cb.k_row(l, h, p)[d], ca.k_row(l, h, p)[d]);
          ASSERT_EQ(cb.v_row(l, h, p)[d], ca.v_row(l, h, p)[d]);
        }
  // The limit caps it (the last prompt token is always computed).
  model::KvCache cc = e.new_cache(int(a.size()));
  EXPECT_EQ(pc.restore(a, B + 3, cc), B);
  // A different first block: a miss.
  std::vector<int32_t> d = a;
  d[0] = (d[0] + 1) % 96;
  EXPECT_EQ(pc.restore(d, int(d.size()) - 1, cc), 0);
  // Below one block nothing is kept.
  pc.insert(std::vector<int32_t>(a.begin(), a.begin() + B - 1), ca);
  EXPECT_EQ(pc.entries(), 1u);
}

TEST(PrefixCache, EvictsLeastRecentlyUsedWithinItsBudget) {
  auto m = test::make_tiny_model(test::TinySpec{});
  model::Engine e(m, model::EngineOptions{1});
  std::vector<std::vector<int32_t>> ps;
  std::vector<model::KvCache> cs;
  for (int i = 0; i < 3; ++i) {
    ps.push_back(tokens(2 * B, 10 + i));
    cs.push_back(e.new_cache(2 * B));
    e.forward(cs.back(), ps.back());
  }
  PrefixCache probe(size_t(1) << 30);
  probe.insert(ps[0], cs[0]);
  const size_t one = probe.bytes();
  PrefixCache pc(2 * one + one / 2);  // room for two entries
  pc.insert(ps[0], cs[0]);
  pc.insert(ps[1], cs[1]);
  model::KvCache into = e.new_cache(2 * B);
  EXPECT_EQ(pc.restore(ps[0], 2 * B, into), 2 * B);  // 0 is now the most recent
  pc.insert(ps[2], cs[2]);                            // evicts 1
  EXPECT_EQ(pc.entries(), 2u);
  EXPECT_LE(pc.bytes(), 2 * one + one / 2);
  EXPECT_EQ(pc.restore(ps[1], 2 * B, into), 0);
  EXPECT_EQ(pc.restore(ps[0], 2 * B, into), 2 * B);
  EXPECT_EQ(pc.restore(ps[2], 2 * B, into), 2 * B);
  PrefixCache tiny(one / 2);
  tiny.insert(ps[0], cs[0]);
  EXPECT_EQ(tiny.entries(), 0u) << "an entry over the whole budget is not kept";
}

}  // namespace
}  // namespace ember::serve
