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

// The rows of one position, every layer and head, K then V.
std::vector<uint16_t> rows_of(const model::KvCache& c, int p) {
  std::vector<uint16_t> out;
  for (int l = 0; l < c.n_layers; ++l)
    for (int h = 0; h < c.n_kv_heads; ++h) {
      out.insert(out.end(), c.k_row(l, h, p), c.k_row(l, h, p) + c.head_dim);
      out.insert(out.end(), c.v_row(l, h, p), c.v_row(l, h, p) + c.head_dim);
    }
  return out;
}

// What recompute_positions hands its visitor, kept: rows and the last position's logits.
std::vector<std::vector<uint16_t>> recompute_all(model::Engine& engine, const Fixture& f, const model::KvCache& cache,
                                                  std::span<const int> at, const RecomputeOptions& o,
                                                  std::vector<float>& logits) {
  std::vector<std::vector<uint16_t>> rows;
  recompute_positions(engine, cache, f.tokens, at, [&](const RecomputedPosition& r) {
    rows.push_back(rows_of(*r.recomputed, r.position));
    EXPECT_EQ(r.logits.empty(), r.position != cache.n_pos - 1) << "logits at the last position only";
    if (!r.logits.empty()) logits.assign(r.logits.begin(), r.logits.end());
    if (o.f32_rows) {
      EXPECT_FALSE(r.k_f32.empty());
    }
  }, o);
  return rows;
}

TEST(RecomputePositions, OneBatchedStepGivesTheRowsAndLogitsOfOnePositionAtATime) {
  Fixture f;
  const std::vector<int> at = {0, 5, 16, 17, 30, int(f.tokens.size()) - 1};
  model::KvCache flipped = f.cache.copy();
  flipped.v_row(1, 0, 16)[2] ^= 0x0001;  // a low bit: the batch must see what one at a time sees
  RecomputeOptions one_at_a_time, batched, over_budget;
  batched.f32_rows = over_budget.f32_rows = false;
  over_budget.max_batch_bytes = 0;  // falls back to one position at a time
  for (int threads : {1, 3}) {
    model::Engine engine(f.model, {threads});
    for (const model::KvCache* c : {&f.cache, &flipped}) {
      std::vector<float> l1, l2, l3;
      const auto a = recompute_all(engine, f, *c, at, one_at_a_time, l1);
      const auto b = recompute_all(engine, f, *c, at, batched, l2);
      const auto d = recompute_all(engine, f, *c, at, over_budget, l3);
      ASSERT_EQ(a.size(), at.size());
      EXPECT_EQ(a, b) << threads << " threads";
      EXPECT_EQ(a, d) << threads << " threads";
      ASSERT_EQ(l1.size(), l2.size());
      EXPECT_EQ(0, std::memcmp(l1.data(), l2.data(), l1.size() * sizeof(float)));
      EXPECT_EQ(0, std::memcmp(l1.data(), l3.data(), l1.size() * sizeof(float)));
    }
    // The flip shows in the batch as it does alone: at its position and after it.
    std::vector<float> unused;
    const auto clean = recompute_all(engine, f, f.cache, at, batched, unused);
    const auto bad = recompute_all(engine, f, flipped, at, batched, unused);
    EXPECT_EQ(clean[2], rows_of(f.cache, 16)) << "recomputed from the clean rows before it";
    EXPECT_NE(rows_of(flipped, 16), bad[2]) << "the flipped row itself";
  }
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
