// map::run_hybrid (map/hybrid.h), the library call behind `ember map hybrid`, on the real
// stories260K pair whose lower layers are byte-identical (stories260K-kjv-top shares s = 2):
// the exact hybrid (a == s) gives the target's own logits bit for bit, its artifact records the
// handoff, and bad anchors or a missing mapper are refused by field. Then the command itself.
#include <gtest/gtest.h>

#include <cstring>

#include "kv/state.h"
#include "map/hybrid.h"
#include "model/engine.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace ember::map {
namespace {

struct Pair {
  std::shared_ptr<const model::Model> source = model::Model::load(test::shared_path("models/stories260K.gguf"));
  std::shared_ptr<const model::Model> target = model::Model::load(test::shared_path("models/stories260K-kjv-top.gguf"));
  std::unique_ptr<tok::Tokenizer> tokenizer = tok::Tokenizer::from_gguf(target->file());
  model::Engine se{source, {}}, te{target, {}};
  std::vector<int32_t> ids = tokenizer->encode("And the LORD said unto", true);
};

TEST(Hybrid, TheExactHybridGivesTheTargetsOwnLogitsBitForBit) {
  Pair p;
  HybridRun run = run_hybrid(p.se, p.te, *p.source, *p.target, nullptr, p.ids, -1, "test");
  ASSERT_GT(run.s, 0);  // the pair shares its lower layers
  EXPECT_EQ(run.a, run.s);
  EXPECT_EQ(run.cache.n_pos, int(p.ids.size()) - 1);
  EXPECT_EQ(run.resume_token, p.ids.back());
  const std::vector<float> hybrid = p.te.forward(run.cache, std::span<const int32_t>(&run.resume_token, 1));
  const FullPrefillReference ref = full_prefill_reference(p.te, p.ids, 4, [](int32_t) { return false; });
  ASSERT_EQ(hybrid.size(), ref.first_logits.size());
  EXPECT_EQ(std::memcmp(hybrid.data(), ref.first_logits.data(), hybrid.size() * sizeof(float)), 0);
  EXPECT_EQ(ref.greedy.size(), 4u);

  const kv::KvState state = hybrid_mapped_state(run, p.te, p.tokenizer->identity(), p.source->identity(), nullptr);
  ASSERT_EQ(state.kind(), kv::StateKind::mapped);
  const kv::MappedProvenance& mapping = *state.mapping();
  EXPECT_EQ(mapping.kind, "hybrid");
  EXPECT_EQ(mapping.anchor, run.s);
  EXPECT_EQ(mapping.shared_layers, run.s);
  EXPECT_EQ(mapping.source_model_identity, p.source->identity());
  ASSERT_EQ(mapping.layer_roles.size(), size_t(p.target->config().n_layers));
  EXPECT_EQ(mapping.layer_roles[0], "reused");
  EXPECT_EQ(mapping.layer_roles[size_t(run.s)], "recomputed");
  EXPECT_EQ(mapping.layer_roles.back(), "kv-projected");  // the last layer: its K/V projections only
  EXPECT_EQ(state.manifest.prefix.tokens, std::vector<int32_t>(p.ids.begin(), p.ids.end() - 1));
  EXPECT_EQ(state.manifest.resume.token, p.ids.back());
  EXPECT_EQ(state.cache.n_pos, int(p.ids.size()) - 1);
}

TEST(Hybrid, BadAnchorsAndAMissingMapperAreRefusedByField) {
  Pair p;
  const int L = p.target->config().n_layers;
  EXPECT_NE(test::error_of([&] { run_hybrid(p.se, p.te, *p.source, *p.target, nullptr, p.ids, L + 1, "t"); })
                .find("--anchor: expected in [s, L]"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { run_hybrid(p.se, p.te, *p.source, *p.target, nullptr, p.ids, 0, "t"); })
                .find("--anchor"),
            std::string::npos);  // below s
  EXPECT_FALSE(test::error_of([&] { run_hybrid(p.se, p.te, *p.source, *p.target, nullptr, p.ids, L, "t"); }).empty())
      << "a > s needs a mapper";
  const std::vector<int32_t> one(1, p.ids[0]);
  EXPECT_NE(test::error_of([&] { run_hybrid(p.se, p.te, *p.source, *p.target, nullptr, one, -1, "t"); })
                .find("at least 2 tokens"),
            std::string::npos);
}

TEST(Hybrid, TheCommandChecksBitExactnessAndWritesAMappedCache) {
  const std::string dir = test::temp_dir("hybrid-cli");
  const std::string m = test::shared_path("models");
  std::string out;
  ASSERT_EQ(test::run_command(test::ember_binary() + " map hybrid --source " + m + "/stories260K.gguf --target " + m +
                                  "/stories260K-kjv-top.gguf --prompt 'And the LORD said unto' -n 4 --check --relation same-base --output " +
                                  dir + "/mapped --json " + dir + "/h.json",
                              &out),
            0)
      << out;
  EXPECT_NE(out.find("first logits bit-identical"), std::string::npos) << out;
  EXPECT_TRUE(ember::path_exists(dir + "/mapped.receipt.json"));
  EXPECT_EQ(test::run_command(test::ember_binary() + " map replay --mapped " + dir + "/mapped --model " + m +
                                  "/stories260K-kjv-top.gguf -n 2",
                              &out),
            0)
      << out;
  EXPECT_NE(test::run_command(test::ember_binary() + " kv replay --snapshot " + dir + "/mapped --model " + m +
                                  "/stories260K-kjv-top.gguf -n 2",
                              &out),
            0);
  EXPECT_NE(out.find("ember.kv-mapped"), std::string::npos) << out;
}

}  // namespace
}  // namespace ember::map
