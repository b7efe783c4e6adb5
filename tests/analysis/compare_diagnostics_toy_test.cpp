// The diagnostics' phases on a toy model whose forward step is a few lines: which inputs
// each phase feeds, what it compares, and where it reports the first difference. (The same
// phases on the real engine: compare_diagnostics_test.cpp.)
#include <gtest/gtest.h>

#include "analysis/compare.h"
#include "analysis/compare_fixtures.h"
#include "analysis/diagnostics.h"
#include "analysis/report_html.h"
#include "support/test_support.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/f16.h"

namespace ember::analysis {
namespace {

constexpr int kLayers = 2, kHeads = 2, kDim = 4, kEmbd = kHeads * kDim, kVocab = 64;

// Layer l's attention output depends only on layer l's cache rows, so a change to layer 0
// must leave layer 1's output exact: a localization the test can check.
DiagnosticModel toy_model() {
  DiagnosticModel m;
  m.identity = std::string(64, 'a');  // the fixtures' model-a
  m.n_layers = kLayers;
  m.n_kv_heads = kHeads;
  m.head_dim = kDim;
  m.n_embd = kEmbd;
  m.n_vocab = kVocab;
  m.forward = [](model::KvCache& c, int32_t token, const model::ForwardHooks* hooks) {
    const int pos = c.n_pos;
    EMBER_CHECK(pos < c.capacity);
    std::vector<float> logits(kVocab, 0.0f);
    for (int l = 0; l < kLayers; ++l) {
      std::vector<float> out(kEmbd, 0.0f);
      for (int h = 0; h < kHeads; ++h) {
        for (int d = 0; d < kDim; ++d) {
          c.k_row(l, h, pos)[d] = f32_to_f16(0.125f * float((token + d + h) % 7) - 0.25f * float(l));
          c.v_row(l, h, pos)[d] = f32_to_f16(0.25f * float((token * 3 + d) % 5) + 0.5f * float(h));
        }
        for (int p = 0; p <= pos; ++p) {
          for (int d = 0; d < kDim; ++d) {
            const float k = f16_to_f32(c.k_row(l, h, p)[d]), v = f16_to_f32(c.v_row(l, h, p)[d]);
            out[size_t(h * kDim + d)] += v * (1.0f + 0.5f * k) + 0.01f * float(p);
          }
        }
      }
      if (hooks && hooks->on_attn_out) hooks->on_attn_out(l, pos, 1, out.data());
      for (int i = 0; i < kVocab; ++i) {
        for (int j = 0; j < kEmbd; ++j) logits[size_t(i)] += out[size_t(j)] * float((i * 7 + j * 3 + l) % 5 - 2);
      }
    }
    ++c.n_pos;
    return logits;
  };
  return m;
}

ComparedState toy_state(uint32_t seed) { return testing::synthetic_state(kLayers, kHeads, kDim, 5, seed); }

TEST(CompareDiagnosticsToy, SelfComparisonIsExactOnEveryStep) {
  const ComparedState a = toy_state(3);
  const Diagnostics d = run_diagnostics(toy_model(), a, a, DiagnosticsOptions{5});
  ASSERT_EQ(d.same_input.steps.size(), 5u);
  EXPECT_EQ(d.same_input.top1_agreement, 5);
  EXPECT_FALSE(d.same_input.first_disagreement);
  for (const SameInputStep& s : d.same_input.steps) {
    EXPECT_EQ(s.position, 5 + s.step);
    EXPECT_EQ(s.logits.cosine, 1.0);
    EXPECT_EQ(s.logits.max_abs, 0.0);
    EXPECT_EQ(*s.logits.rel_error, 0.0);
    EXPECT_EQ(*s.logits_kl, 0.0);
    for (const VectorCompare& v : s.attn_out) EXPECT_EQ(v.max_abs, 0.0);
  }
  EXPECT_TRUE(d.greedy.identical());
  EXPECT_EQ(d.greedy.agreeing_prefix, 6);
  ASSERT_EQ(d.greedy.left.size(), 6u);
  // The shared path is LEFT's own greedy path: resume token, then its argmax choices.
  EXPECT_EQ(d.greedy.left[0], a.coords.resume_token);
  for (int s = 0; s < 5; ++s) {
    EXPECT_EQ(d.same_input.steps[size_t(s)].input_token, d.greedy.left[size_t(s)]);
    EXPECT_EQ(d.same_input.steps[size_t(s)].top1_left, d.greedy.left[size_t(s) + 1]);
  }
}

TEST(CompareDiagnosticsToy, ACacheEditShowsInItsLayerOnly) {
  const ComparedState a = toy_state(3);
  PerturbSpec spec;
  spec.layer = 0;
  spec.head = 1;
  spec.part = PerturbPart::v;
  spec.zero = true;
  const PerturbedState p = apply_perturbation(testing::copy_state(a), make_receipt(a, spec));
  const Diagnostics d = run_diagnostics(toy_model(), a, p.state(), DiagnosticsOptions{3});
  for (const SameInputStep& s : d.same_input.steps) {
    EXPECT_GT(s.attn_out[0].max_abs, 0.0);
    EXPECT_LT(s.attn_out[0].cosine, 1.0);
    EXPECT_EQ(s.attn_out[1].max_abs, 0.0);  // layer 1 reads only layer-1 rows
    EXPECT_GT(s.logits.max_abs, 0.0);
    ASSERT_TRUE(s.logits.rel_error.has_value());
    EXPECT_GT(*s.logits.rel_error, 0.0);
    ASSERT_TRUE(s.logits_kl.has_value());
    EXPECT_GT(*s.logits_kl, 0.0);
  }
  ASSERT_TRUE(d.same_input.mean_kl && d.same_input.max_kl);
  EXPECT_GT(*d.same_input.mean_kl, 0.0);
  EXPECT_LE(*d.same_input.mean_kl, *d.same_input.max_kl);
  // Both sides were fed LEFT's path in the same-input phase, whatever RIGHT predicted.
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(d.same_input.steps[size_t(s)].input_token, d.greedy.left[size_t(s)]);
  }
}

TEST(CompareDiagnosticsToy, IndependentGreedyStartsFromEachResumeToken) {
  const ComparedState a = toy_state(3);
  ComparedState b = testing::copy_state(a);
  b.coords.resume_token = (a.coords.resume_token + 1) % kVocab;
  const Diagnostics d = run_diagnostics(toy_model(), a, b, DiagnosticsOptions{4});
  EXPECT_EQ(d.greedy.right[0], b.coords.resume_token);
  ASSERT_TRUE(d.greedy.first_divergence.has_value());
  EXPECT_EQ(*d.greedy.first_divergence, 0);
  EXPECT_EQ(d.greedy.agreeing_prefix, 0);
  // Same caches, same inputs: the same-input phase sees no difference at all.
  EXPECT_EQ(d.same_input.top1_agreement, 4);
  for (const SameInputStep& s : d.same_input.steps) EXPECT_EQ(s.logits.max_abs, 0.0);
}

TEST(CompareDiagnosticsToy, RefusesWhatItCannotMeasure) {
  const ComparedState a = toy_state(3);
  DiagnosticModel other = toy_model();
  other.identity = std::string(64, 'f');
  EXPECT_THROW(run_diagnostics(other, a, a, DiagnosticsOptions{2}), Error);
  EXPECT_THROW(run_diagnostics(toy_model(), a, a, DiagnosticsOptions{0}), Error);
  ComparedState bad = testing::copy_state(a);
  bad.coords.resume_token = kVocab;
  EXPECT_THROW(run_diagnostics(toy_model(), a, bad, DiagnosticsOptions{2}), Error);
  const ComparedState wide = testing::synthetic_state(kLayers, kHeads + 1, kDim, 5, 3);
  EXPECT_THROW(run_diagnostics(toy_model(), wide, wide, DiagnosticsOptions{2}), Error);
}

TEST(CompareDiagnosticsToy, GoldenReportWithDiagnostics) {
  const ComparedState a = toy_state(3);
  PerturbSpec spec;
  spec.layer = 0;
  spec.head = 0;
  spec.part = PerturbPart::kv;
  spec.scale_bits = f32_to_bits(0.5f);
  const PerturbedState p = apply_perturbation(testing::copy_state(a), make_receipt(a, spec));
  CompareOptions o;
  o.r2 = true;
  o.thresholds.min_cosine = 0.99;
  CompareReport rep = compare_states(a, p, o);
  rep.diagnostics = run_diagnostics(toy_model(), a, p.state(), DiagnosticsOptions{3});
  const std::string doc = report_json(rep);
  const std::string path = std::string(EMBER_SOURCE_DIR) + "/tests/golden/compare_toy_diagnostics.json";
  if (const char* u = std::getenv("EMBER_UPDATE_GOLDEN"); u && std::string(u) == "1") {
    write_file_atomic(path, doc, true);
  }
  EXPECT_EQ(read_file(path), doc) << "report differs from " << path;
  const std::string table = report_table(rep);
  EXPECT_NE(table.find("independent greedy"), std::string::npos) << table;
  EXPECT_NE(report_html(rep).find("attn-cell"), std::string::npos);
}

}  // namespace
}  // namespace ember::analysis
