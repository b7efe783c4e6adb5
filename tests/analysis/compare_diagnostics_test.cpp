// The model diagnostics of `kv compare` on real and synthetic models, with states prefilled
// directly by the engine (the snapshot round trip is covered by compare_cli_test).
#include <gtest/gtest.h>

#include <cstring>

#include "analysis/compare.h"
#include "analysis/diagnostics.h"
#include "analysis/perturb.h"
#include "model/engine.h"
#include "model/generate.h"
#include "support/test_support.h"
#include "util/error.h"

namespace ember::analysis {
namespace {

std::vector<int32_t> read_i32(const std::string& path) {
  const std::vector<uint8_t> b = test::read_bytes(path);
  std::vector<int32_t> out(b.size() / 4);
  if (!out.empty()) std::memcpy(out.data(), b.data(), out.size() * 4);
  return out;
}

// A native state of `prompt` prefilled by the engine, with coordinates from the model.
ComparedState prefill(model::Engine& engine, const std::vector<int32_t>& prompt) {
  const model::ModelConfig& cfg = engine.config();
  ComparedState s;
  s.cache = engine.new_cache(int(prompt.size()));
  const std::vector<float> logits = engine.forward(s.cache, prompt);
  s.identity.kind = "native";
  s.identity.model_identity = engine.model().identity();
  s.identity.architecture = model::arch_name(cfg.arch);
  s.identity.engine_fingerprint = engine.fingerprint();
  s.identity.snapshot_id = std::string(64, '5');
  s.coords.n_layers = cfg.n_layers;
  s.coords.n_kv_heads = cfg.n_kv_heads;
  s.coords.head_dim = cfg.head_dim;
  s.coords.n_pos = int(prompt.size());
  s.coords.prefix_tokens = prompt;
  s.coords.tokenizer_identity = "t";
  s.coords.resume_token = model::argmax(logits.data(), int(logits.size()));
  return s;
}

ComparedState copy(const ComparedState& s) {
  ComparedState c;
  c.identity = s.identity;
  c.coords = s.coords;
  c.cache = s.cache.copy();
  return c;
}

struct Fixture {
  std::shared_ptr<const model::Model> model;
  std::unique_ptr<model::Engine> engine;
  std::vector<int32_t> prompt, reference;  // reference: llama.cpp's prompt + greedy ids
};

Fixture load(const std::string& gguf, const std::string& tokens, int n_generated) {
  Fixture f;
  f.model = model::Model::load(test::shared_path(gguf));
  f.engine = std::make_unique<model::Engine>(f.model, model::EngineOptions{1});
  f.reference = read_i32(test::shared_path(tokens));
  EXPECT_GT(f.reference.size(), size_t(n_generated));
  f.prompt.assign(f.reference.begin(), f.reference.end() - n_generated);
  return f;
}

TEST(CompareDiagnostics, SelfComparisonIsExactAndFollowsTheModelsGreedyPath) {
  Fixture f = load("models/stories260K.gguf", "models/reference/stories260K.p1.tokens.i32", 48);
  const ComparedState a = prefill(*f.engine, f.prompt);
  const Diagnostics d = run_diagnostics(*f.engine, a, a, DiagnosticsOptions{6});
  ASSERT_EQ(d.same_input.steps.size(), 6u);
  EXPECT_EQ(d.same_input.top1_agreement, 6);
  EXPECT_FALSE(d.same_input.first_disagreement);
  for (const SameInputStep& s : d.same_input.steps) {
    EXPECT_EQ(s.logits.max_abs, 0.0);
    EXPECT_EQ(s.logits.cosine, 1.0);
    ASSERT_EQ(s.attn_out.size(), 5u);
    for (const VectorCompare& v : s.attn_out) EXPECT_EQ(v.max_abs, 0.0);
    EXPECT_EQ(s.position, int(f.prompt.size()) + s.step);
  }
  EXPECT_TRUE(d.greedy.identical());
  EXPECT_EQ(d.greedy.agreeing_prefix, 7);
  // The reference path is LEFT's greedy continuation: the same-input inputs are its tokens.
  for (int s = 0; s < 6; ++s) {
    EXPECT_EQ(d.same_input.steps[size_t(s)].input_token, d.greedy.left[size_t(s)]);
  }
  // And it is the model's own greedy continuation (llama.cpp's greedy ids for this prompt).
  for (size_t i = 0; i < d.greedy.left.size(); ++i) {
    EXPECT_EQ(d.greedy.left[i], f.reference[f.prompt.size() + i]) << "token " << i;
  }
}

void zero_head(const char* gguf, const char* tokens, int n_generated) {
  Fixture f = load(gguf, tokens, n_generated);
  const ComparedState a = prefill(*f.engine, f.prompt);
  PerturbSpec spec;
  spec.layer = 0;
  spec.head = 0;
  spec.part = PerturbPart::kv;
  spec.zero = true;
  const PerturbedState p = apply_perturbation(copy(a), make_receipt(a, spec));
  const CompareReport rep = compare_states(a, p, CompareOptions{});
  const model::ModelConfig& cfg = f.engine->config();
  for (int l = 0; l < cfg.n_layers; ++l) {
    for (int h = 0; h < cfg.n_kv_heads; ++h) {
      const bool hit = l == 0 && h == 0;
      EXPECT_EQ(rep.metrics.at(l, h).k.mismatches != 0, hit) << l << "/" << h;
      EXPECT_EQ(rep.metrics.at(l, h).v.mismatches != 0, hit) << l << "/" << h;
    }
  }
  const Diagnostics d = run_diagnostics(*f.engine, a, p.state(), DiagnosticsOptions{4});
  EXPECT_LT(d.same_input.steps[0].attn_out[0].cosine, 1.0);
  EXPECT_LT(d.same_input.steps[0].logits.cosine, 1.0);
  EXPECT_LT(d.same_input.steps[3].logits.cosine, 1.0);
  std::printf("[%s] zero L0 H0 kv: layer-0 attn-out cosine %.6f, logit cosine %.6f (step 0) "
              "%.6f (step 3), top-1 %d/4\n", gguf, d.same_input.steps[0].attn_out[0].cosine,
              d.same_input.steps[0].logits.cosine, d.same_input.steps[3].logits.cosine,
              d.same_input.top1_agreement);
}

TEST(CompareDiagnostics, ZeroingLayer0Head0MovesAttentionAndLogitsStories) {
  zero_head("models/stories260K.gguf", "models/reference/stories260K.p1.tokens.i32", 48);
}

TEST(CompareDiagnostics, ZeroingLayer0Head0MovesAttentionAndLogitsQwen2) {
  zero_head("models/synthetic/qwen2-bias-s5006.F32.gguf",
            "models/synthetic/qwen2-bias-s5006.F32.tokens.i32", 16);
}

TEST(CompareDiagnostics, RefusesALeftStateOfAnotherModel) {
  Fixture f = load("models/stories260K.gguf", "models/reference/stories260K.p1.tokens.i32", 48);
  ComparedState a = prefill(*f.engine, f.prompt);
  a.identity.model_identity = std::string(64, '0');
  EXPECT_THROW(run_diagnostics(*f.engine, a, a, DiagnosticsOptions{2}), Error);
  ComparedState b = prefill(*f.engine, f.prompt);
  EXPECT_THROW(run_diagnostics(*f.engine, b, b, DiagnosticsOptions{0}), Error);
}

}  // namespace
}  // namespace ember::analysis
