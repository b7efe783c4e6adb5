#include "model/generate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "util/error.h"

namespace ember::model {

int32_t argmax(const float* logits, int n) {
  int32_t best = 0;
  for (int i = 1; i < n; ++i)
    if (logits[i] > logits[best] || std::isnan(logits[best])) best = i;
  return best;
}

Sampler::Sampler(SamplingParams params) : params_(params), state_(params.seed) {
  if (!(params.top_p > 0.0f && params.top_p <= 1.0f))
    fail_field("sampling", "top_p", "in (0, 1]", std::to_string(params.top_p));
  if (params.top_k < 0) fail_field("sampling", "top_k", ">= 0", std::to_string(params.top_k));
  if (!std::isfinite(params.temperature))
    fail_field("sampling", "temperature", "a finite number", std::to_string(params.temperature));
}

double Sampler::next_uniform() {
  // splitmix64: fully specified here, unlike std:: distributions.
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return double(z >> 11) * 0x1.0p-53;
}

int32_t Sampler::select(const float* logits, int n_vocab) {
  if (params_.greedy()) return argmax(logits, n_vocab);
  std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
  std::iota(ids.begin(), ids.end(), 0);
  auto by_logit = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  size_t keep = size_t(n_vocab);
  if (params_.top_k > 0 && size_t(params_.top_k) < keep) keep = size_t(params_.top_k);
  std::partial_sort(ids.begin(), ids.begin() + std::ptrdiff_t(keep), ids.end(), by_logit);
  ids.resize(keep);
  std::vector<double> p(keep);
  const double t = params_.temperature, top = double(logits[ids[0]]);
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) {
    p[i] = std::exp((double(logits[ids[i]]) - top) / t);
    sum += p[i];
  }
  size_t cut = keep;
  if (params_.top_p < 1.0f) {
    double mass = 0;
    for (size_t i = 0; i < keep; ++i) {
      mass += p[i] / sum;
      if (mass >= double(params_.top_p)) {
        cut = i + 1;
        break;
      }
    }
  }
  double total = 0;
  for (size_t i = 0; i < cut; ++i) total += p[i];
  const double u = next_uniform() * total;
  double acc = 0;
  for (size_t i = 0; i < cut; ++i) {
    acc += p[i];
    if (u < acc) return ids[i];
  }
  return ids[cut - 1];
}

GenerateResult generate(Engine& engine, KvCache& cache, std::span<const int32_t> input,
                        const GenerateOptions& options, Sampler& sampler,
                        const StepCallback& on_step) {
  if (input.empty()) fail_field("generate", "input tokens", "at least one", "none");
  if (options.max_steps < 0)
    fail_field("generate", "steps", ">= 0", std::to_string(options.max_steps));
  if (options.prefill_chunk < 1)
    fail_field("generate", "prefill chunk", ">= 1", std::to_string(options.prefill_chunk));
  // Needed: the input plus every selected token but the last.
  const int64_t need = int64_t(cache.n_pos) + int64_t(input.size()) +
                       std::max(0, options.max_steps - 1);
  // Checked before anything is evaluated; the cache itself grows as it fills.
  if (need > engine.position_limit())
    fail_field("generate", "positions", "at most " + std::to_string(engine.position_limit()) +
               (engine.options().allow_past_context ? "" : " (the model's context length; "
                "--allow-past-context to go past it)"), std::to_string(need));
  GenerateResult result;
  if (options.max_steps == 0) return result;
  std::vector<float> logits;
  for (size_t done = 0; done < input.size();) {
    const size_t len = std::min(input.size() - done, size_t(options.prefill_chunk));
    logits = engine.forward(cache, input.subspan(done, len), options.hooks);
    done += len;
  }
  const int V = engine.config().n_vocab;
  for (int step = 0; step < options.max_steps; ++step) {
    const int32_t token = sampler.select(logits.data(), V);
    result.tokens.push_back(token);
    if (on_step) on_step(step, std::span<const float>(logits), token);
    if (options.is_eog && options.is_eog(token)) {
      result.stopped_at_eog = true;
      break;
    }
    if (step + 1 == options.max_steps) break;
    logits = engine.forward(cache, std::span<const int32_t>(&token, 1), options.hooks);
  }
  return result;
}

}  // namespace ember::model
