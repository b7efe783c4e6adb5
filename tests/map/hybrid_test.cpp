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

TEST(Hybrid, TheHandoffCallDecodesChecksAndReports) {
  Pair p;
  std::vector<std::string> events;
  HybridOptions o;
  o.n = 4;
  o.check = true;
  o.is_end_of_generation = [](int32_t) { return false; };
  o.on_handoff = [&](const HybridRun& run) { events.push_back("handoff s=" + std::to_string(run.s)); };
  o.on_token = [&](int32_t id) { events.push_back(std::to_string(id)); };
  const HybridOutcome out = hybrid_handoff(p.se, p.te, *p.source, *p.target, nullptr, p.ids, o, "test");
  ASSERT_EQ(out.generated.size(), 4u);
  ASSERT_EQ(events.size(), 5u);  // the handoff first, then each token as it is chosen
  EXPECT_EQ(events[0], "handoff s=" + std::to_string(out.run.s));
  EXPECT_EQ(events[1], std::to_string(out.generated[0]));
  ASSERT_TRUE(out.check.has_value());
  EXPECT_TRUE(out.check->first.bit_identical);  // a == s: the target's own bits
  EXPECT_TRUE(out.check->same_greedy);
  EXPECT_FALSE(out.check->exact_hybrid_differs);
  const FullPrefillReference ref = full_prefill_reference(p.te, p.ids, 4, [](int32_t) { return false; });
  EXPECT_EQ(out.generated, ref.greedy);
  const nlohmann::json j = out.report(p.source->identity(), p.target->identity(), nullptr);
  EXPECT_EQ(j["anchor"], out.run.a);
  EXPECT_EQ(j["generated"].size(), 4u);
  EXPECT_EQ(j["check"]["greedy_identical"], true);
  EXPECT_EQ(j["mapper_hash"], "");
  const std::string line = handoff_line(out.run);
  EXPECT_EQ(line.rfind("handoff s = " + std::to_string(out.run.s) + ", a = " + std::to_string(out.run.a) +
                           ", L = " + std::to_string(p.target->config().n_layers) + ": 0:reused",
                       0),
            0u)
      << line;
  EXPECT_NE(line.find("% (weight MACs)"), std::string::npos) << line;
  // Stopping at an end-of-generation id: the id is kept, nothing after it.
  o.check = false;
  o.on_handoff = {};
  o.on_token = {};
  const int32_t first = out.generated[0];
  o.is_end_of_generation = [first](int32_t id) { return id == first; };
  const HybridOutcome stop = hybrid_handoff(p.se, p.te, *p.source, *p.target, nullptr, p.ids, o, "test");
  EXPECT_EQ(stop.generated, std::vector<int32_t>{first});
  EXPECT_FALSE(stop.check.has_value());
}

TEST(Hybrid, TheCommandChecksBitExactnessAndWritesAMappedCache) {
  const std::string dir = test::temp_dir("hybrid-cli");
  const std::string m = test::shared_path("models");
  std::string out;
  ASSERT_EQ(test::run_command(test::ember_binary() + " map hybrid --source " + m + "/stories260K.gguf --target " + m +
                                  "/stories260K-kjv-top.gguf --prompt 'And the LORD said unto' -n 4 --check --relation same-base --output " +
                                  dir + "/mapped --json-out " + dir + "/h.json",
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
