#pragma once
// The generation loop shared by `ember run`, snapshot export/replay and the diagnostics:
// feed tokens, take the logits of the last one, select, repeat. Selection is greedy by default
// (argmax, ties to the lowest id) or seeded sampling that depends only on the seed and the
// logits, so a run is reproducible bit for bit.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "model/engine.h"

namespace ember::model {

struct SamplingParams {
  float temperature = 0.0f;  // <= 0: greedy
  int top_k = 0;             // 0: all tokens
  float top_p = 1.0f;        // nucleus mass in (0, 1]
  uint64_t seed = 0;
  bool greedy() const { return temperature <= 0.0f; }
};

// Greedy: the first index of the maximum (NaN never wins). n >= 1.
int32_t argmax(const float* logits, int n);

// Selects tokens from logits. Greedy ignores the random state; sampling draws one
// splitmix64 number per call: temperature scaling, top-k (ties broken by lower id), softmax in
// f64, top-p over the sorted probabilities, then the inverse CDF.
class Sampler {
 public:
  explicit Sampler(SamplingParams params);
  int32_t select(const float* logits, int n_vocab);
  const SamplingParams& params() const { return params_; }

 private:
  double next_uniform();  // [0, 1)
  SamplingParams params_;
  uint64_t state_;
};

struct GenerateOptions {
  // Selection steps: each evaluates pending tokens, yields one logits row and one token.
  int max_steps = 16;
  // Stop after selecting a token for which is_eog returns true (null: never stop).
  std::function<bool(int32_t)> is_eog;
  // Tokens evaluated per forward() while consuming the input (bit-identical for any value).
  int prefill_chunk = 256;
  const ForwardHooks* hooks = nullptr;
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // the selected ids, in order
  bool stopped_at_eog = false;
};

// Called once per step with the selection logits [n_vocab] and the selected token.
using StepCallback = std::function<void(int step, std::span<const float> logits, int32_t token)>;

// Evaluates `input` at positions [cache.n_pos, ...) (the prompt, or a snapshot's resume
// token), then for each step: select from the last logits, report it, and unless it was the
// last step or an end-of-generation token, evaluate the selected token. The final selected
// token is never evaluated, so its K/V is not in the cache (it is the resume token of an
// export). Error, before anything is evaluated, if input is empty or the positions needed
// (cache.n_pos + input + max_steps - 1) exceed engine.position_limit(). The cache grows as it
// fills; callers allocate it for what it already holds.
GenerateResult generate(Engine& engine, KvCache& cache, std::span<const int32_t> input,
                        const GenerateOptions& options, Sampler& sampler,
                        const StepCallback& on_step = {});

}  // namespace ember::model
