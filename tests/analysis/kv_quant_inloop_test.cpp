// study kv-quant's in-loop mode, per-layer figures, budget and certificate on stories260K:
// in-loop with nothing quantized is the canonical run bit for bit; a one-layer figure is the
// `kv perturb --quantize --layers L` + `kv compare --model` figure; the budget's choice meets
// the budget on the held-out prompts; the certificate validates, and an edited one does not.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <span>
#include <sstream>

#include "analysis/diagnostics.h"
#include "analysis/kv_quant_budget.h"
#include "analysis/kv_quant_study.h"
#include "analysis/perturb.h"
#include "contract/receipt.h"
#include "kv/seal.h"
#include "model/engine.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"
#include "util/ed25519.h"
#include "util/error.h"

namespace ember::analysis::kv_quant_inloop_test {
namespace {

using gguf::TensorType;

model::Engine stories() {
  return model::Engine(model::Model::load(test::shared_path("models/stories260K.gguf")), model::EngineOptions{1, false});
}

// "Once upon a time, there was a little girl named Lily." as stories260K encodes it.
const std::vector<int32_t> kPrompt = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426};

// The first n non-empty lines of the shared prompt file, tokenized as the CLI does.
std::vector<std::vector<int32_t>> shared_prompts(int n) {
  const auto model = model::Model::load(test::shared_path("models/stories260K.gguf"));
  const auto tk = tok::Tokenizer::from_gguf(model->file());
  std::vector<std::vector<int32_t>> out;
  const std::vector<uint8_t> bytes = test::read_bytes(test::shared_path("models/prompts-stories-kjv.txt"));
  std::stringstream in(std::string(bytes.begin(), bytes.end()));
  for (std::string line; std::getline(in, line) && int(out.size()) < n;)
    if (!line.empty()) out.push_back(tk->encode(line, tk->add_bos_default()));
  return out;
}

TEST(KvQuantInLoop, NothingQuantizedIsTheCanonicalRunBitForBit) {
  model::Engine e = stories();
  const KvQuantReference ref = make_reference(e, kPrompt, 6, 5);
  const KvCachePlan f16 = KvCachePlan::uniform(e.config().n_layers, TensorType::F16, TensorType::F16);
  const std::vector<float> in_loop = run_plan(e, ref, f16, KvQuantMode::in_loop, KvRotation::llamacpp);
  ASSERT_EQ(in_loop.size(), ref.logits.size());
  EXPECT_EQ(std::memcmp(in_loop.data(), ref.logits.data(), in_loop.size() * 4), 0);
  // And forward() of the whole prompt at once.
  model::KvCache c = e.new_cache(int(kPrompt.size()));
  const std::vector<float> all =
      e.forward(c, std::span<const int32_t>(kPrompt.data(), size_t(ref.q + ref.c)), nullptr, true);
  const size_t V = size_t(e.config().n_vocab);
  EXPECT_EQ(std::memcmp(in_loop.data(), all.data() + size_t(ref.q) * V, in_loop.size() * 4), 0);
  // Quantizing changes the logits, in either mode, and the modes differ.
  const KvCachePlan q8 = KvCachePlan::uniform(e.config().n_layers, TensorType::Q8_0, TensorType::Q8_0);
  const std::vector<float> a = run_plan(e, ref, q8, KvQuantMode::in_loop, KvRotation::llamacpp);
  const std::vector<float> b = run_plan(e, ref, q8, KvQuantMode::prefix, KvRotation::llamacpp);
  EXPECT_NE(std::memcmp(a.data(), ref.logits.data(), a.size() * 4), 0);
  EXPECT_NE(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
}

// kv compare's native state of t[0..Q) with resume token t[Q], as the engine prefills it.
ComparedState native_state(model::Engine& e, const std::vector<int32_t>& t, int q) {
  const model::ModelConfig& cfg = e.config();
  ComparedState s;
  s.cache = e.new_cache(q);
  e.forward(s.cache, std::span<const int32_t>(t.data(), size_t(q)));
  s.identity.kind = "native";
  s.identity.model_identity = e.model().identity();
  s.identity.architecture = model::arch_name(cfg.arch);
  s.identity.engine_fingerprint = e.fingerprint();
  s.identity.snapshot_id = std::string(64, '5');
  s.identity.keys_sha256 = active_keys_sha256(s.cache);
  s.identity.values_sha256 = active_values_sha256(s.cache);
  s.coords.n_layers = cfg.n_layers;
  s.coords.n_kv_heads = cfg.n_kv_heads;
  s.coords.head_dim = cfg.head_dim;
  s.coords.n_pos = q;
  s.coords.prefix_tokens.assign(t.begin(), t.begin() + q);
  s.coords.tokenizer_identity = "t";
  s.coords.resume_token = t[size_t(q)];
  return s;
}

TEST(KvQuantInLoop, OneLayerFigureIsKvPerturbPlusKvCompares) {
  model::Engine e = stories();
  KvQuantStudyOptions o;
  o.types = {TensorType::Q4_0};
  o.parts = {PerturbPart::kv};
  o.continuation = 1;
  o.top_k = 5;
  o.mode = KvQuantMode::prefix;  // what kv perturb + kv compare measure
  o.groups = KvQuantStudyOptions::Groups::layers;
  const KvQuantStudy st = run_kv_quant_study(e, {kPrompt}, o);
  ASSERT_EQ(st.configs.size(), 1u);
  const KvQuantConfig& c = st.configs[0];
  ASSERT_EQ(int(c.per_layer.size()), e.config().n_layers);
  EXPECT_TRUE(c.per_layer_head.empty());
  const int q = int(kPrompt.size()) - 2;
  const ComparedState native = native_state(e, kPrompt, q);
  auto compared = [&](std::vector<int> layers) {
    PerturbSpec spec;
    spec.quantize = TensorType::Q4_0;
    spec.part = PerturbPart::kv;
    spec.layers = std::move(layers);
    const PerturbReceipt r = make_receipt(native, spec);
    ComparedState right;
    right.identity = native.identity;
    right.coords = native.coords;
    right.cache = native.cache.copy();
    const PerturbedState p = apply_perturbation(std::move(right), r);
    const Diagnostics d = run_diagnostics(e, native, p.state(), DiagnosticsOptions{1});
    return d.same_input.steps.at(0);
  };
  double sum = 0;
  for (int l = 0; l < e.config().n_layers; ++l) {
    const SameInputStep s = compared({l});
    ASSERT_TRUE(s.logits_kl);
    EXPECT_EQ(c.per_layer[size_t(l)].kl_mean, *s.logits_kl) << "layer " << l;
    EXPECT_EQ(c.per_layer[size_t(l)].top1, s.top1_left == s.top1_right ? 1.0 : 0.0) << "layer " << l;
    sum += *s.logits_kl;
  }
  EXPECT_GT(sum, 0.0);
  const SameInputStep all = compared({});
  EXPECT_EQ(c.kl_mean, *all.logits_kl);
}

TEST(KvQuantInLoop, PerHeadFiguresAndTheirMaps) {
  model::Engine e = stories();
  KvQuantStudyOptions o;
  o.types = {TensorType::Q4_0};
  o.parts = {PerturbPart::k, PerturbPart::kv};
  o.continuation = 3;
  const KvQuantStudy st = run_kv_quant_study(e, {kPrompt}, o);
  const int L = e.config().n_layers, G = e.config().n_kv_heads;
  EXPECT_TRUE(st.configs[0].per_layer.empty());  // K only: no groups
  const KvQuantConfig& c = st.configs[1];
  ASSERT_EQ(int(c.per_layer_head.size()), L * G);
  double heads = 0;
  for (const KvQuantFigures& f : c.per_layer_head) heads += f.kl_mean;
  EXPECT_GT(heads, 0.0);
  const std::string html = st.html();
  EXPECT_NE(html.find("data-kl-map=\"1\""), std::string::npos);
  EXPECT_NE(html.find("bits per value"), std::string::npos);
  EXPECT_NE(st.json().find("\"per_layer_head\""), std::string::npos);
  EXPECT_NE(st.table().find("mode in-loop"), std::string::npos);
}

TEST(KvQuantBudget, ParsesOnlyWhatItDocuments) {
  EXPECT_EQ(parse_kv_budget("kl<=0.01", "w", "--budget").kl_max, 0.01);
  const KvBudget b = parse_kv_budget("kl<=1e-3,top1>=0.95", "w", "--budget");
  EXPECT_EQ(*b.top1_min, 0.95);
  for (const char* bad : {"", "kl<0.1", "kl<=", "kl<=-1", "kl<=0.1,", "kl<=0.1,top1>=2", "kl<=0.1 ", "kl<=nan",
                          "top1>=0.9"})
    EXPECT_NE(test::error_of([&] { parse_kv_budget(bad, "w", "--budget"); }).find("--budget"), std::string::npos)
        << bad;
}

struct BudgetFixture : ::testing::Test {
  static void SetUpTestSuite() {
    engine = std::make_unique<model::Engine>(model::Model::load(test::shared_path("models/stories260K.gguf")),
                                             model::EngineOptions{1, false});
    prompts = shared_prompts(16);
    KvQuantStudyOptions o;
    o.continuation = 6;
    result = std::make_unique<KvBudgetResult>(run_kv_quant_budget(*engine, prompts, o, parse_kv_budget("kl<=0.02", "t", "b")));
  }
  static void TearDownTestSuite() {
    result.reset();
    engine.reset();
  }
  static inline std::unique_ptr<model::Engine> engine;
  static inline std::vector<std::vector<int32_t>> prompts;
  static inline std::unique_ptr<KvBudgetResult> result;
};

TEST_F(BudgetFixture, ChoiceMeetsTheBudgetOnTheHeldOutPrompts) {
  const KvBudgetResult& r = *result;
  const KvBudgetCandidate& c = r.tried[r.chosen];
  EXPECT_TRUE(c.plan.quantizes_any()) << "q8_0 meets 0.02 on stories260K";
  EXPECT_LT(c.bytes_per_position, r.f16_bytes_per_position);
  // Measured again here, on the odd prompts, with the study's own pieces.
  KvQuantScore s;
  for (size_t i = 1; i < prompts.size(); i += 2) {
    const KvQuantReference ref = make_reference(*engine, prompts[i], 6, 10);
    s.add(ref, run_plan(*engine, ref, c.plan, KvQuantMode::in_loop, KvRotation::llamacpp), engine->config().n_vocab,
          10, "test");
  }
  EXPECT_LE(summarize_kl(s.kl).mean, 0.02);
  EXPECT_EQ(summarize_kl(s.kl).mean, c.held_out->kl_mean);
  // Everything cheaper-or-equal measured before it failed on the choosing or held-out prompts.
  for (size_t i = 0; i < r.chosen; ++i) {
    EXPECT_LE(r.tried[i].bytes_per_position, c.bytes_per_position);
    EXPECT_TRUE(!r.tried[i].choose.meets(r.budget) || !r.tried[i].held_out->meets(r.budget));
  }
}

TEST_F(BudgetFixture, CertificateValidatesAndAnEditedOneDoesNot) {
  const std::string dir = test::temp_dir("kvq-cert");
  ed25519_generate(dir + "/key.pem", dir + "/key.pub.pem", false);
  KvCertificateInputs in{"stories260K.gguf", "prompts-stories-kjv.txt", std::string(64, 'a'), "ember test", 16};
  const nlohmann::json cert = nlohmann::json::parse(kv_quant_certificate(*result, in, dir + "/key.pem").dump());
  auto errors = [](const nlohmann::json& j) { return contract::validate_document(j, "cert").errors; };
  EXPECT_EQ(contract::validate_document(cert, "cert").schema, "kv-quant-certificate");
  ASSERT_TRUE(errors(cert).empty()) << errors(cert).front();
  // An edited figure: the seal no longer matches.
  nlohmann::json edited = cert;
  edited["measured"]["held_out"]["kl_mean"] = 0.0;
  ASSERT_FALSE(errors(edited).empty());
  EXPECT_EQ(errors(edited).front().rfind("/seal:", 0), 0u) << errors(edited).front();
  // Resealed by the editor: the signature no longer verifies.
  edited["seal"] = kv::manifest_seal(edited);
  ASSERT_FALSE(errors(edited).empty());
  EXPECT_EQ(errors(edited).front().rfind("/signature/value:", 0), 0u) << errors(edited).front();
  // Resealed and unsigned, with a budget the figures do not meet: refused by what it claims.
  nlohmann::json tighter = cert;
  tighter.erase("signature");
  tighter["budget"]["kl_mean_max"] = 0.0;
  tighter["seal"] = kv::manifest_seal(tighter);
  ASSERT_FALSE(errors(tighter).empty());
  EXPECT_EQ(errors(tighter).front().rfind("/measured/held_out/kl_mean:", 0), 0u) << errors(tighter).front();
  // An unknown field: the schema.
  nlohmann::json extra = cert;
  extra["note"] = "x";
  EXPECT_FALSE(errors(extra).empty());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ember::analysis::kv_quant_inloop_test
