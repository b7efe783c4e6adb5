#pragma once
// KL divergence between the next-token distributions of two logit rows: the one function every
// report that compares logits uses (kv compare --model, the mapping studies, the KV
// quantization study), so their figures mean the same thing.
//
//   KL(target || other) = sum_i p_i (log p_i - log q_i),  p = softmax(target), q = softmax(other)
//
// in nats, computed in f64: each row's log-softmax is x_i - max - log(sum_j exp(x_j - max)),
// summed in index order, and terms with p_i == 0 (exp underflow) contribute 0. The target is
// the reference (the native cache, the target model's own logits); this is the figure
// llama.cpp's `llama-perplexity --kl-divergence` reports as KLD (base || candidate).
#include <cstddef>
#include <optional>
#include <vector>

namespace ember {

// KL(target || other) over n >= 1 logits. nullopt when any logit is NaN or Inf. Never
// negative: a rounding-level negative sum is reported as 0.
std::optional<double> kl_divergence(const float* target, const float* other, size_t n);

// log softmax of n >= 1 finite logits, in f64, as kl_divergence computes it.
std::vector<double> log_softmax(const float* x, size_t n);

}  // namespace ember
