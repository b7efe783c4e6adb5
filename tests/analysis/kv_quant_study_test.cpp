// ember study kv-quant on a real trained model (stories260K): the figures are well formed,
// ordered as the types' precision says, and the same inputs give the same report bytes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "analysis/kv_quant_study.h"
#include "support/test_support.h"

namespace ember::analysis {
namespace {

std::vector<std::vector<int32_t>> prompts() {
  // "Once upon a time, there was a little girl named Lily." and "Lily wanted to play with the
  // big red ball, but her mom said" as stories260K's tokenizer encodes them, and one too short.
  return {{1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426},
          {1, 317, 391, 266, 267, 337, 335, 265, 370, 352, 266, 268, 388, 432, 398, 311, 357, 336},
          {1, 403}};
}

TEST(KvQuantStudy, FiguresAreOrderedAndReproducible) {
  model::Engine engine(model::Model::load(test::shared_path("models/stories260K.gguf")),
                       model::EngineOptions{1, false});
  KvQuantStudyOptions o;
  o.types = {gguf::TensorType::Q8_0, gguf::TensorType::Q4_0};
  o.parts = {PerturbPart::k, PerturbPart::kv};
  o.continuation = 4;
  o.top_k = 5;
  const KvQuantStudy a = run_kv_quant_study(engine, prompts(), o);
  EXPECT_EQ(a.prompts, 2);
  EXPECT_EQ(a.skipped, 1);
  EXPECT_EQ(a.steps, 8);
  ASSERT_EQ(a.configs.size(), 4u);
  for (const KvQuantConfig& c : a.configs) {
    ASSERT_EQ(c.kl.size(), 8u);
    EXPECT_GE(c.kl_mean, 0.0);
    EXPECT_LE(c.kl_mean, c.kl_p99);
    EXPECT_LE(c.kl_p99, c.kl_max);
    EXPECT_GT(c.k_rel_err_mean, 0.0);
    EXPECT_EQ(c.v_rel_err_mean > 0.0, c.part == PerturbPart::kv);  // V untouched by a K-only cache
    EXPECT_GE(c.topk_overlap, 0.0);
    EXPECT_LE(c.topk_overlap, 1.0);
  }
  // 8-bit blocks err far less than 4-bit ones, in the cache and at the output.
  EXPECT_LT(a.configs[0].k_rel_err_mean * 4, a.configs[2].k_rel_err_mean);
  EXPECT_LT(a.configs[1].kl_mean, a.configs[3].kl_mean);
  const KvQuantStudy b = run_kv_quant_study(engine, prompts(), o);
  EXPECT_EQ(a.json(), b.json());
  const nlohmann::json j = nlohmann::json::parse(a.json());
  EXPECT_EQ(j["configs"][3]["type"], "q4_0");
  EXPECT_EQ(j["configs"][3]["part"], "kv");
  // The page: a K and a V error map and a KL map (one (layer, head) quantized at a time) per K+V
  // configuration, each with its colour legend and a hover title on every (layer, head) cell.
  const std::string html = a.html();
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t p = html.find(what); p != std::string::npos; p = html.find(what, p + 1)) ++n;
    return n;
  };
  size_t kv_configs = 0;
  for (const KvQuantConfig& c : a.configs) kv_configs += c.part == PerturbPart::kv;
  ASSERT_GT(kv_configs, 0u);
  EXPECT_EQ(count("<svg class=\"heatmap\""), 3 * kv_configs);
  EXPECT_EQ(count("<g class=\"legend\">"), 3 * kv_configs);
  EXPECT_EQ(count("<title>layer "), 3 * kv_configs * size_t(a.n_layers * a.n_kv_heads));
  EXPECT_EQ(html.find("<script"), std::string::npos);
}

TEST(KvQuantStudy, RefusesWhatItCannotMeasure) {
  model::Engine engine(model::Model::load(test::shared_path("models/stories260K.gguf")),
                       model::EngineOptions{1, false});
  KvQuantStudyOptions o;
  o.continuation = 0;
  EXPECT_NE(test::error_of([&] { run_kv_quant_study(engine, prompts(), o); }).find("--continuation"),
            std::string::npos);
  o.continuation = 40;  // every prompt is shorter than 42 tokens
  EXPECT_NE(test::error_of([&] { run_kv_quant_study(engine, prompts(), o); }).find("--prompts"),
            std::string::npos);
  o.continuation = 4;
  o.types = {gguf::TensorType::Q6_K};
  EXPECT_NE(test::error_of([&] { run_kv_quant_study(engine, prompts(), o); }).find("--quantize"),
            std::string::npos);
}

}  // namespace
}  // namespace ember::analysis
