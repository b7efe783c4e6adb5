// Alignment: `kv compare` refuses states whose coordinates differ, naming the coordinate,
// and labels comparisons that cross models.
#include <gtest/gtest.h>

#include "analysis/compare.h"
#include "analysis/compare_fixtures.h"
#include "util/error.h"

namespace ember::analysis {
namespace {

using testing::copy_state;
using testing::synthetic_state;

std::string refusal(const ComparedState& a, const ComparedState& b) {
  try {
    compare_states(a, b, CompareOptions{});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CompareAlign, RefusesNamingTheCoordinate) {
  const ComparedState left = synthetic_state(2, 2, 4, 5, 1);
  {
    ComparedState r = synthetic_state(3, 2, 4, 5, 1);
    EXPECT_NE(refusal(left, r).find("coordinate geometry.layers: expected 2 (LEFT), found 3 (RIGHT)"),
              std::string::npos) << refusal(left, r);
  }
  {
    ComparedState r = synthetic_state(2, 1, 4, 5, 1);
    EXPECT_NE(refusal(left, r).find("coordinate geometry.kv_heads"), std::string::npos);
  }
  {
    ComparedState r = synthetic_state(2, 2, 8, 5, 1);
    EXPECT_NE(refusal(left, r).find("coordinate geometry.head_dim"), std::string::npos);
  }
  {
    ComparedState r = synthetic_state(2, 2, 4, 6, 1);
    EXPECT_NE(refusal(left, r).find("coordinate positions: expected 5 (LEFT), found 6 (RIGHT)"),
              std::string::npos) << refusal(left, r);
  }
  {
    ComparedState r = copy_state(left);
    r.coords.prefix_tokens[3] = 999;
    EXPECT_NE(refusal(left, r).find("coordinate prefix_tokens[3]: expected 22 (LEFT), found 999 (RIGHT)"),
              std::string::npos) << refusal(left, r);
  }
  {
    ComparedState r = copy_state(left);
    r.coords.tokenizer_identity = std::string(64, 'u');
    EXPECT_NE(refusal(left, r).find("coordinate tokenizer"), std::string::npos);
  }
  {
    ComparedState r = copy_state(left);
    r.coords.representation[0].second = "pre-rope";
    EXPECT_NE(refusal(left, r).find("coordinate representation.keys: expected post-rope (LEFT), found pre-rope (RIGHT)"),
              std::string::npos) << refusal(left, r);
  }
  {
    ComparedState r = copy_state(left);
    r.coords.representation.pop_back();
    EXPECT_NE(refusal(left, r).find("coordinate representation.qk_norm: expected none (LEFT), found absent (RIGHT)"),
              std::string::npos) << refusal(left, r);
  }
  {
    ComparedState r = copy_state(left);
    r.coords.representation.emplace_back("rope.scaling", "linear");
    EXPECT_NE(refusal(left, r).find("representation.rope.scaling"), std::string::npos);
  }
}

TEST(CompareAlign, RefusesAStateInconsistentWithItsCoordinates) {
  const ComparedState left = synthetic_state(2, 2, 4, 5, 1);
  ComparedState r = copy_state(left);
  r.cache.n_pos = 4;
  EXPECT_NE(refusal(left, r).find("RIGHT: cache positions"), std::string::npos) << refusal(left, r);
}

TEST(CompareAlign, ResumeTokensMayDifferAndAreReported) {
  const ComparedState left = synthetic_state(2, 2, 4, 5, 1);
  ComparedState r = copy_state(left);
  r.coords.resume_token = 7;
  const CompareReport rep = compare_states(left, r, CompareOptions{});
  EXPECT_EQ(rep.left.resume_token, 42);
  EXPECT_EQ(rep.right.resume_token, 7);
  EXPECT_TRUE(rep.metrics.identical());
}

TEST(CompareAlign, SameModelIsNotACrossing) {
  const ComparedState a = synthetic_state(2, 2, 4, 5, 1);
  const CompareReport rep = compare_states(a, a, CompareOptions{});
  EXPECT_FALSE(rep.crossing.crosses_models);
  EXPECT_EQ(rep.crossing.label, "same-model");
}

TEST(CompareAlign, DifferentWeightTypesAreAQuantizationBoundaryStudy) {
  const ComparedState a = synthetic_state(2, 2, 4, 5, 1, "model-a", "F32");
  const ComparedState b = synthetic_state(2, 2, 4, 5, 2, "model-b", "Q8_0");
  const CompareReport rep = compare_states(a, b, CompareOptions{});
  EXPECT_TRUE(rep.crossing.crosses_models);
  EXPECT_EQ(rep.crossing.label, "quantization-boundary");
  EXPECT_NE(rep.crossing.statement.find("crosses models"), std::string::npos);
  EXPECT_NE(rep.crossing.statement.find(std::string(16, 'a')), std::string::npos);
  EXPECT_NE(rep.crossing.statement.find(std::string(16, 'b')), std::string::npos);
  const std::string doc = report_json(rep);
  EXPECT_NE(doc.find("\"crosses_models\": true"), std::string::npos);
  EXPECT_NE(doc.find(std::string(64, 'a')), std::string::npos);
  EXPECT_NE(doc.find(std::string(64, 'b')), std::string::npos);
}

// A quantized foreign cache is named with its types, and its quantization is named as a cause
// beside the arithmetic (it showed as an f16/f32 cache blamed on arithmetic before).
TEST(CompareAlign, NamesEachSidesCacheTypes) {
  const ComparedState a = synthetic_state(2, 2, 4, 5, 1, "model-a", "F32");
  ComparedState b = synthetic_state(2, 2, 4, 5, 2, "model-a", "F32");
  b.identity.kind = "foreign";
  b.identity.provenance = {{"foreign.engine", "llama.cpp"},     {"foreign.cache_type_k", "q4_0"},
                           {"foreign.cache_type_v", "q4_0"},    {"foreign.k_rotation", "hadamard-64"},
                           {"foreign.v_rotation", "hadamard-64"}};
  bool q = true;
  EXPECT_EQ(state_cache_types(a.identity, &q), "K f16, V f16");
  EXPECT_FALSE(q);
  EXPECT_EQ(state_cache_types(b.identity, &q), "K q4_0+hadamard-64, V q4_0+hadamard-64");
  EXPECT_TRUE(q);
  const CompareReport rep = compare_states(a, b, CompareOptions{});
  EXPECT_NE(rep.crossing.statement.find(
                "the two engines' arithmetic and the quantization of RIGHT's cache (K q4_0+hadamard-64, V "
                "q4_0+hadamard-64)"),
            std::string::npos)
      << rep.crossing.statement;
  EXPECT_NE(report_table(rep).find("cache K q4_0+hadamard-64 / V q4_0+hadamard-64"),
            std::string::npos)
      << report_table(rep);
}

// A foreign side (another engine's K/V of the same GGUF) is never "same-model": the label is
// cross-engine, whatever the models; two states of that one other engine compare as usual.
TEST(CompareAlign, AForeignSideIsCrossEngine) {
  const ComparedState a = synthetic_state(2, 2, 4, 5, 1, "model-a", "F32");
  ComparedState b = synthetic_state(2, 2, 4, 5, 2, "model-a", "F32");
  b.identity.kind = "foreign";
  b.identity.provenance = {{"foreign.engine", "llama.cpp"}};
  EXPECT_EQ(state_engine(a.identity), "ember");
  EXPECT_EQ(state_engine(b.identity), "llama.cpp");
  const CompareReport rep = compare_states(a, b, CompareOptions{});
  EXPECT_TRUE(rep.crossing.crosses_engines);
  EXPECT_FALSE(rep.crossing.crosses_models);
  EXPECT_EQ(rep.crossing.label, "cross-engine");
  EXPECT_NE(rep.crossing.statement.find("LEFT computed by ember, RIGHT by llama.cpp; same model"),
            std::string::npos)
      << rep.crossing.statement;
  EXPECT_NE(report_json(rep).find("\"crosses_engines\": true"), std::string::npos);
  const ComparedState c = synthetic_state(2, 2, 4, 5, 3, "model-c", "Q8_0");
  const CompareReport other = compare_states(b, c, CompareOptions{});
  EXPECT_EQ(other.crossing.label, "cross-engine");
  EXPECT_TRUE(other.crossing.crosses_models);
  EXPECT_NE(other.crossing.statement.find("also crosses models"), std::string::npos);
  const CompareReport both = compare_states(b, testing::copy_state(b), CompareOptions{});
  EXPECT_FALSE(both.crossing.crosses_engines);
  EXPECT_EQ(both.crossing.label, "same-model");
  EXPECT_NE(both.crossing.statement.find("both computed by llama.cpp"), std::string::npos);
}

TEST(CompareAlign, SameWeightTypesOfDifferentModelsAreCrossModel) {
  const ComparedState a = synthetic_state(2, 2, 4, 5, 1, "model-a", "F32");
  const ComparedState b = synthetic_state(2, 2, 4, 5, 2, "model-b", "F32");
  const CompareReport rep = compare_states(a, b, CompareOptions{});
  EXPECT_TRUE(rep.crossing.crosses_models);
  EXPECT_EQ(rep.crossing.label, "cross-model");
}

}  // namespace
}  // namespace ember::analysis
