// The toy-model MLP and norm of `study recompute-anchor` (seed 001's configuration): GELU
// against the erf definition, LayerNorm against an f64 reference, and a GELU + LayerNorm llama
// file that loads without ffn_gate, keeps the numerics contract (prefill == token-by-token
// decode, bit for bit) and computes something else than its SwiGLU + RMSNorm twin.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "gguf/gguf_file.h"
#include "gguf/synth.h"
#include "model/engine.h"
#include "ops/activations.h"
#include "ops/norm.h"
#include "support/test_support.h"

namespace ember::model {
namespace {

TEST(ToyMlp, GeluMatchesTheErfDefinition) {
  std::vector<float> x, y;
  for (int i = -800; i <= 800; ++i) x.push_back(float(i) / 100.0f);
  y.resize(x.size());
  ops::gelu_row(x.data(), int64_t(x.size()), y.data());
  for (size_t i = 0; i < x.size(); ++i) {
    const double ref = 0.5 * double(x[i]) * (1.0 + std::erf(double(x[i]) / std::sqrt(2.0)));
    EXPECT_NEAR(y[i], ref, 4e-7 * std::max(1.0, std::fabs(double(x[i])))) << x[i];
  }
  EXPECT_EQ(y[800], 0.0f);  // gelu(0)
}

TEST(ToyMlp, LayerNormMatchesAnF64Reference) {
  const float x[6] = {1.0f, -2.0f, 3.5f, 0.25f, -0.75f, 8.0f}, w[6] = {1.0f, 0.5f, 2.0f, 1.0f, -1.0f, 1.5f};
  float y[6];
  ops::layernorm_row(x, w, 6, 1e-5f, y);
  double m = 0, v = 0;
  for (float t : x) m += t;
  m /= 6;
  for (float t : x) v += (t - m) * (t - m);
  v /= 6;
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(y[i], (x[i] - m) / std::sqrt(v + 1e-5) * w[i], 1e-5) << i;
}

TEST(ToyMlp, AGeluLayerNormModelLoadsAndKeepsTheContract) {
  const std::string dir = test::temp_dir("toy-mlp");
  gguf::SynthSpec s;
  s.arch = "llama";
  s.layers = 2, s.hidden = 24, s.heads = 4, s.kv_heads = 4, s.ffn = 96, s.vocab = 300, s.seed = 5;
  gguf::synth_model(s).write_file(dir + "/swiglu.gguf", true);
  s.ffn_activation = "gelu";
  s.norm = "layernorm";
  gguf::synth_model(s).write_file(dir + "/gelu.gguf", true);
  auto toy = Model::load(dir + "/gelu.gguf");
  EXPECT_EQ(toy->config().ffn_activation, FfnActivation::gelu);
  EXPECT_EQ(toy->config().norm, NormKind::layernorm);
  EXPECT_EQ(toy->file().find_tensor("blk.0.ffn_gate.weight"), nullptr);
  const std::vector<int32_t> ids = {1, 17, 200, 43, 99, 5, 260};
  Engine e(toy, {2});
  KvCache c = e.new_cache(16);
  const std::vector<float> prefill = e.forward(c, ids);
  KvCache d = e.new_cache(16);
  std::vector<float> step;
  for (int32_t id : ids) step = e.forward(d, std::span<const int32_t>(&id, 1));
  ASSERT_EQ(step.size(), prefill.size());
  EXPECT_EQ(std::memcmp(step.data(), prefill.data(), step.size() * 4), 0);
  auto twin = Model::load(dir + "/swiglu.gguf");
  Engine t(twin, {1});
  KvCache tc = t.new_cache(16);
  const std::vector<float> other = t.forward(tc, ids);
  EXPECT_NE(std::memcmp(other.data(), prefill.data(), other.size() * 4), 0);
  // The toy keys are refused outside llama files and with unknown values.
  s.arch = "qwen2";
  s.qkv_bias = true;
  EXPECT_NE(test::error_of([&] { gguf::resolve_synth_spec(s); }).find("--activation/--norm"), std::string::npos);
  s.arch = "llama";
  s.qkv_bias = false;
  s.ffn_activation = "relu";
  EXPECT_NE(test::error_of([&] { gguf::resolve_synth_spec(s); }).find("--activation: expected swiglu or gelu"),
            std::string::npos);
}

}  // namespace
}  // namespace ember::model
