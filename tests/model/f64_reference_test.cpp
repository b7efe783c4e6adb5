// The engine against an independent f64 forward pass (reference_forward.cpp) on tiny models
// that cover each architecture feature: GQA ratios, Q/K/V biases, Q/K norm with an explicit
// head dim, NEOX vs normal RoPE, tied output, RoPE scaling. With the reference rounding
// the attention operands to f16 as the contract does, the only remaining differences are f32
// rounding; against the exact f64 pass, they are the f16 operands' effect.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "model/engine.h"
#include "model/reference_forward.h"
#include "model/tiny_model.h"

namespace ember::model {
namespace {

struct Diff {
  double max_abs = 0, scale = 0;  // scale: max |reference logit|
};

Diff compare(const std::vector<float>& got, const std::vector<double>& want) {
  Diff d;
  for (size_t i = 0; i < got.size(); ++i) {
    d.max_abs = std::max(d.max_abs, std::fabs(double(got[i]) - want[i]));
    d.scale = std::max(d.scale, std::fabs(want[i]));
  }
  return d;
}

void check(const test::TinySpec& spec) {
  SCOPED_TRACE(spec.name());
  const gguf::GgufFile file = test::make_tiny_gguf(spec);
  auto m = Model::load(file);
  Engine e(m, EngineOptions{2});
  std::vector<int32_t> tokens(12);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 41 + 7) % size_t(spec.vocab));
  KvCache cache = e.new_cache(int(tokens.size()));
  const std::vector<float> got = e.forward(cache, tokens, nullptr, true);
  const Diff f16 = compare(got, test::reference_logits(file, tokens, true));
  const Diff exact = compare(got, test::reference_logits(file, tokens, false));
  std::printf("[ measured ] %-36s logit scale %.2f  max|diff| vs f64+f16-operands %.2e, vs exact f64 %.2e\n",
              spec.name().c_str(), f16.scale, f16.max_abs, exact.max_abs);
  ASSERT_GT(f16.scale, 0.5);  // the model produces non-trivial logits
  EXPECT_LE(f16.max_abs, 1e-3 * f16.scale);  // an f16 rounding that flips moves a logit ~1e-4
  EXPECT_LE(exact.max_abs, 1e-2 * exact.scale);
}

TEST(F64Reference, LlamaGqa) { check({}); }
TEST(F64Reference, LlamaMqaTied) {
  test::TinySpec s;
  s.kv_heads = 1;
  s.tied = true;
  check(s);
}
TEST(F64Reference, LlamaMhaThreeLayers) {
  test::TinySpec s;
  s.kv_heads = 4;
  s.layers = 3;
  check(s);
}
TEST(F64Reference, LlamaRopeScalingLlama3) {
  test::TinySpec s;
  s.rope_scaling = "llama3";
  s.theta = 500000.0f;
  check(s);
}
TEST(F64Reference, LlamaRopeScalingLinear) {
  test::TinySpec s;
  s.rope_scaling = "linear";
  check(s);
}
TEST(F64Reference, Qwen2BiasNeoxTied) {
  test::TinySpec s;
  s.arch = "qwen2";
  s.bias = true;
  s.tied = true;
  check(s);
}
TEST(F64Reference, Qwen2GqaFourToOne) {
  test::TinySpec s;
  s.arch = "qwen2";
  s.bias = true;
  s.heads = 8;
  s.kv_heads = 2;
  check(s);
}
TEST(F64Reference, Qwen3QkNormExplicitHeadDim) {
  test::TinySpec s;
  s.arch = "qwen3";
  s.qk_norm = true;
  s.head_dim = 128;
  check(s);
}
TEST(F64Reference, F16Weights) {
  test::TinySpec s;
  s.arch = "qwen3";
  s.qk_norm = true;
  s.wtype = gguf::TensorType::F16;
  check(s);
}

}  // namespace
}  // namespace ember::model
