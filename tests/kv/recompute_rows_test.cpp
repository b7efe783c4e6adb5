// recompute_positions: ember's own cache recomputes bit for bit at every position and thread
// count; one flipped bit is seen at its own position and, through attention, after it.
#include <gtest/gtest.h>

#include <cstring>

#include "kv/recompute_rows.h"
#include "model/engine.h"
#include "support/test_support.h"

namespace ember::kv::recompute_rows_test {
namespace {

struct Fixture {
  std::shared_ptr<const model::Model> model = model::Model::load(test::shared_path("models/stories260K.gguf"));
  std::vector<int32_t> tokens;
  model::KvCache cache;
  std::vector<float> boundary_logits;
  Fixture() {
    for (int i = 0; i < 40; ++i) tokens.push_back(int32_t(1 + (i * 37) % 500));
    model::Engine engine(model, {1});
    cache = engine.new_cache(int(tokens.size()));
    boundary_logits = engine.forward(cache, tokens);
  }
};

// Whether row p of every layer and head of `a` equals that of `b` bit for bit.
bool rows_equal(const model::KvCache& a, const model::KvCache& b, int p) {
  const size_t bytes = size_t(a.head_dim) * sizeof(uint16_t);
  for (int l = 0; l < a.n_layers; ++l)
    for (int h = 0; h < a.n_kv_heads; ++h)
      if (std::memcmp(a.k_row(l, h, p), b.k_row(l, h, p), bytes) != 0 ||
          std::memcmp(a.v_row(l, h, p), b.v_row(l, h, p), bytes) != 0)
        return false;
  return true;
}

TEST(RecomputePositions, OwnCacheRecomputesBitForBitOnEveryThreadCount) {
  Fixture f;
  std::vector<int> all(f.tokens.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = int(i);
  for (int threads : {1, 2, 3}) {
    model::Engine engine(f.model, {threads});
    int visited = 0;
    recompute_positions(engine, f.cache, f.tokens, all, [&](const RecomputedPosition& r) {
      EXPECT_TRUE(rows_equal(*r.stored, *r.recomputed, r.position)) << "position " << r.position;
      if (r.position == int(f.tokens.size()) - 1) {
        EXPECT_EQ(0, std::memcmp(r.logits.data(), f.boundary_logits.data(), r.logits.size_bytes()));
      }
      ++visited;
    });
    EXPECT_EQ(visited, int(all.size())) << threads << " threads";
  }
}

TEST(RecomputePositions, AFlippedBitShowsAtItsPositionAndAfterIt) {
  Fixture f;
  const int q = 17;
  f.cache.k_row(0, 0, q)[3] ^= 0x0400;  // an exponent bit of layer 0, head 0
  model::Engine engine(f.model, {2});
  const std::vector<int> spots = {q - 1, q, int(f.tokens.size()) - 1};
  std::vector<bool> equal;
  recompute_positions(engine, f.cache, f.tokens, spots,
                      [&](const RecomputedPosition& r) { equal.push_back(rows_equal(*r.stored, *r.recomputed, r.position)); });
  ASSERT_EQ(equal.size(), 3u);
  EXPECT_TRUE(equal[0]) << "a row before the flip is unaffected";
  EXPECT_FALSE(equal[1]) << "the flipped row itself";
  EXPECT_FALSE(equal[2]) << "the last row attends over the flipped one";
}

TEST(RecomputePositions, RefusesUnorderedOrOutOfRangePositions) {
  Fixture f;
  model::Engine engine(f.model, {1});
  const auto none = [](const RecomputedPosition&) {};
  const std::vector<int> unordered = {5, 5};
  EXPECT_NE(test::error_of([&] { recompute_positions(engine, f.cache, f.tokens, unordered, none); }), "");
  const std::vector<int> past = {40};
  EXPECT_NE(test::error_of([&] { recompute_positions(engine, f.cache, f.tokens, past, none); }), "");
}

TEST(SpotPositions, AlwaysHoldTheLastAreDistinctSortedAndReproducible) {
  const std::vector<int> a = spot_positions(2048, 4, 7);
  ASSERT_EQ(a.size(), 4u);
  EXPECT_EQ(a.back(), 2047);
  for (size_t i = 1; i < a.size(); ++i) EXPECT_LT(a[i - 1], a[i]);
  EXPECT_EQ(a, spot_positions(2048, 4, 7));
  EXPECT_NE(a, spot_positions(2048, 4, 8));
  EXPECT_EQ(spot_positions(3, 10, 1), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(spot_positions(5, 0, 1), (std::vector<int>{4}));
}

}  // namespace
}  // namespace ember::kv::recompute_rows_test
