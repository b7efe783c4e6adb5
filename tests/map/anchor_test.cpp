// The recompute anchor and the identity map on real models: exact where the computation is
// the same, refused where the shared boundary is not real.
#include <gtest/gtest.h>

#include <cstring>

#include "gguf/gguf_file.h"
#include "map/anchor.h"
#include "map/metrics.h"
#include "map/shared.h"
#include "model/engine.h"
#include "support/test_support.h"
#include "util/error.h"

namespace ember::map {
namespace {

// "Once upon a time, there was a little girl named Lily." in stories260K ids is not needed:
// any in-vocabulary sequence exercises the same computation.
std::vector<int32_t> prompt_ids() {
  return {1, 403, 407, 261, 378, 285, 261, 267, 286, 318, 308, 445, 336, 434, 268, 261, 330, 296, 278};
}

struct ModelPair {
  std::shared_ptr<const model::Model> src, tgt;
};

ModelPair load_pair(const std::string& s, const std::string& t) {
  return {model::Model::load(test::shared_path("models/" + s)), model::Model::load(test::shared_path("models/" + t))};
}

// Source prefill of prefix, capturing the residual entering every layer.
struct SourceRun {
  model::KvCache cache;
  std::vector<std::vector<float>> residual;  // [boundary][n * E]
};
SourceRun run_source(model::Engine& e, std::span<const int32_t> prefix) {
  SourceRun r;
  r.residual.resize(size_t(e.config().n_layers + 1));
  model::ForwardHooks hooks;
  hooks.on_residual = [&](int b, int, int n, const float* x) {
    r.residual[size_t(b)].assign(x, x + size_t(n) * e.config().n_embd);
  };
  r.cache = e.new_cache(int(prefix.size()) + 20);
  e.forward(r.cache, prefix, &hooks);
  return r;
}

TEST(SharedLayers, StoriesBaseAndKjvShareEmbeddingsAndTwoLayers) {
  const ModelPair p = load_pair("stories260K.gguf", "stories260K-kjv-top.gguf");
  const SharedLayers s = shared_layers(p.src->file(), p.src->config(), p.tgt->file(), p.tgt->config());
  EXPECT_EQ(s.layers, 2);
  EXPECT_EQ(s.first_diff.rfind("blk.2.", 0), 0u) << s.first_diff;
  EXPECT_NO_THROW(require_shared(s, 2, "t"));
  try {
    require_shared(s, 3, "t");
    FAIL() << "a boundary above the shared layers was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("blk.2."), std::string::npos) << e.what();
  }
  // F32 vs Q8_0 of one model: the embeddings already differ.
  const ModelPair q = load_pair("stories260K.gguf", "stories260K-Q8_0.gguf");
  EXPECT_EQ(shared_layers(q.src->file(), q.src->config(), q.tgt->file(), q.tgt->config()).layers, 0);
}

TEST(Anchor, HybridAtTheTrueSharedBoundaryIsBitExactOnStoriesKjv) {
  const ModelPair p = load_pair("stories260K.gguf", "stories260K-kjv-top.gguf");
  model::Engine src(p.src, {}), tgt(p.tgt, {});
  const auto ids = prompt_ids();
  const int P = int(ids.size());
  const std::span<const int32_t> prefix(ids.data(), size_t(P - 1));
  // The reference: the target's own full prefill, then 8 greedy steps.
  model::KvCache ref_cache = tgt.new_cache(P + 16);
  std::vector<float> ref = tgt.forward(ref_cache, ids);
  SourceRun s = run_source(src, prefix);
  AnchorReport report;
  model::KvCache c = anchor_handoff(tgt, src.config(), nullptr, s.cache, prefix,
                                    s.residual[2].data(), 2, 2, P + 16, &report);
  // The prefix cache itself equals the target's own, bit for bit.
  for (int l = 0; l < 5; ++l)
    for (int h = 0; h < tgt.config().n_kv_heads; ++h) {
      ASSERT_EQ(std::memcmp(c.k_row(l, h, 0), ref_cache.k_row(l, h, 0), size_t(P - 1) * 8 * 2), 0) << l;
      ASSERT_EQ(std::memcmp(c.v_row(l, h, 0), ref_cache.v_row(l, h, 0), size_t(P - 1) * 8 * 2), 0) << l;
    }
  std::vector<float> got = tgt.forward(c, std::span<const int32_t>(&ids[size_t(P - 1)], 1));
  EXPECT_TRUE(compare_logits(got.data(), ref.data(), int(ref.size())).bit_identical);
  for (int step = 0; step < 8; ++step) {
    const int32_t next = first_argmax(ref.data(), int(ref.size()));
    ASSERT_EQ(first_argmax(got.data(), int(got.size())), next);
    ref = tgt.forward(ref_cache, std::span<const int32_t>(&next, 1));
    got = tgt.forward(c, std::span<const int32_t>(&next, 1));
    ASSERT_TRUE(compare_logits(got.data(), ref.data(), int(ref.size())).bit_identical) << step;
  }
  ASSERT_EQ(report.roles.size(), 5u);
  EXPECT_EQ(report.roles[0], LayerRole::reused);
  EXPECT_EQ(report.roles[1], LayerRole::reused);
  EXPECT_EQ(report.roles[2], LayerRole::recomputed);
  EXPECT_EQ(report.roles[3], LayerRole::recomputed);
  EXPECT_EQ(report.roles[4], LayerRole::kv_projected);
  EXPECT_GT(report.prefill_work_saved(), 0.4);  // 2 of 5 layers reused, the last one K/V only
}

TEST(Anchor, FullTargetPrefillAndIdentityReuseAreExact) {
  const ModelPair p = load_pair("stories260K.gguf", "stories260K.gguf");
  model::Engine src(p.src, {}), tgt(p.tgt, {});
  const auto ids = prompt_ids();
  const int P = int(ids.size());
  const std::span<const int32_t> prefix(ids.data(), size_t(P - 1));
  model::KvCache ref_cache = tgt.new_cache(P);
  const std::vector<float> ref = tgt.forward(ref_cache, ids);
  SourceRun s = run_source(src, prefix);
  const ModelGeometry g = geometry_of(src.config(), p.src->identity());
  const Mapper id = identity_mapper(g, g, "tok", 0);
  const int32_t last = ids[size_t(P - 1)];
  // s = a = 0: the target's own prefill (no LM head, last layer K/V only).
  model::KvCache c0 = anchor_handoff(tgt, src.config(), nullptr, s.cache, prefix, nullptr, 0, 0, P);
  const auto l0 = tgt.forward(c0, std::span<const int32_t>(&last, 1));
  EXPECT_TRUE(compare_logits(l0.data(), ref.data(), int(ref.size())).bit_identical);
  // Pure identity mapping of a model onto itself (a = L): the native state, bit for bit.
  model::KvCache c1 = anchor_handoff(tgt, src.config(), &id, s.cache, prefix, nullptr, 0, 5, P);
  const auto l1 = tgt.forward(c1, std::span<const int32_t>(&last, 1));
  EXPECT_TRUE(compare_logits(l1.data(), ref.data(), int(ref.size())).bit_identical);
}

TEST(Anchor, Refusals) {
  const ModelPair p = load_pair("stories260K.gguf", "stories260K-kjv-top.gguf");
  model::Engine src(p.src, {}), tgt(p.tgt, {});
  const auto ids = prompt_ids();
  SourceRun s = run_source(src, ids);
  EXPECT_THROW(anchor_handoff(tgt, src.config(), nullptr, s.cache, ids, nullptr, 3, 2, 64), Error);  // s > a
  EXPECT_THROW(anchor_handoff(tgt, src.config(), nullptr, s.cache, ids, nullptr, 2, 4, 64), Error);  // no mapper
  EXPECT_THROW(anchor_handoff(tgt, src.config(), nullptr, s.cache, ids, nullptr, 2, 2, 64), Error);  // no residual
  const ModelGeometry g = geometry_of(src.config(), "x");
  const Mapper id = identity_mapper(g, g, "tok", 2);
  // a > s needs a residual map at a, which an identity mapper does not have.
  EXPECT_THROW(anchor_handoff(tgt, src.config(), &id, s.cache, ids, s.residual[3].data(), 2, 3, 64), Error);
  // s above the mapper's verified shared layers.
  EXPECT_THROW(anchor_handoff(tgt, src.config(), &id, s.cache, ids, s.residual[3].data(), 3, 5, 64), Error);
}

}  // namespace
}  // namespace ember::map
